"""Records a producer should not send but will: each one handled as stated, counted, never silently lost.

Keyless records (per policy), header versions and refused configurations have their own tests
(test_compactor_e2e.py, tests/cleaner); refused credentials are in test_security.py.
"""

from __future__ import annotations

import base64
import time

import pytest

from streaming.kafka.admin import unique_topic_name
from tests.e2e.helpers import dump_json, read_topic, run_once, sent_view, sink_view, status_json, winners
from tests.kafka_helpers import Sent, produce

pytestmark = pytest.mark.integration

HOUR = 3_600_000
NOT_UTF8 = b"\xff\xfe\x00key"


def test_odd_records_are_stored_emitted_and_counted(spark, bootstrap_servers, new_topic, tmp_path, capsys) -> None:
    # Kafka refuses a record stamped more than message.timestamp.after.max.ms ahead (1 h by default): this
    # topic lets any through, and the compactor keeps its own 1 h bound to count them.
    src = new_topic(partitions=1, config={"message.timestamp.after.max.ms": str(2**63 - 1)})
    sink = unique_topic_name("sink")
    now = int(time.time() * 1000)
    far_future = now + 30 * 24 * HOUR
    sent = produce(bootstrap_servers, src, [
        Sent(0, b"future", b"stamped a month ahead", far_future),  # first in its segment
        Sent(0, NOT_UTF8, b"\xc3\x28 not utf-8 either", now - 2 * HOUR),
        Sent(0, b"no-time", b"NO_TIMESTAMP", -1),
        Sent(0, b"negative", b"before 1970", -5),
        Sent(0, b"big", b"x" * 5000, now - 2 * HOUR),  # larger than segment.bytes: a segment of its own
        Sent(0, NOT_UTF8, b"second", now - 2 * HOUR + 1),
        Sent(0, b"big", b"y" * 5000, now - 2 * HOUR + 2),
    ])
    config = ("segment.bytes=2048", "max.compaction.lag.ms=1000", "message.timestamp.after.max.ms=3600000")
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0
    status = status_json(str(tmp_path), capsys)
    assert status["job"]["records-timestamp-out-of-range"] == 3, "the run that ingested them counted them"
    assert status["partitions"][0]["segments"] >= 3
    time.sleep(1.5)  # past max.compaction.lag.ms from the append: the far-future record does not pin the log
    assert run_once(bootstrap_servers, src, sink, str(tmp_path), *config) == 0

    got = read_topic(bootstrap_servers, sink, 1)[0]
    assert sink_view(got) == sent_view(winners(sent)), "every key's winner reached the sink, bytes intact"
    assert [r["timestamp"] for r in got] == [s.timestamp for s in winners(sent)], "timestamps are the producer's"

    dumped = {(r["offset"]): r for r in dump_json(str(tmp_path), capsys)}
    odd_key = dumped[5]["key"]
    assert odd_key == {"base64": base64.b64encode(NOT_UTF8).decode()}, "dump never mangles non-UTF-8 bytes"
