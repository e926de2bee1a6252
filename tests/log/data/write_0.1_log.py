"""Writes a partition log with kcompact 0.1's own code (run from a checkout of a0d9a66)."""
import os, shutil, sys
from streaming.cleaner import CompactionConfig, LogCleanerManager, PartitionId
from streaming.log import PartitionLog, make_record
out = sys.argv[1]
NOW = 1_700_000_000_000
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
cfg = CompactionConfig.from_mapping({"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "3600000"})
plog = PartitionLog(out, cfg.log_config, jitter_seed="orders-0")
plog.append([make_record(o, b"k%d" % (o % 3), b"v%d" % o, NOW + o) for o in range(5)], now_ms=NOW)
plog.append([make_record(5, b"k1", None, NOW + 5)], now_ms=NOW)
plog.roll()
LogCleanerManager(cfg).clean_partition(PartitionId("orders", 0), plog, now_ms=NOW + 10)
plog.append([make_record(o, b"k%d" % (o % 3), b"v%d" % o, NOW + o) for o in (7, 8)], now_ms=NOW + 20)
# a pass that died between writing its .cleaned file and renaming it
def died(*_):
    raise OSError("the process died here")
rename = plog.storage.rename
plog.storage.rename = died
try:
    plog.replace(plog.segments[:1], plog.segment_batches(plog.segments[0]))
except OSError:
    pass
plog.storage.rename = rename
# a crash between a segment file's append and its sidecar: the sidecar as it was before the append
active = plog.active
meta = os.path.join(out, f"{active.base_offset:020d}.meta.json")
kept = open(meta, "rb").read()
plog.append([make_record(o, b"torn", b"never committed", NOW + o) for o in (9, 10)], now_ms=NOW + 30)
open(meta, "wb").write(kept)
print(sorted(os.listdir(out)))
