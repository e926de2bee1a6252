"""`kcompact run`'s options come from the settings table alone: the flags, their defaults and checks, the
config file's keys and --print-config, merged once into RunOptions."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from streaming.cli import config_file
from streaming.cli.main import build_parser, main
from streaming.cli.run import run_options
from streaming.errors import UsageError
from streaming.job.options import RunOptions
from streaming.configuration.settings import RUN_OPTIONS, Scope, Type


def _run_parser() -> argparse.ArgumentParser:
    return build_parser()._subparsers._group_actions[0].choices["run"]


def _options(*argv: str) -> RunOptions:
    return run_options(build_parser().parse_args(["run", *argv]))


def test_every_run_option_is_a_flag_of_run_and_a_field_of_run_options_with_the_tables_default() -> None:
    actions = [a for a in _run_parser()._actions if a.dest != "help"]
    assert sorted(a.option_strings[0] for a in actions) == sorted(o.flag for o in RUN_OPTIONS.values())
    assert all(a.default is argparse.SUPPRESS for a in actions), "no default outside the table"
    named = {f.metadata["setting"]: f.name for f in fields(RunOptions) if "setting" in f.metadata}
    assert set(named) == set(RUN_OPTIONS) and all(o.scope is Scope.RUN for o in RUN_OPTIONS.values())
    defaults = RunOptions()
    for name, attr in named.items():
        assert getattr(defaults, attr) == RUN_OPTIONS[name].default, name
        assert attr == RUN_OPTIONS[name].attr


def test_the_command_line_wins_over_the_file_which_wins_over_the_table(tmp_path: Path) -> None:
    props = tmp_path / "run.properties"
    props.write_text("bootstrap.servers=f:1\nstate.dir=/f\ntrigger.interval=9\nretry.timeout=60\n"
                     "kafka.security.protocol=SSL\nkafka.client.id=file\nsegment.ms=100\nspark.executor.cores=2\n"
                     "source.topic=a,b\nonce=true\n")
    options = _options("--config-file", str(props), "--trigger-interval", "2", "--kafka", "client.id=cli",
                       "--config", "segment.ms=5")
    assert (options.bootstrap_servers, options.trigger_interval, options.retry_timeout) == ("f:1", 2.0, 60.0)
    assert options.kafka == {"security.protocol": "SSL", "client.id": "cli"}, "key by key, the command line's"
    assert options.config == {"segment.ms": "5"} and options.spark_conf == {"spark.executor.cores": "2"}
    assert options.source_topic == ("a", "b") and options.once is True
    assert options.sync_topic_acls_interval == RUN_OPTIONS["sync.topic.acls.interval"].default


@pytest.mark.parametrize("name,text,says", [
    ("trigger.interval", "0", "must be > 0"), ("trigger.interval", "soon", "not a number"),
    ("retry.timeout", "-1", "must be > 0"), ("max.offsets.per.trigger", "0", "must be > 0"),
    ("metrics.port", "70000", "must be in [1, 65535]"), ("sync.group.offsets", "(", "not a regular expression"),
    ("source.topic.pattern", "[a", "not a regular expression"), ("starting.offsets", "soonest", "must be earliest"),
    ("sync.topic.acls.interval", "0", "must be > 0"), ("once", "yes", "must be true or false")])
def test_a_bad_value_is_one_error_naming_the_option_from_the_command_line_and_from_a_file(
        tmp_path: Path, name: str, text: str, says: str) -> None:
    option = RUN_OPTIONS[name]
    if option.type is not Type.BOOLEAN:
        with pytest.raises(UsageError, match=rf"^{option.flag}: .*{_escape(says)}"):
            _options(option.flag, text)
    props = tmp_path / "run.properties"
    props.write_text(f"{name}={text}\n")
    with pytest.raises(UsageError, match=_escape(says)) as err:
        _options("--config-file", str(props))
    assert name in str(err.value) or option.flag in str(err.value)


def _escape(text: str) -> str:
    return text.replace("[", r"\[").replace("(", r"\(")


@pytest.mark.parametrize("argv,says", [(("--drain",), "--drain is only for --once"),
                                       (("--sync-group-offsets-allow-rewind",),
                                        "--sync-group-offsets-allow-rewind is only for --sync-group-offsets")])
def test_an_option_that_means_nothing_without_another_is_refused(argv: tuple[str, ...], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        _options(*argv)
    _options(*argv, "--once", "--sync-group-offsets", "g.*")


def test_print_config_is_a_file_that_reads_back_as_the_same_options(tmp_path: Path) -> None:
    options = _options("--bootstrap-servers", "h:1", "--state-dir", "/s", "--source-topic-pattern", r"orders\..*",
                       "--kafka", "security.protocol=SSL", "--sink-topic-config", "retention.ms=-1", "--config",
                       "segment.ms=5", "--spark-conf", "spark.executor.memory=2g", "--once", "--drain",
                       "--max-offsets-per-trigger", "1000", "--source-topic", "x")
    props = tmp_path / "printed.properties"
    props.write_text(config_file.render(options))
    assert _options("--config-file", str(props)) == RunOptions.of({**options.values(), "config.file": str(props)})


def test_spark_speculation_is_refused_in_one_line_before_anything_is_contacted(tmp_path: Path, capsys) -> None:
    """A speculative copy of a compaction task is an attempt the driver never hears of: it may write after the
    next stage's fence (docs/sink.md)."""
    assert main(["run", "--bootstrap-servers", "127.0.0.1:9", "--source-topic", "t", "--sink-topic", "s",
                 "--state-dir", str(tmp_path / "state"), "--spark-conf", "spark.speculation=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert "spark.speculation=true" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "state").exists()


def test_one_table_for_several_listed_topics_of_change_streams_is_refused_before_anything_is_contacted(
        tmp_path: Path, capsys) -> None:
    """Their columns would merge in one table: a template (shop.{table}) gives each its own, --snapshot-one-table
    asks for the merge."""
    common = ["run", "--bootstrap-servers", "127.0.0.1:9", "--source-topic", "shop.public.a", "--source-topic",
              "shop.public.b", "--sink-topic-template", "dr.{topic}", "--state-dir", str(tmp_path / "state"),
              "--snapshot-every", "1", "--snapshot-value-format", "debezium"]
    assert main([*common, "--iceberg-table", "shop.all"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("kcompact: error: --iceberg-table shop.all would merge the columns of 2 topics (shop.public.a, "
                   "shop.public.b) in one output: put {table} or {topic} in it for one output per topic (for example "
                   "shop.{table}), or give --one-table to merge them"), err
    assert not (tmp_path / "state").exists()
    assert main([*common, "--iceberg-table", "{table}"]) == 2
    assert "--iceberg-table: 't' is not NAMESPACE.TABLE" in capsys.readouterr().err
    assert main([*common, "--iceberg-table", "s.t", "--snapshot-from-schema", "latest", "--snapshot-value-format",
                 "json"]) == 2
    assert "--from-schema latest reads a change stream's Connect schemas" in capsys.readouterr().err
