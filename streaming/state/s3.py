"""A state dir on S3 (or an S3-compatible server): pyarrow's filesystem with a deadline on each attempt,
which of its errors mean "no answer", and S3's conditional create (``If-None-Match: *``), the one call
pyarrow's S3 filesystem lacks.

Both clients wait on their own for as long as their defaults say (the AWS SDK's for minutes behind a
partition), and a restarted server fails their calls after a few quick retries: short deadlines and few
attempts of their own leave the waiting to streaming.log.store_watch, which says since when. The boto3
client is made on first use in each process, from the same endpoint, region, credentials and CA as
pyarrow's, so a task on an executor needs nothing the driver did not have.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from streaming.log.store_watch import StoreUnanswered

if TYPE_CHECKING:
    import pyarrow.fs

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0  # no byte for this long ends an attempt
CLIENT_ATTEMPTS = 2       # pyarrow's own, within one of ours (its calls are idempotent)
# pyarrow's S3 errors (OSError, its message only) that mean the store did not answer: the AWS SDK's names
# for a connection refused or reset, a deadline passed, a server starting or overloaded, and any 5xx
UNANSWERED = ("NETWORK_CONNECTION", "curlCode", "REQUEST_TIMEOUT", "SERVICE_UNAVAILABLE", "SLOW_DOWN",
              "INTERNAL_FAILURE", "HTTP status 5")
# boto3's error codes worth another attempt; ConditionalRequestConflict is another conditional write to the
# same key still in flight: the next attempt finds which one won
RETRIED_CODES = frozenset({"RequestTimeout", "ServiceUnavailable", "SlowDown", "InternalError",
                           "XMinioServerNotInitialized", "ConditionalRequestConflict"})


def with_deadlines(filesystem: pyarrow.fs.S3FileSystem) -> pyarrow.fs.S3FileSystem:
    """The same filesystem (as pyarrow read it from the URI), each attempt under CONNECT_TIMEOUT_S and
    REQUEST_TIMEOUT_S, and small objects written with one PUT: all or nothing."""
    from pyarrow.fs import AwsStandardS3RetryStrategy, S3FileSystem  # noqa: PLC0415

    _, (options,) = filesystem.__reduce__()  # the options pyarrow read from the URI
    return S3FileSystem(**{**options, "connect_timeout": CONNECT_TIMEOUT_S, "request_timeout": REQUEST_TIMEOUT_S,
                           "allow_delayed_open": True},
                        retry_strategy=AwsStandardS3RetryStrategy(max_attempts=CLIENT_ATTEMPTS))


def unanswered(exc: OSError) -> bool:
    return any(mark in str(exc) for mark in UNANSWERED)


class S3Conditional:
    def __init__(self, options: dict[str, Any]) -> None:
        """``options``: pyarrow's S3FileSystem's, as with_deadlines gives them."""
        self.options = {k: options.get(k) for k in ("endpoint_override", "scheme", "region", "access_key",
                                                    "secret_key", "session_token", "tls_ca_file_path")}
        self._client = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a client and a lock do not travel to executors
        return {"options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _client=None, _lock=threading.Lock())

    def _s3(self):
        with self._lock:
            if self._client is None:
                import boto3  # noqa: PLC0415
                from botocore.config import Config  # noqa: PLC0415

                o = self.options
                endpoint = f"{o['scheme'] or 'https'}://{o['endpoint_override']}" if o["endpoint_override"] else None
                keys = {"aws_access_key_id": o["access_key"], "aws_secret_access_key": o["secret_key"],
                        "aws_session_token": o["session_token"] or None} if o["access_key"] else {}
                # one attempt a call: a retry inside boto3 that met the object its lost first attempt created
                # would call the create another writer's (put_if_absent reads it back instead)
                config = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=REQUEST_TIMEOUT_S,
                                retries={"total_max_attempts": 1, "mode": "standard"})
                self._client = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=o["region"] or None,
                                                               verify=o["tls_ca_file_path"] or None, config=config, **keys)
            return self._client

    def __call__(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError  # noqa: PLC0415

        bucket, _, key = path.partition("/")
        try:
            self._s3().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            error = exc.response.get("Error", {})
            if error.get("Code") == "PreconditionFailed":
                return False
            if error.get("Code") in RETRIED_CODES or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
                raise StoreUnanswered(str(exc)) from exc
            raise
        except (ConnectionError, HTTPClientError) as exc:
            raise StoreUnanswered(str(exc)) from exc
        return True
