"""The one table of settings: docs/configuration.md lists exactly it, and every config class takes its defaults and limits."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from streaming.cleaner import CompactionConfig, ConfigError
from streaming.log import LogConfig
from streaming.configuration.settings import SETTINGS, Scope, markdown_table, run_options_table

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


@pytest.mark.parametrize("name,table", [("settings table", markdown_table), ("run options table", run_options_table)])
def test_the_configuration_doc_lists_the_settings_table_as_it_is(name: str, table) -> None:
    block = re.search(rf"<!-- {name}: python -m streaming.configuration.settings -->\n(.*?)\n<!-- end of {name} -->",
                      CONFIGURATION.read_text(), re.S)
    assert block and block[1] == table(), "run python -m streaming.configuration.settings and paste it into docs/configuration.md"


def test_each_config_field_is_a_setting_with_the_tables_default() -> None:
    for config in (CompactionConfig(), LogConfig()):
        for f in fields(config):
            name = f.metadata.get("setting")
            if name is not None:
                value = getattr(config, f.name)
                assert getattr(value, "value", value) == SETTINGS[name].default, name
    named = {f.metadata["setting"] for f in fields(CompactionConfig)}
    assert named == set(SETTINGS), "every setting has a place in the cleaner's config"


@pytest.mark.parametrize("name,text", [("segment.bytes", "13"), ("segment.ms", "0"), ("file.delete.delay.ms", "-1")])
def test_the_cleaner_refuses_the_tables_limits(name: str, text: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(name)):
        CompactionConfig.from_mapping({name: text})
    assert SETTINGS[name].problem(int(text)), "the limit is the table's"


def test_topic_settings_are_the_ones_a_kafka_topic_carries() -> None:
    topic = {s.name for s in SETTINGS.values() if s.scope is Scope.TOPIC}
    assert not {n for n in topic if n.startswith("log.cleaner.")}
    assert {"segment.bytes", "max.compaction.lag.ms", "compaction.strategy"} <= topic
    assert SETTINGS["compaction.keyless.policy"].scope is Scope.JOB
