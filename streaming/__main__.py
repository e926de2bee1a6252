"""`python -m streaming` is the same program as the `kcompact` console command."""

from streaming.cli import main

raise SystemExit(main())
