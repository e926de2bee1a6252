"""What every Spark task of the compactor sets up in its Python worker process before it starts work.

Logging comes from the driver (logging_setup.configure_worker). Garbage collection is tuned for batches:
a task holds hundreds of thousands of container objects at once (a consume() result of Message objects and
their timestamp tuples, a batch of decoded records), and Python's cyclic collector with its default
thresholds (700, 10, 10) rescans them in its older generations over and over (bench/README.md has the
figures). The tasks make no reference cycles of their own (reference counting frees their objects), so
collecting about 140 times less often costs no memory; cycles made elsewhere are still found.
"""

from __future__ import annotations

import gc
from typing import Iterable, Mapping

from streaming.runtime.logging_setup import configure_worker

BATCH_GC_THRESHOLDS = (100_000, 10, 10)


def prepare_task(secret_settings: Iterable[Mapping[str, str]] = ()) -> None:
    """Call first in every task body; ``secret_settings`` are the task's client settings, for masking."""
    configure_worker(secret_settings)
    gc.set_threshold(*BATCH_GC_THRESHOLDS)
