"""`--config-file` and `--print-config` agree on Java's .properties form: a regular expression written
with single backslashes, which the form takes out, is a warning naming the fix, and the printed
configuration reads back to the same pattern."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_first_contact import kcompact, lines

FILE = "bootstrap.servers=127.0.0.1:1\nsink.topic.template={topic}.c\nstate.dir=/tmp/s\n"


def test_a_pattern_that_lost_its_backslashes_warns_once_naming_the_doubled_form(tmp_path: Path) -> None:
    props = tmp_path / "kcompact.properties"
    props.write_text(FILE + "source.topic.pattern=orders\\..*\n")
    out = kcompact("run", "--config-file", str(props), "--print-config", timeout=60)
    assert out.returncode == 0 and len(lines(out.stderr)) == 1, out.stderr
    assert "WARNING" in out.stderr and "reads as 'orders..*'" in out.stderr
    assert "write source.topic.pattern=orders\\\\..* if the backslashes are meant" in out.stderr


def test_print_config_writes_a_pattern_from_the_file_or_the_command_line_so_that_it_reads_back_the_same(tmp_path: Path) -> None:
    props = tmp_path / "kcompact.properties"
    props.write_text(FILE + "source.topic.pattern=orders\\\\..*\n")
    first = kcompact("run", "--config-file", str(props), "--print-config", timeout=60)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    assert "source.topic.pattern=orders\\\\..*\n" in first.stdout
    printed = tmp_path / "printed.properties"
    printed.write_text(first.stdout)
    again = kcompact("run", "--config-file", str(printed), "--print-config", timeout=60)
    assert again.stderr == "" and again.stdout == first.stdout
    flag = kcompact("run", "--bootstrap-servers", "127.0.0.1:1", "--sink-topic-template", "{topic}.c",
                    "--state-dir", "/tmp/s", "--source-topic-pattern", "orders\\..*", "--print-config", timeout=60)
    assert "source.topic.pattern=orders\\\\..*\n" in flag.stdout
