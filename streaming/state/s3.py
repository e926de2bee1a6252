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

import re
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from streaming.log.arrow_storage import ArrowStorage
from streaming.log.store_watch import StoreUnanswered

if TYPE_CHECKING:
    import pyarrow.fs

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0  # no byte for this long ends an attempt
CLIENT_ATTEMPTS = 2       # pyarrow's own, within one of ours (its calls are idempotent)
# pyarrow's S3 errors (OSError, its message only) that mean the store did not answer: the AWS SDK's names
# for a connection refused or reset, a deadline passed, a server starting or overloaded, and a 500/502/503/504
# (a 501 is a store without a feature: no answer will change it)
UNANSWERED = re.compile(r"NETWORK_CONNECTION|curlCode|REQUEST_TIMEOUT|SERVICE_UNAVAILABLE|SLOW_DOWN|INTERNAL_FAILURE"
                        r"|HTTP status 50[0234]\b")
# curl's errors of TLS (a certificate refused, a CA file that cannot be read, a failed handshake): a store
# that refuses to be trusted answers the same way every time
TLS_REFUSED = re.compile(r"curlCode: (35|51|53|54|58|59|60|64|66|77|80|82|83|90|91)\b")
# boto3's error codes worth another attempt; ConditionalRequestConflict is another conditional write to the
# same key still in flight: the next attempt finds which one won
RETRIED_CODES = frozenset({"RequestTimeout", "ServiceUnavailable", "SlowDown", "InternalError",
                           "XMinioServerNotInitialized", "ConditionalRequestConflict"})
RETRIED_STATUS = frozenset({500, 502, 503, 504})


def s3_storage(uri: str, filesystem: pyarrow.fs.S3FileSystem) -> ArrowStorage:
    """The log's storage on the filesystem pyarrow read from ``uri``, with deadlines, the judge of its
    errors and the conditional create. An option of the URI the rebuilt filesystem would not keep is refused
    (pyarrow reads some, such as tls_verify_certificates, that its constructor does not take)."""
    options = _options(filesystem)
    given = set(parse_qs(urlparse(uri).query))
    lost = sorted(given - set(options))
    if lost:
        raise ValueError(f"{', '.join(lost)}: pyarrow reads this from the URI, but its S3FileSystem does not take it, "
                         f"so kcompact cannot keep it; leave it out (tls_ca_file_path names a CA to trust)")
    from pyarrow.fs import AwsStandardS3RetryStrategy, S3FileSystem  # noqa: PLC0415

    deadlined = S3FileSystem(**{**options, "connect_timeout": CONNECT_TIMEOUT_S, "request_timeout": REQUEST_TIMEOUT_S,
                                "allow_delayed_open": True},  # an object of one part goes up in one PUT
                             retry_strategy=AwsStandardS3RetryStrategy(max_attempts=CLIENT_ATTEMPTS))
    return ArrowStorage(deadlined, S3Conditional(options), unanswered)


def _options(filesystem: pyarrow.fs.S3FileSystem) -> dict[str, Any]:
    _, (options,) = filesystem.__reduce__()  # the options pyarrow read from the URI
    return options


def unanswered(exc: OSError) -> bool:
    text = str(exc)
    return bool(UNANSWERED.search(text)) and not TLS_REFUSED.search(text)


def look_with_conditional_client(filesystem: pyarrow.fs.S3FileSystem, bucket: str) -> None:
    """One request with the conditional create's client (boto3), which trusts its own CAs and reads the
    credentials its own way: a store pyarrow reaches and boto3 does not is a clear line at start, not a
    task's failure at its first commit. Raises OSError."""
    S3Conditional(_options(filesystem)).look(bucket)


class S3Conditional:
    def __init__(self, options: dict[str, Any]) -> None:
        """``options``: pyarrow's S3FileSystem's."""
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

    def look(self, bucket: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        try:
            self._s3().head_bucket(Bucket=bucket)
        except (ClientError, BotoCoreError) as exc:
            raise OSError(f"{exc} (the conditional create's client, boto3)") from None

    def __call__(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, SSLError  # noqa: PLC0415

        bucket, _, key = path.partition("/")
        try:
            self._s3().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code == "PreconditionFailed":
                return False
            if code in RETRIED_CODES or status in RETRIED_STATUS:
                raise StoreUnanswered(str(exc)) from exc
            if code == "NotImplemented" or status == 501:
                raise OSError(f"s3://{bucket}: the store does not take conditional writes (If-None-Match: *), "
                              f"which fence a second writer of a log; use AWS S3, MinIO or another store that "
                              f"does") from exc
            raise
        except SSLError:  # a ConnectionError too, but a refusal: the certificate will not change
            raise
        except (ConnectionError, HTTPClientError) as exc:
            raise StoreUnanswered(str(exc)) from exc
        return True
