"""The JVM's stderr through logging: a Python process of Spark's that the JVM hangs up on when a query stops
prints a traceback ending in EOFError; once the job's stop has begun that is the stop, said in one DEBUG line,
while before it, and any other traceback at any time, passes whole."""

from __future__ import annotations

import logging

from streaming.spark.jvm_log import PeerClosedTracebacks

AT_STOP = """Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 265, in main
    func_id = read_int(infile)
              ^^^^^^^^^^^^^^^^
  File "/v/lib/python3.11/site-packages/pyspark/serializers.py", line 604, in read_int
    raise EOFError
EOFError
During handling of the above exception, another exception occurred:
Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/pyspark/worker_util.py", line 253, in get_sock_file_to_executor
    sock.sendall(b"x")
BrokenPipeError: [Errno 32] Broken pipe""".splitlines()


def _fed(lines: list[str], stopping: bool = True) -> list[str]:
    passed: list[str] = []
    folded = PeerClosedTracebacks(passed.append, lambda: stopping)
    for line in lines:
        folded.feed(line)
    folded.flush()
    return passed


def test_a_traceback_of_a_connection_the_jvm_closed_is_one_debug_line(caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="spark.stderr"):
        passed = _fed(["before", *AT_STOP, '{"log.level": "WARN", "message": "after"}'])
    assert passed == ["before", '{"log.level": "WARN", "message": "after"}']
    said = [r.getMessage() for r in caplog.records]
    assert said == ["sql/streaming/python_streaming_source_runner.py ended as the JVM closed its connection "
                    "(BrokenPipeError): a query or the session stopped"], said


def test_one_cut_short_by_another_processs_line_is_judged_by_what_it_got_to(caplog) -> None:
    other = '{"log.level": "WARN", "message": "Failed to cancel job group"}'
    with caplog.at_level(logging.DEBUG, logger="spark.stderr"):
        passed = _fed([*AT_STOP[:10], other, "    sock.sendall(b'x')"])
    assert passed == [other, "    sock.sendall(b'x')"] and len(caplog.records) == 1, (passed, caplog.records)
    assert "(EOFError)" in caplog.records[0].getMessage()


def test_any_other_traceback_passes_whole() -> None:
    failure = [*AT_STOP[:6], "ValueError: a task's own failure"]
    assert _fed([*failure, "next"]) == [*failure, "next"]
    assert _fed(AT_STOP[:4]) == AT_STOP[:4], "one cut short by the JVM's exit passes as it came"


def test_the_same_traceback_before_the_stop_began_passes_whole(caplog) -> None:
    """A worker whose connection broke mid-run is a failure, whatever its exception, and the drills' checks for
    "Traceback" must see it."""
    with caplog.at_level(logging.DEBUG, logger="spark.stderr"):
        passed = _fed(["before", *AT_STOP, "after"], stopping=False)
    assert passed == ["before", *AT_STOP, "after"] and not caplog.records


def test_the_job_says_when_its_stop_begins() -> None:
    from streaming.spark import jvm_log
    from streaming.spark.driver import SparkEngine

    jvm_log.STOP_BEGUN.clear()
    try:
        assert not PeerClosedTracebacks(print).stopping()
        SparkEngine(lambda: None).stop_begun()
        assert PeerClosedTracebacks(print).stopping()
    finally:
        jvm_log.STOP_BEGUN.clear()
