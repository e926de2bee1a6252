"""Each roll rule on its own: size (per record), record time (segment.ms less jitter, once per append as
Kafka checks it once per produce request), and KIP-354's forced roll."""

from __future__ import annotations

from streaming.log import LogConfig, PartitionLog, make_record, record_size


def _log(tmp_path, **cfg) -> PartitionLog:
    return PartitionLog(str(tmp_path), LogConfig(fsync=False, **cfg), jitter_seed="t-0")


def test_rolls_when_next_record_would_exceed_segment_bytes(tmp_path) -> None:
    one = record_size(make_record(0, b"k", b"v" * 50, 0))
    log = _log(tmp_path, segment_bytes=3 * one)
    log.append([make_record(o, b"k", b"v" * 50, 0) for o in range(7)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 3), (3, 3), (6, 1)]
    assert all(s.size_bytes <= 3 * one for s in log.segments)


def test_record_larger_than_segment_bytes_gets_a_segment_of_its_own(tmp_path) -> None:
    log = _log(tmp_path, segment_bytes=100)
    log.append([make_record(0, b"k", b"small", 0), make_record(1, b"k", b"x" * 500, 0),
                make_record(2, b"k", b"small", 0)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 1), (1, 1), (2, 1)]
    assert [r["offset"] for r in log.read()] == [0, 1, 2]


def test_rolls_when_record_time_passes_segment_ms(tmp_path) -> None:
    log = _log(tmp_path, segment_ms=1000)
    log.append([make_record(0, b"k", b"v", 10_000), make_record(1, b"k", b"v", 11_000)])
    assert len(log.segments) == 1, "exactly segment.ms later does not roll (Kafka: strictly greater)"
    log.append([make_record(2, b"k", b"v", 11_001)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 2), (2, 1)]


def test_compacted_log_rolls_at_max_lag_when_shorter_than_segment_ms(tmp_path) -> None:
    log = _log(tmp_path, segment_ms=1_000_000, max_compaction_lag_ms=500)
    log.append([make_record(0, b"k", b"v", 0)])
    log.append([make_record(1, b"k", b"v", 501)])
    assert len(log.segments) == 2


def test_time_rolls_at_most_once_per_append_and_never_split_it(tmp_path) -> None:
    log = _log(tmp_path, segment_ms=1_000_000, max_compaction_lag_ms=1)
    log.append([make_record(o, b"k", b"v", o) for o in range(1000)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 1000)], \
        "a thousand distinct milliseconds in one append: one segment, not one per millisecond"
    result = log.append([make_record(o, b"k", b"v", o) for o in range(1000, 3000)])
    assert result.rolled == 1
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 1000), (1000, 2000)]


def test_size_rolls_stay_per_record_within_an_append_that_also_rolls_on_time(tmp_path) -> None:
    one = record_size(make_record(0, b"k", b"v" * 50, 0))
    log = _log(tmp_path, segment_bytes=3 * one, segment_ms=10)
    log.append([make_record(0, b"k", b"v" * 50, 0)])
    log.append([make_record(o, b"k", b"v" * 50, 100 + o) for o in range(1, 8)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 1), (1, 3), (4, 3), (7, 1)]


def test_jitter_is_drawn_once_per_partition_and_kept_across_reopen(tmp_path) -> None:
    log = _log(tmp_path, segment_ms=10_000, segment_jitter_ms=5_000)
    assert 0 <= log.jitter_ms < 5_000
    again = _log(tmp_path, segment_ms=10_000, segment_jitter_ms=5_000)
    assert again.jitter_ms == log.jitter_ms
    log.append([make_record(0, b"k", b"v", 0)])
    log.append([make_record(1, b"k", b"v", 10_000 - log.jitter_ms + 1)])
    assert len(log.segments) == 2


def test_forced_roll_by_max_lag_without_new_records(tmp_path) -> None:
    log = _log(tmp_path, max_compaction_lag_ms=60_000)
    log.append([make_record(0, b"k", b"v", 1_000), make_record(1, b"k", b"v", 5_000)])
    assert log.maybe_roll(now_ms=61_000) is False, "first record exactly max lag old: not yet"
    assert log.maybe_roll(now_ms=61_001) is True
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 2), (2, 0)]
    assert log.active.empty and log.log_end_offset == 2
    assert log.maybe_roll(now_ms=10**12) is False, "an empty active segment never rolls"


def test_forced_roll_survives_reopen(tmp_path) -> None:
    log = _log(tmp_path, max_compaction_lag_ms=10)
    log.append([make_record(5, b"k", b"v", 0)])
    log.maybe_roll(now_ms=100)
    reopened = _log(tmp_path, max_compaction_lag_ms=10)
    assert [(s.base_offset, s.next_offset, s.record_count) for s in reopened.segments] == [(0, 6, 1), (6, 6, 0)]
    assert not reopened.recovery


def test_negative_and_far_future_timestamps_count_as_appended_for_rolls_and_lags(tmp_path) -> None:
    log = _log(tmp_path, max_compaction_lag_ms=1000, message_timestamp_after_max_ms=3_600_000)
    now = 1_800_000_000_000
    far = now + 10 * 86_400_000
    result = log.append([make_record(0, b"a", b"v", far), make_record(1, b"b", b"v", -1),
                         make_record(2, b"c", b"v", now - 5)], now_ms=now)
    assert result.odd_timestamps == 2
    assert (log.active.first_timestamp, log.active.largest_timestamp) == (now, now), \
        "the lag clock of the far-future and the negative record is their append time"
    assert [r["timestamp"] for r in log.read()] == [far, -1, now - 5], "the records keep their own timestamps"
    assert not log.maybe_roll(now + 1000)
    assert log.maybe_roll(now + 1001), "KIP-354's bound holds: a future timestamp does not pin the segment"


def test_timestamps_within_message_timestamp_after_max_ms_are_used_as_they_are(tmp_path) -> None:
    log = _log(tmp_path, message_timestamp_after_max_ms=60_000)
    now = 1_800_000_000_000
    assert log.append([make_record(0, b"a", b"v", now + 60_000)], now_ms=now).odd_timestamps == 0
    assert log.active.first_timestamp == now + 60_000


def test_roll_points_past_the_first_scan_window_are_found(tmp_path) -> None:
    one = record_size(make_record(0, b"k", b"v" * 50, 0))
    log = _log(tmp_path, segment_bytes=3000 * one)
    log.append([make_record(o, b"k", b"v" * 50, 0) for o in range(7000)])
    assert [(s.base_offset, s.record_count) for s in log.segments] == [(0, 3000), (3000, 3000), (6000, 1000)]
