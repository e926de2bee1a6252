"""MinIO, the S3 server the object-store tests run against: built once into the cache from the Go module
proxy, one server per test session (each test a bucket of its own), stopped by its PID.

A real server, not a mock: conditional writes race as on S3, a list follows a write, large objects go up in
parts, and a server killed and started again on its data dir is a real outage and a real recovery.
Credentials are fixed test values, set in the environment before any SparkSession starts, so Spark's Python
workers (and executors of a standalone cluster) see the same ones the test process does.

``python -m tests.minio`` builds the server (the test set-up runs it).
"""

from __future__ import annotations

import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

from streaming.brokers.local.server import LOCAL_HOST, die_with_parent, free_port
from tests.go_tools import GoTool
from tests.processes import stop, wait_answering

MINIO = GoTool("MinIO", "github.com/minio/minio", "v0.0.0-20260212201848-7aac2a2c5b7c", "minio")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kcompact-test", "AWS_SECRET_ACCESS_KEY": "kcompact-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class MinIOError(RuntimeError):
    """MinIO could not be started; the message says why."""


class S3Server:
    """A MinIO server on 127.0.0.1, on a port and a data dir it keeps across a kill and a start."""

    def __init__(self, data_dir: Path, timeout_s: float = 60.0) -> None:
        os.environ.update(CREDENTIALS)
        self.binary = MINIO.ensure()
        self.data_dir = data_dir
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.start(timeout_s)

    @property
    def endpoint(self) -> str:
        return f"{LOCAL_HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.with_name(f"{self.data_dir.name}.log")

    def start(self, timeout_s: float = 60.0) -> None:
        """Serving once this returns; again on the same data dir after ``kill``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MINIO_ROOT_USER": CREDENTIALS["AWS_ACCESS_KEY_ID"],
               "MINIO_ROOT_PASSWORD": CREDENTIALS["AWS_SECRET_ACCESS_KEY"], "MINIO_BROWSER": "off",
               "MINIO_UPDATE": "off"}
        with open(self.log_path, "ab") as out:  # the child keeps its own descriptor
            self.process = subprocess.Popen([str(self.binary), "server", "--quiet", "--address", self.endpoint,
                                             str(self.data_dir)], stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env,
                                            preexec_fn=die_with_parent)  # gone with a run that is killed
        ready = f"http://{self.endpoint}/minio/health/ready"
        wait_answering(self.process, lambda: urllib.request.urlopen(ready, timeout=2).close(), OSError, timeout_s,
                       MinIOError, f"MinIO on {self.endpoint} (log: {self.log_path})", pause_s=0.1)

    def kill(self) -> None:
        """SIGKILL: the server gone mid-request, as a crashed host is."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def client(self, **credentials: str):
        import boto3

        return boto3.client("s3", endpoint_url=f"http://{self.endpoint}", region_name="us-east-1", **credentials)

    def new_bucket(self) -> str:
        name = f"kcompact-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def uri(self, bucket: str, path: str = "state", endpoint: str | None = None) -> str:
        """``endpoint``: another way to this server (a proxy in front of it); its own address if None."""
        return f"s3://{bucket}/{path}?endpoint_override={endpoint or self.endpoint}&scheme=http&region=us-east-1"

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


if __name__ == "__main__":
    MINIO.main()
