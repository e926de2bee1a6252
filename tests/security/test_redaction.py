"""Credentials never reach logs, errors or state files: redacted settings, masked values and pairs."""

from __future__ import annotations

import io
import json
import logging

import pytest

from streaming.runtime import logging_setup
from streaming.security import redaction
from streaming.job.spec import JobMapping, JobSpec, TopicPlan
from streaming.configuration.subscription import Subscribe
from streaming.cleaner import CompactionConfig

SECRET = "pa55-w0rd-xyz"


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setattr(redaction, "MASKER", redaction.Masker())  # this test's secrets leave with it
    redaction.register([{"sasl.password": SECRET, "sasl.username": "alice"}])


def test_settings_with_secret_names_are_shown_redacted() -> None:
    shown = redaction.redact({"sasl.password": "x", "ssl.key.password": "y", "ssl.keystore.key": "z",
                              "sasl.oauthbearer.client.secret": "w", "sasl.username": "alice",
                              "security.protocol": "SASL_SSL"})
    assert shown == {"sasl.password": "[redacted]", "ssl.key.password": "[redacted]",
                     "ssl.keystore.key": "[redacted]", "sasl.oauthbearer.client.secret": "[redacted]",
                     "sasl.username": "alice", "security.protocol": "SASL_SSL"}


def test_registered_values_and_secret_pairs_are_masked_in_any_text() -> None:
    text = (f"failed with {{'sasl.password': '{SECRET}'}}; ssl.key.password=other-secret, "
            f"token: abc123 and user alice")
    masked = redaction.mask(text)
    assert SECRET not in masked and "other-secret" not in masked and "abc123" not in masked
    assert "alice" in masked and "ssl.key.password=[redacted]" in masked


def test_job_spec_repr_leaves_client_settings_out() -> None:
    mapping = JobMapping("b:1", Subscribe(("s",)), "b:1", "t")
    spec = JobSpec(mapping, "/tmp/x", {"s": TopicPlan("s", "t", CompactionConfig(), 1)}, {"sasl.password": SECRET})
    assert SECRET not in repr(spec)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_lines_are_masked_in_both_formats(fmt: str, monkeypatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(logging_setup.sys, "stderr", stream)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    logging_setup.configure("INFO", fmt)
    log = logging.getLogger("kcompact.test")
    log.info("connecting with %s", {"sasl.password": SECRET})
    try:
        raise RuntimeError(f"client said sasl.password={SECRET}")
    except RuntimeError:
        log.exception("it failed")
    log.debug("not shown at INFO")
    out = stream.getvalue()
    assert SECRET not in out and "[redacted]" in out and "not shown" not in out
    if fmt == "json":
        docs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert [d["level"] for d in docs] == ["INFO", "ERROR"]
        assert "RuntimeError" in docs[1]["exception"] and docs[0]["logger"] == "kcompact.test"
