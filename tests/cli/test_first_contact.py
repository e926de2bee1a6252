"""What a new user meets first: every mistake and every stop is a few clear lines with the right exit status,
nothing is created where a run is refused, and no line on stderr comes from anything but kcompact."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import javaproperties
import pytest

from streaming.cli.main import build_parser
from streaming.job.failures import explain_failure
from streaming.job.spec import JobMapping
from streaming.runtime.moments import HOLD_ENV, REACHED, RELEASE, Moment
from streaming.configuration.subscription import SubscribePattern
from tests.cli.test_status import write_state_dir
from tests.e2e.helpers import wait_for
from tests.kafka_helpers import Sent, produce

KCOMPACT = [sys.executable, "-m", "streaming"]
TEXT_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: |"
                       r"kcompact: )")
# A terminal's session: rich takes COLUMNS over the terminal's own width, and pytest-xdist's workers export
# COLUMNS=80 (a shell keeps it unexported)
TERMINAL_ENV = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}, "TERM": "xterm-256color"}
FOREIGN = re.compile(r"Traceback|Exception|py4j|at java\.|at org\.|%\d\|\w+\|FAIL|log4j|NativeCodeLoader|"
                     r"incubator|loopback|falling behind|Failed to cancel")


def kcompact(*argv: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*KCOMPACT, *argv], capture_output=True, text=True, timeout=timeout, **kw)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def assert_one_error(out: subprocess.CompletedProcess, *words: str, after_start: bool = False) -> None:
    """Exit 2 and one error line, the last; ``after_start``: a job that had started may have said what it
    mirrors before (INFO lines of its own)."""
    err = lines(out.stderr)
    assert out.returncode == 2, out.stderr[-3000:]
    assert err and err[-1].startswith("kcompact: error: "), out.stderr[-3000:]
    earlier = [line for line in err[:-1] if not (after_start and " INFO streaming." in line)]
    assert not earlier, out.stderr[-3000:]
    for word in words:
        assert word in err[-1], (word, err[-1])


def topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics


def produce_keyed(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes]], partitions: int = 1) -> None:
    now = int(time.time() * 1000)
    produce(bootstrap, topic, [Sent(i % partitions, k, v, now) for i, (k, v) in enumerate(pairs)], timeout_s=120)


def run_args(bootstrap: str, source: str, sink: str, state: Path, *more: str) -> list[str]:
    return ["run", "--bootstrap-servers", bootstrap, "--source-topic", source, "--sink-topic", sink,
            "--state-dir", str(state), *more]


# ----- 1. Ctrl-C ------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_ctrl_c_stops_after_the_batch_in_flight_with_exit_130_and_a_second_stops_at_once(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    src = new_topic(partitions=4)
    produce_keyed(bootstrap_servers, src, [(b"k%d" % (i % 500), b"v%d" % i) for i in range(80_000)], 4)
    state = tmp_path / "state"
    argv = [*KCOMPACT, *run_args(bootstrap_servers, src, f"{src}.c", state, "--max-offsets-per-trigger", "8000",
                                 "--trigger-interval", "1")]

    def interrupted_once() -> tuple[int, list[str], list[str]]:
        job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        before: list[str] = []
        for line in job.stderr:  # interrupt while a micro-batch is being read
            before.append(line)
            if re.search(r"batch \d+: 4 partitions", line):
                break
        job.send_signal(signal.SIGINT)
        after = [line for line in job.stderr.read().splitlines() if line.strip()]
        return job.wait(timeout=120), before, after

    def interrupted_twice_in_a_batch() -> tuple[int, list[str]]:
        """Both Ctrl-Cs while a batch's append is held in flight (at the named moment, not after a guess of
        how long a batch takes): the second stops at once."""
        hold = tmp_path / "hold"
        hold.mkdir()
        job = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, HOLD_ENV: f"{Moment.APPEND.value}:{hold}"})
        try:
            wait_for(lambda: (hold / REACHED).exists() or job.poll() is not None, 120, "a batch's append held")
            job.send_signal(signal.SIGINT)
            lines = []
            for line in job.stderr:
                lines.append(line.strip())
                if line.startswith("kcompact: stopping after the current batch"):
                    break
            job.send_signal(signal.SIGINT)
            lines += [line for line in job.stderr.read().splitlines() if line.strip()]
            return job.wait(timeout=120), lines
        finally:
            (hold / RELEASE).touch()

    code, after = interrupted_twice_in_a_batch()
    assert code == 130 and after[-1] == "kcompact: stopped at once; the next start reads the interrupted batch again", \
        after
    code, before, after = interrupted_once()
    assert code == 130, after
    assert after[0] == "kcompact: stopping after the current batch (Ctrl-C again stops at once)", after
    assert len(after) <= 3 and after[-1].split(": ", 1)[1].startswith("stopped:"), after
    assert not [line for line in before + after if FOREIGN.search(line)], before + after
    done = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", state, "--once"))
    assert done.returncode == 0, done.stderr[-3000:]
    status = json.loads(kcompact("status", "--json", "--state-dir", str(state)).stdout)
    assert sum(p["log_end_offset"] for p in status["partitions"]) == 80_000, "a stop lost or skipped records"


# ----- 2. a wrong --bootstrap-servers ---------------------------------------------------------------------


def test_a_cluster_that_does_not_answer_is_the_last_of_a_few_lines_within_the_retry_timeout(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", state, "--retry-timeout", "3"), timeout=60)
    assert_one_error(out, "127.0.0.1:1", "did not answer within 3s")
    assert not state.exists()


# ----- 3. starting offsets and partitions never read ------------------------------------------------------


def test_a_negative_starting_offset_other_than_earliest_or_latest_is_refused_before_any_contact(tmp_path) -> None:
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state", "--starting-offsets",
                             '{"t":{"0":-5}}'), timeout=60)
    assert_one_error(out, "--starting-offsets", "t-0: -5")
    assert not (tmp_path / "state").exists()


@pytest.mark.integration
def test_a_starting_offset_past_the_end_is_refused_before_the_sink_or_state_dir_is_made(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    src = new_topic(partitions=2)
    produce_keyed(bootstrap_servers, src, [(b"k", b"v")] * 10, 2)
    out = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", tmp_path / "state", "--starting-offsets",
                             json.dumps({src: {"0": 100000, "1": 0}})))
    assert_one_error(out, f"{src}-0 offset 100000 is beyond the log end")
    assert not (tmp_path / "state").exists() and not topic_exists(bootstrap_servers, f"{src}.c")


@pytest.mark.integration
def test_records_deleted_before_they_were_read_stop_the_job_naming_them_unless_allowed(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    src = new_topic(partitions=1)
    state = tmp_path / "state"
    produce_keyed(bootstrap_servers, src, [(b"k%d" % i, b"v") for i in range(10)])
    assert kcompact(*run_args(bootstrap_servers, src, f"{src}.c", state, "--once")).returncode == 0
    produce_keyed(bootstrap_servers, src, [(b"k%d" % i, b"v") for i in range(10, 20)])
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.delete_records([TopicPartition(src, 0, 15)])[TopicPartition(src, 0, 15)].result(30)
    lost = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", state, "--once"))
    assert_one_error(lost, f"{src}-0", "[10, 15)", "--allow-data-loss", after_start=True)
    allowed = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", state, "--once", "--allow-data-loss"))
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    status = json.loads(kcompact("status", "--json", "--state-dir", str(state)).stdout)
    assert [p["log_end_offset"] for p in status["partitions"]] == [20]


def test_status_lists_every_source_partition_of_the_mapping_with_those_not_ingested_yet(tmp_path: Path) -> None:
    state = write_state_dir(str(tmp_path))
    shutil.rmtree(tmp_path / "logs" / "orders-1")
    status = json.loads(kcompact("status", "--json", "--state-dir", state).stdout)
    assert [(p["partition"], p["state"]) for p in status["partitions"]] == [(0, "ok"), (1, "not ingested yet")]
    table = kcompact("status", "--state-dir", state).stdout
    assert re.search(r"orders-1 .* not ingested yet", table)


# ----- 4. state-dir problems -----------------------------------------------------------------------------


def _as_nobody(argv: list[str]) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv] if os.geteuid() == 0 else argv


def test_a_state_dir_the_user_cannot_read_is_one_line_in_run_status_and_dump(tmp_path: Path) -> None:
    state = Path(write_state_dir(str(tmp_path / "state")))
    state.chmod(0o700 if os.geteuid() == 0 else 0o000)
    try:
        for argv in (["status", "--state-dir", str(state)], ["dump", "--state-dir", str(state)],
                     run_args("127.0.0.1:1", "orders", "orders.compacted", state)):
            out = subprocess.run(_as_nobody([*KCOMPACT, *argv]), capture_output=True, text=True, timeout=60,
                                 env={**os.environ, "HOME": "/tmp"})
            assert_one_error(out, "permission denied", "--state-dir")
    finally:
        state.chmod(0o755)


def test_a_state_dir_on_a_read_only_filesystem_is_one_line_and_nothing_is_created(tmp_path: Path) -> None:
    target = tmp_path / "ro"
    target.mkdir()
    argv = " ".join(KCOMPACT + run_args("127.0.0.1:1", "t", "s", target / "state"))
    out = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o ro tmpfs {target} && exec {argv}"],
                         capture_output=True, text=True, timeout=60)
    assert_one_error(out, "read-only filesystem")


def test_a_state_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert_one_error(kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "f"), timeout=60), "is a file")


def test_a_setting_librdkafka_does_not_know_is_one_line_naming_the_nearest_and_nothing_is_made(tmp_path: Path) -> None:
    for option, side in (("--kafka", "source"), ("--sink-kafka", "sink")):
        out = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state"), option, "securty.protocol=SSL",
                       timeout=60)
        assert_one_error(out, f"the {side} cluster's settings were refused", "'securty.protocol' is not a librdkafka "
                         "setting (did you mean security.protocol?)", f"Check {option}")
        assert not (tmp_path / "state").exists()


@pytest.mark.integration
def test_a_missing_bucket_is_one_line_before_the_sink_topic_is_made(bootstrap_servers: str, new_topic,
                                                                    s3_server) -> None:
    src = new_topic(partitions=1)
    out = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", s3_server.uri("no-such-bucket")))
    assert_one_error(out, "bucket 'no-such-bucket' does not exist")
    assert not topic_exists(bootstrap_servers, f"{src}.c")


@pytest.mark.integration
def test_a_store_that_refuses_the_credentials_is_one_line_in_status(tmp_path: Path, s3_server) -> None:
    uri = s3_server.uri(s3_server.new_bucket())
    unknown_key = kcompact("status", "--state-dir", uri, env={**os.environ, "AWS_ACCESS_KEY_ID": "no-such-user"})
    assert_one_error(unknown_key, uri, "the store cannot be read", "ACCESS_DENIED", "Check the credentials")
    none = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    no_key = kcompact("status", "--state-dir", uri, env={**none, "AWS_EC2_METADATA_DISABLED": "true",
                                                          "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                                                          "AWS_CONFIG_FILE": str(tmp_path / "none")})
    assert_one_error(no_key, uri, "the store cannot be read", "Check the credentials")


# ----- 5. dump ----------------------------------------------------------------------------------------------


def test_dump_refuses_what_the_state_dir_does_not_hold_and_has_a_header_and_a_quiet_pipe(tmp_path: Path) -> None:
    state = write_state_dir(str(tmp_path / "state"))
    assert_one_error(kcompact("dump", "--state-dir", str(tmp_path / "none")), "holds no compactor state")
    assert_one_error(kcompact("dump", "--state-dir", state, "--topic", "nope"), "'nope' is not mirrored")
    assert_one_error(kcompact("dump", "--state-dir", state, "--partition", "7"), "--partition 7", "0..1")
    table = kcompact("dump", "--state-dir", state, "--format", "table").stdout.splitlines()
    assert table[0].split()[:3] == ["partition", "offset", "timestamp"] and len(table) == 9
    piped = subprocess.run(f"{' '.join(KCOMPACT)} dump --state-dir {state} | head -1", shell=True,
                           capture_output=True, text=True, timeout=60)
    assert piped.stderr == "" and len(piped.stdout.splitlines()) == 1


# ----- 6 and 7: no foreign lines on stderr; --once --drain ------------------------------------------------


@pytest.mark.integration
def test_once_emits_nothing_by_default_naming_drain_and_drain_compacts_with_only_kcompact_lines(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    src = new_topic(partitions=1)
    produce_keyed(bootstrap_servers, src, [(b"k%d" % (i % 5), b"v%d" % i) for i in range(50)], 1)
    state = tmp_path / "state"
    plain = kcompact(*run_args(bootstrap_servers, src, f"{src}.c", state, "--once"))
    assert plain.returncode == 0 and "nothing emitted" in plain.stderr and "--drain" in plain.stderr, plain.stderr
    assert all(TEXT_LINE.match(line) for line in lines(plain.stderr)), plain.stderr
    drained = kcompact("--log-format", "json", *run_args(bootstrap_servers, src, f"{src}.c", state, "--once",
                                                         "--drain"))
    assert drained.returncode == 0, drained.stderr[-3000:]
    docs = [json.loads(line) for line in lines(drained.stderr)]  # every line is JSON
    assert not [d for d in docs if FOREIGN.search(d["message"])], docs
    status = json.loads(kcompact("status", "--json", "--state-dir", str(state)).stdout)
    assert sum(p["records"] for p in status["partitions"]) == 5 and status["job"]["records-emitted"] == 5
    assert not FOREIGN.search(plain.stderr)


# ----- 8. progress ------------------------------------------------------------------------------------------


def test_progress_is_a_log_line_at_each_interval_off_a_terminal(monkeypatch, caplog) -> None:
    from streaming.job import progress

    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.05)
    figures = iter(range(1000, 100_000, 1000))
    snapshot = lambda: progress.Progress("ingesting batch 0: 1/4 tasks", next(figures), 77, 1, 2, 3.0)  # noqa: E731
    with caplog.at_level("INFO", logger="streaming.job.progress"), progress.ProgressDisplay(snapshot, live=False):
        time.sleep(0.5)
    shown = [r.getMessage() for r in caplog.records if r.name == "streaming.job.progress"]
    assert len(shown) >= 3 and "records ingested" in shown[-1] and "lag 77" in shown[-1] \
        and "1/4 tasks" in shown[-1], shown


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")


@pytest.mark.integration
def test_progress_on_a_terminal_is_refreshed_in_place_and_gone_when_the_run_ends(bootstrap_servers: str, new_topic,
                                                                                  tmp_path: Path) -> None:
    import fcntl
    import pty
    import struct
    import termios

    src = new_topic(partitions=2)
    produce_keyed(bootstrap_servers, src, [(b"k%d" % (i % 50), b"v%d" % i) for i in range(2000)], 2)
    main_fd, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 240, 0, 0))  # wide enough not to wrap
    # the workers at DEBUG: a partition's pass line is theirs (at INFO they write none)
    debug_workers = ("--spark-conf", "spark.executorEnv.KCOMPACT_LOG_LEVEL=DEBUG")
    proc = subprocess.Popen([*KCOMPACT, *run_args(bootstrap_servers, src, f"{src}.c", tmp_path / "state", "--once",
                                                  "--drain", *debug_workers)],
                            stdout=subprocess.DEVNULL, stderr=terminal, env=TERMINAL_ENV)
    os.close(terminal)
    screen = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the terminal's other end closed: the run is over
            break
        if not chunk:
            break
        screen += chunk
    os.close(main_fd)
    assert proc.wait(300) == 0, screen[-3000:]
    text = screen.decode(errors="replace")
    shown = [line.strip() for line in ANSI.sub("", text).replace("\r", "\n").splitlines() if line.strip()]
    assert any(line.startswith("progress: ") for line in shown), shown
    assert "\x1b[2K" in text or "\x1b[1A" in text, "the display is redrawn in place, not appended"
    ours = [line for line in shown if not line.startswith("progress: ")]
    assert all(TEXT_LINE.match(line) for line in ours) and " done: 2000 records ingested" in ours[-1], ours
    glued = [line for line in shown if line.startswith("progress: ") and STAMP.search(line)]
    assert not glued, f"log lines printed after the display's line instead of above it: {glued}"
    assert any(" DEBUG streaming.cleaner.cleaner: cleaned " in line for line in ours), "the tasks' own log lines came through the display"
    assert not FOREIGN.search(ANSI.sub("", text)), shown


# ----- 9 and 10: --spark-conf, --config-file, --print-config ------------------------------------------------


def test_the_checkpoint_filesystem_error_names_spark_conf() -> None:
    error = explain_failure(RuntimeError('No FileSystem for scheme "s3"'), "/tmp/x")
    assert "--spark-conf spark.jars.packages=" in str(error)


def test_config_file_holds_options_and_topic_configs_and_the_command_line_wins(tmp_path: Path) -> None:
    props = tmp_path / "kcompact.properties"
    props.write_text("# a MirrorMaker-style file\nbootstrap.servers=127.0.0.1:1\nstate.dir=/tmp/s\n"
                     "source.topic=orders\nsink.topic=orders.c\ntrigger.interval=9\n"
                     "min.cleanable.dirty.ratio=0.2\nsegment.ms=1000\nkafka.security.protocol=SASL_PLAINTEXT\n"
                     "kafka.sasl.password=hunter2\nspark.executor.memory=2g\nonce=true\n")
    out = kcompact("run", "--config-file", str(props), "--print-config", "--config", "segment.ms=5",
                   "--trigger-interval", "2", "--spark-conf", "spark.executor.memory=4g", timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    shown = javaproperties.loads(out.stdout)  # a file --config-file reads back
    assert shown["bootstrap.servers"] == "127.0.0.1:1" and shown["trigger.interval"] == "2.0"
    assert shown["segment.ms"] == "5" and shown["min.cleanable.dirty.ratio"] == "0.2" and shown["once"] == "true"
    assert shown["spark.executor.memory"] == "4g" and shown["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert "hunter2" not in out.stdout
    props.write_text("bootstrap.servers=127.0.0.1:1\nno.such.key=1\n")
    assert_one_error(kcompact("run", "--config-file", str(props), timeout=60), "unknown key 'no.such.key'")
    props.write_text("trigger.interval=soon\n")
    assert_one_error(kcompact("run", "--config-file", str(props), timeout=60), "trigger.interval: not a number")


# ----- 11. smaller ones -------------------------------------------------------------------------------------


def test_run_help_shows_every_default_and_a_bad_number_is_one_line() -> None:
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    text = run.format_help()
    assert "(default: 5.0)" in text and "records read per micro-batch" in text and "(default: earliest)" in text
    assert_one_error(kcompact(*run_args("h:1", "t", "s", Path("/tmp/x"), "--config", "segment.ms=soon"), timeout=60),
                     "segment.ms", "not a whole number")


@pytest.mark.integration
def test_sink_refusal_names_the_option_given_and_a_pattern_that_matches_nothing_exits_2_with_once(
        bootstrap_servers: str, new_topic, tmp_path: Path) -> None:
    src = new_topic(partitions=1)
    assert_one_error(kcompact(*run_args(bootstrap_servers, src, src, tmp_path / "s")), "Choose another --sink-topic,")
    out = kcompact("run", "--bootstrap-servers", bootstrap_servers, "--source-topic-pattern", r"nomatch\..*",
                   "--sink-topic-template", "{topic}.c", "--state-dir", str(tmp_path / "s"), "--once")
    assert_one_error(out, r"no topic on the source cluster matches --source-topic-pattern 'nomatch\..*'")
    assert not (tmp_path / "s").exists()


def test_a_pattern_reads_as_given_in_status() -> None:
    mapping = JobMapping("h:1", SubscribePattern(r"orders\..*"), "h:1", "{topic}.c")
    assert r"topics matching 'orders\..*'" in mapping.describe()
