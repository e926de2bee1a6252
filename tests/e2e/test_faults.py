"""Faults an operator will meet: damaged segments, a full state disk, a broker that goes away and comes back.

Each run goes through the CLI against the real broker; the sink is compared with the reference model.
"""

from __future__ import annotations

import glob
import os
import subprocess
import time

import pytest

from streaming.log.segment import META_SUFFIX, SegmentMeta, segment_name
from streaming.state_layout import log_dir
from streaming.topics import unique_topic_name
from tests.e2e.helpers import read_topic, run_once, sent_view, sink_view, status_json, winners
from tests.kafka_helpers import Sent, log_contents, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
FORCE = "max.compaction.lag.ms=60000"


def _past() -> int:
    return int(time.time() * 1000) - 2 * HOUR


def _sealed_segment(state_dir: str, topic: str, partition: int) -> tuple[str, SegmentMeta]:
    """The first sealed segment holding records, with its sidecar."""
    directory = log_dir(state_dir, topic, partition)
    metas = sorted((SegmentMeta.from_json(open(p, "rb").read())
                    for p in glob.glob(os.path.join(directory, "*" + META_SUFFIX))), key=lambda m: m.base_offset)
    meta = next(m for m in metas[:-1] if m.record_count)
    return os.path.join(directory, segment_name(meta.base_offset)), meta


def _damage(path: str, how: str) -> None:
    data = bytearray(open(path, "rb").read())
    if how == "truncate":
        data = data[:-25]
    else:
        at = data.index(b"value-") + 6
        data[at] ^= 0x01  # inside a value: still decodes, only the checksum can tell
    with open(path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_damaged_segment_makes_its_partition_uncleanable_and_the_others_go_on(
        spark, bootstrap_servers, new_topic, tmp_path, capsys, how: str) -> None:
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    state = str(tmp_path)
    past = _past()
    first = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 6), b"value-%d" % i, past + i)
                                             for i in range(40)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE) == 0
    path, meta = _sealed_segment(state, src, 0)
    _damage(path, how)

    second = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 9), b"value-x%d" % i, past + 100 + i)
                                              for i in range(30)])
    assert run_once(bootstrap_servers, src, sink, state, FORCE) == 1, "an uncleanable partition fails --once"

    got = read_topic(bootstrap_servers, sink, 2)
    healthy_first = [s for s in first if s.partition == 1]
    healthy_second = [s for s in second if s.partition == 1]
    new = [s for s in winners(healthy_first + healthy_second) if s.offset >= healthy_second[0].offset]
    assert sink_view(got[1]) == sent_view(winners(healthy_first) + new), "the healthy partition went on"
    assert sink_view(got[0]) == sent_view(winners([s for s in first if s.partition == 0])), \
        "nothing of the damaged partition was emitted after the damage"

    status = status_json(state, capsys)
    by_partition = {p["partition"]: p for p in status["partitions"]}
    damaged = by_partition[0]
    assert damaged["uncleanable"] and segment_name(meta.base_offset) in damaged["uncleanable_error"]
    if how == "truncate":  # found on open, from the file size alone
        assert list(damaged["damaged_segments"]) == [segment_name(meta.base_offset)]
    else:  # same size: found by the checksum when the cleaner read it
        assert "checksum mismatch" in damaged["uncleanable_error"] and not damaged["damaged_segments"]
    assert not by_partition[1]["uncleanable"]
    assert status["metrics"]["uncleanable-partitions-count"] == 1

    tail = log_contents(state, src, 0, from_offset=meta.next_offset)
    assert [o for o, *_ in tail][-15:] == [s.offset for s in second if s.partition == 0], \
        "the damaged partition's log still took every new record"


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs as the state dir (root only), grown by calling the returned function."""
    mount = tmp_path / "state"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()}); "
                    f"tests/log/test_disk_full.py covers a full disk under the log")

    def grow() -> None:
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)

    try:
        yield str(mount), grow
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_state_disk_stops_the_job_with_a_clear_error_and_loses_nothing(
        spark, bootstrap_servers, new_topic, small_tmpfs, capsys) -> None:
    state, grow = small_tmpfs
    src, sink = new_topic(partitions=2), unique_topic_name("sink")
    past = _past()
    sent = produce(bootstrap_servers, src, [Sent(i % 2, b"k%d" % (i % 300), b"value-%d-" % i + b"x" * 1000,
                                                 past + i) for i in range(3000)])
    capsys.readouterr()
    assert run_once(bootstrap_servers, src, sink, state, FORCE) == 2
    err = capsys.readouterr().err
    assert f"kcompact: error: the state dir {state} is full (No space left on device)" in err, err[-2000:]

    grow()
    by_offset = {(s.partition, s.offset): s for s in sent}
    for p in range(2):
        stored = log_contents(state, src, p)
        assert [o for o, *_ in stored] == list(range(len(stored))), "a prefix of the partition, nothing torn"
        assert all((k, v) == (by_offset[(p, o)].key, by_offset[(p, o)].value) for o, k, v, *_ in stored)
    assert run_once(bootstrap_servers, src, sink, state, FORCE) == 0
    got = read_topic(bootstrap_servers, sink, 2)
    for p in range(2):
        assert sink_view(got[p]) == sent_view(winners([s for s in sent if s.partition == p]))
