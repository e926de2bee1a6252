"""What the command line does for secrets and privacy before any cluster answers: a password typed on the
command line is warned about (never echoed), and a state dir other users can read gets one warning naming the
fix."""

from __future__ import annotations

import os
from pathlib import Path

from streaming.cli.main import main

NOBODY = "127.0.0.1:1"  # nothing listens there: the run ends at its first cluster contact, after the checks


def _run(tmp_path, *extra: str) -> int:
    return main(["run", "--bootstrap-servers", NOBODY, "--source-topic", "t", "--sink-topic", "s", "--state-dir",
                 str(tmp_path / "state"), "--once", "--retry-timeout", "1", *extra])


def test_a_password_typed_on_the_command_line_is_warned_about_and_a_reference_is_not(tmp_path, capsys) -> None:
    (tmp_path / "client.properties").write_text("sasl.password=from-the-file\n")
    assert _run(tmp_path, "--kafka", "sasl.password=typed-in-clear") == 2
    err = capsys.readouterr().err
    assert "--kafka sasl.password is a secret on the command line, which every user of this host can read" in err
    assert "${file:/etc/kcompact/client.properties:sasl.password}" in err
    assert "typed-in-clear" not in err
    assert _run(tmp_path, "--kafka", f"sasl.password=${{file:{tmp_path}/client.properties:sasl.password}}") == 2
    assert "a secret on the command line" not in capsys.readouterr().err


def test_a_reference_that_cannot_be_resolved_stops_the_run_in_one_line_before_any_cluster(tmp_path, capsys) -> None:
    assert _run(tmp_path, "--sink-kafka", "sasl.password=${file:/nonexistent/client.properties:sasl.password}") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "cannot read /nonexistent/client.properties" in lines[0], lines
    assert not (tmp_path / "state").exists()


def test_an_existing_state_dir_other_users_can_read_is_one_warning_naming_the_fix(tmp_path, capsys) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    _run(tmp_path)
    warned = [line for line in capsys.readouterr().err.splitlines() if "can be read by other users" in line]
    assert len(warned) == 1 and f"chmod -R go-rwx {state}" in warned[0] and "mode 755" in warned[0]
    os.chmod(state, 0o700)
    _run(tmp_path)
    assert "can be read by other users" not in capsys.readouterr().err


def test_print_acls_gives_the_least_set_as_the_security_doc_lists_it_without_contacting_a_cluster(capsys) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    common = ["run", "--bootstrap-servers", "SOURCE:9093", "--sink-bootstrap-servers", "SINK:9093", "--source-topic",
              "orders", "--sink-topic", "orders.compacted", "--state-dir", "/nonexistent/state", "--kafka",
              "security.protocol=SASL_SSL", "--kafka", "sasl.username=kcompact", "--sink-kafka",
              "security.protocol=SASL_SSL", "--sink-kafka", "sasl.username=kcompact", "--print-acls"]
    for extra, count in (([], 7), (["--sync-group-offsets", "billing"], 9)):
        assert main([*common, *extra]) == 0
        printed = capsys.readouterr().out.splitlines()
        assert len(printed) == count + 1 and all(line in readme for line in printed), printed
        assert all(" --command-config ADMIN.properties --add " in line for line in printed[:-1]), printed
        assert printed[-1].startswith("# a dry run: --apply --admin-config FILE adds"), printed


def test_the_security_docs_secrets_file_example_is_a_config_file_whose_references_print_as_written(tmp_path, capsys) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    example = readme.split("# /etc/kcompact/orders.properties", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    config = tmp_path / "orders.properties"
    config.write_text(example)
    assert main(["run", "--config-file", str(config), "--source-topic", "orders", "--sink-topic", "orders.compacted",
                 "--state-dir", str(tmp_path / "state"), "--print-config"]) == 0
    printed = capsys.readouterr().out.replace("\\:", ":")
    assert "kafka.sasl.password=${file:/etc/kcompact/secrets.properties:sasl.password}" in printed
    assert "sink.kafka.ssl.key.password=${env:KCOMPACT_KEY_PASSWORD}" in printed
    assert "sink.bootstrap.servers=dr1:9094" in printed
