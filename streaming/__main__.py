"""`python -m streaming` is the same program as the `kcompact` console command."""

from streaming.cli.main import main

raise SystemExit(main())
