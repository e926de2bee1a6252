"""`kcompact broker --secure` says how to reach its secured listeners, and what it says works: each
--config-file it writes logs in (SCRAM over TLS, a client certificate) with the password left in its file."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from streaming import config_providers, java_properties

pytestmark = pytest.mark.integration


def test_broker_secure_prints_settings_whose_config_files_log_in_to_each_secured_listener() -> None:
    broker = subprocess.Popen([sys.executable, "-m", "streaming", "broker", "--secure"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []
        while not (lines and lines[-1].lstrip().startswith("kcompact run --config-file")):
            line = broker.stdout.readline()
            assert line, f"kcompact broker ended: {lines}"
            lines.append(line.rstrip())
        printed = "\n".join(lines)
        assert "ssl.ca.location=" in printed and "principal User:kcompact-client" in printed
        scram = re.search(r"--config-file (\S+) \(SCRAM\)", printed).group(1)
        mtls = re.search(r"or (\S+) \(mTLS\)", printed).group(1)
        for path in (scram, mtls):
            with open(path) as f:
                settings = java_properties.load(f)
            if path == scram:
                assert settings["kafka.sasl.password"].startswith("${file:"), "the password stays in its file"
            client = config_providers.resolve_all({k.removeprefix("kafka."): v for k, v in settings.items()})
            admin = AdminClient(client)
            assert admin.list_topics(timeout=30).brokers, path
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(60) == 0
