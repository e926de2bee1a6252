"""A real S3-compatible server on 127.0.0.1 for the tests: moto's server mode, in a process of its own.

Credentials are fixed test values, set in the environment before any SparkSession starts, so Spark's
Python workers (and executors of a standalone cluster) see the same ones the test process does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import uuid
from dataclasses import dataclass

from streaming.brokers.local.server import die_with_parent, free_port
from tests.processes import stop, wait_answering

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kcompact-test", "AWS_SECRET_ACCESS_KEY": "kcompact-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


@dataclass
class S3Server:
    process: subprocess.Popen
    port: int

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=f"http://{self.endpoint}", region_name="us-east-1")

    def new_bucket(self) -> str:
        name = f"kcompact-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def uri(self, bucket: str, path: str = "state", endpoint: str | None = None) -> str:
        """``endpoint``: another way to this server (a proxy in front of it); its own address if None."""
        return f"s3://{bucket}/{path}?endpoint_override={endpoint or self.endpoint}&scheme=http&region=us-east-1"

    def stop(self) -> None:
        stop(self.process)


def start_s3_server(timeout_s: float = 60.0, checks_credentials: bool = False) -> S3Server:
    """``checks_credentials``: refuse every request not signed by a user moto knows, as S3 refuses unknown
    keys (moto's INITIAL_NO_AUTH_ACTION_COUNT=0); the test credentials are then refused too."""
    os.environ.update(CREDENTIALS)
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"} if checks_credentials else None
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               preexec_fn=die_with_parent)  # gone with a run that is killed
    wait_answering(process, lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=2).close(),
                   OSError, timeout_s, RuntimeError, f"moto's S3 server on 127.0.0.1:{port}")
    return S3Server(process, port)
