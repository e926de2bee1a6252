"""Settings kcompact or librdkafka refuse, each one `kcompact: error:` line with exit 2 that says what to
change: the nearest real name for a typo (librdkafka's properties, topic configs, config-file keys), the SASL
mechanisms this librdkafka build has, and a state dir no filesystem will hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_first_contact import assert_one_error, kcompact, run_args


@pytest.mark.parametrize("settings,words", [
    (["security.protocol=SASL_SSL"], ["no sasl.mechanism (librdkafka's default is GSSAPI)", "PLAIN, SCRAM-SHA-256"]),
    (["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM"], ["sasl.mechanism=SCRAM", "SCRAM-SHA-512"]),
    (["security.protocol=SSL", "ssl.ca.location=/no/such/ca.pem"], ["ssl.ca.location /no/such/ca.pem: no such file"]),
    (["linger.ms=soon"], ['Invalid value for configuration property "queue.buffering.max.ms"']),
    (["compression.type=zip"], ['Invalid value "zip" for configuration property "compression.codec"']),
    (["security.protocol=TLS"], ['Invalid value "TLS" for configuration property "security.protocol"']),
    (["ssl.endpoint.identification.algorithm=dns"], ["ssl.endpoint.identification.algorithm"]),
])
def test_each_kind_of_setting_librdkafka_refuses_at_client_creation_is_one_line(tmp_path: Path, settings: list[str],
                                                                               words: list[str]) -> None:
    given = [a for setting in settings for a in ("--kafka", setting)]
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state"), *given, timeout=60)
    assert_one_error(out, "the source cluster's settings were refused", *words, "Check --kafka")
    assert not (tmp_path / "state").exists()


def test_a_refused_setting_from_the_config_file_is_named_by_its_key_there(tmp_path: Path) -> None:
    props = tmp_path / "job.properties"
    props.write_text("kafka.security.protocol=SASL_PLAINTEXT\nkafka.sasl.mechanism=SCRAM\n")
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state"), "--config-file", str(props), timeout=60)
    assert_one_error(out, "sasl.mechanism=SCRAM", f"Check kafka.sasl.mechanism in {props}")
    assert "--kafka" not in out.stderr
    given = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state"), "--config-file", str(props),
                     "--kafka", "sasl.mechanism=SCRAM-SHA-1", timeout=60)
    assert_one_error(given, "sasl.mechanism=SCRAM-SHA-1", "Check --kafka")


def test_a_mistyped_topic_config_names_the_nearest_in_one_line(tmp_path: Path) -> None:
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", tmp_path / "state"), "--config", "min.cleanable.dirty.ration=0.1",
                   timeout=60)
    assert_one_error(out, "min.cleanable.dirty.ration", "did you mean min.cleanable.dirty.ratio?")


@pytest.mark.parametrize("line,nearest", [("bootstrap.server=127.0.0.1:1", "bootstrap.servers"),
                                          ("segment.msec=100", "segment.ms"), ("stat.dir=/tmp/x", "state.dir")])
def test_a_mistyped_config_file_key_names_the_nearest_in_one_line(tmp_path: Path, line: str, nearest: str) -> None:
    props = tmp_path / "kcompact.properties"
    props.write_text(line + "\n")
    out = kcompact("run", "--config-file", str(props), timeout=60)
    assert_one_error(out, f"unknown key {line.split('=')[0]!r}", f"did you mean {nearest}?")


def test_a_state_dir_on_a_filesystem_that_refuses_new_dirs_is_one_line_and_nothing_is_made(tmp_path: Path) -> None:
    out = kcompact(*run_args("127.0.0.1:1", "t", "s", Path("/sys/kcompact-state")), timeout=60)
    assert_one_error(out, "--state-dir /sys/kcompact-state: cannot create /sys/kcompact-state")
    assert not Path("/sys/kcompact-state").exists()
