"""What a streaming query's checkpoint says its last committed micro-batch read, without starting Spark.

Spark writes a micro-batch's planned end offsets to ``offsets/<batch>`` before running it and
``commits/<batch>`` after it succeeds; the offsets file is a version line, the batch's metadata, then one
line per source: here the Kafka source's offsets JSON (streaming.spark.source.offsets). A batch planned but
not committed is read again on the next start, so it does not count.
"""

from __future__ import annotations

import json
import posixpath

from streaming.log.storage import Storage
from streaming.partition_id import PartitionId
from streaming.spark.source.offsets import flatten

OFFSETS, COMMITS = "offsets", "commits"


def committed_offsets(storage: Storage, checkpoint: str) -> dict[PartitionId, int] | None:
    """Each source partition's offset after the last committed batch; None when no batch was committed or
    the checkpoint is not one this package's source wrote."""
    batches = [int(o.name) for o in storage.list(posixpath.join(checkpoint, OFFSETS)) if o.name.isdigit()]
    if not batches or not storage.exists(posixpath.join(checkpoint, COMMITS, str(max(batches)))):
        return None
    lines = storage.get(posixpath.join(checkpoint, OFFSETS, str(max(batches)))).decode().splitlines()
    if len(lines) != 3 or not lines[0].startswith("v"):  # one source: ours
        return None
    return {PartitionId(t, p): o for (t, p), o in flatten(json.loads(lines[2])).items()}
