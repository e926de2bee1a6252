"""Kafka Connect 4.3.0 standalone with Debezium's PostgreSQL connector (the jars pinned in tests/cdc/pom.xml,
fetched with Maven), one worker per test session against the session's broker. Connectors are added and
removed through its REST API, so each test's connector gets its own topic prefix and replication slot.
``python -m tests.cdc.connect`` fetches the jars (the test set-up runs it)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.brokers.local.jars import KafkaJars, ensure_kafka_jars
from streaming.brokers.local.server import LOCAL_HOST, die_with_parent, free_port, jvm_options
from tests.cdc.postgres import DATABASE, SUPERUSER, Postgres
from tests.processes import stop, wait_answering

POM = Path(__file__).with_name("pom.xml")
CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
LOG4J = """rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d %p %c{1}: %m%n
"""


class ConnectError(RuntimeError):
    """The worker or a connector failed; the message holds the worker's errors."""


def converters(schemas: bool) -> dict[str, str]:
    """JsonConverter for keys and values, with the Connect schema in each message or without."""
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    return {"key.converter": json_converter, "value.converter": json_converter,
            "key.converter.schemas.enable": str(schemas).lower(), "value.converter.schemas.enable": str(schemas).lower()}


FLATTEN = {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}


@dataclass
class ConnectWorker:
    port: int
    log: Path
    process: subprocess.Popen

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://{LOCAL_HOST}:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def add_debezium(self, name: str, postgres: Postgres, table: str, prefix: str,
                     settings: dict[str, str], partitions: int = 3) -> None:
        """A Debezium PostgreSQL connector streaming ``table`` (schema.table) to PREFIX.schema.table through
        the pgoutput plugin, with a slot and a publication of its own; it returns once its task runs."""
        config = {"connector.class": CONNECTOR, "tasks.max": "1", "plugin.name": "pgoutput",
                  "database.hostname": LOCAL_HOST, "database.port": str(postgres.port), "database.user": SUPERUSER,
                  "database.password": "unused", "database.dbname": DATABASE, "topic.prefix": prefix,
                  "table.include.list": table, "slot.name": f"slot_{name}", "publication.name": f"pub_{name}",
                  "publication.autocreate.mode": "filtered",
                  # Connect makes the topic, compacted as a change stream's topic is (KIP-158)
                  "topic.creation.default.partitions": str(partitions), "topic.creation.default.replication.factor": "-1",
                  "topic.creation.default.cleanup.policy": "compact", **settings}
        self._call("PUT", f"/connectors/{name}/config", config)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                status = self._call("GET", f"/connectors/{name}/status")
            except urllib.error.HTTPError:
                status = None
            tasks = (status or {}).get("tasks", [])
            if tasks and tasks[0]["state"] == "RUNNING":
                return
            if tasks and tasks[0]["state"] == "FAILED":
                raise ConnectError(f"connector {name} failed: {tasks[0].get('trace', '')[:2000]}")
            time.sleep(0.3)
        raise ConnectError(f"connector {name} did not run within 120 s: see {self.log}")

    def remove(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{name}")

    def stop(self) -> None:
        stop(self.process, 30.0)


def start_connect(bootstrap: str, directory: Path, jars: KafkaJars | None = None) -> ConnectWorker:
    jars = jars or ensure_kafka_jars(POM)
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    worker = {"bootstrap.servers": bootstrap, "listeners": f"http://{LOCAL_HOST}:{port}",
              "offset.storage.file.filename": str(directory / "offsets"), "offset.flush.interval.ms": "1000",
              **converters(True)}
    (directory / "worker.properties").write_text("".join(f"{k}={v}\n" for k, v in worker.items()))
    (directory / "log4j2.properties").write_text(LOG4J)
    log = directory / "connect.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["java", "-Xmx512m", *jvm_options(), f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}", "-cp", jars.classpath,
             "org.apache.kafka.connect.cli.ConnectStandalone", str(directory / "worker.properties")],
            stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    connect = ConnectWorker(port, log, process)
    wait_answering(process, lambda: connect._call("GET", "/connectors"), (urllib.error.URLError, ConnectionError),
                   120, ConnectError, f"Kafka Connect (log: {log})", pause_s=0.3)
    return connect


if __name__ == "__main__":
    print(f"Kafka Connect with Debezium: {ensure_kafka_jars(POM).directory}")
