"""S3's conditional create (``If-None-Match: *``), the one call pyarrow's S3 filesystem lacks.

The client is made on first use in each process, from the same endpoint, region and credential chain
pyarrow uses, so a task on an executor needs nothing the driver did not have.
"""

from __future__ import annotations

import threading


class S3Conditional:
    def __init__(self, endpoint: str | None, scheme: str, region: str | None) -> None:
        self.endpoint_url = f"{scheme}://{endpoint}" if endpoint else None
        self.region = region
        self._client = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # a client and a lock do not travel to executors
        return {"endpoint_url": self.endpoint_url, "region": self.region}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _client=None, _lock=threading.Lock())

    def _s3(self):
        with self._lock:
            if self._client is None:
                import boto3  # noqa: PLC0415

                self._client = boto3.session.Session().client("s3", endpoint_url=self.endpoint_url,
                                                               region_name=self.region)
            return self._client

    def __call__(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        bucket, _, key = path.partition("/")
        try:
            self._s3().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        return True
