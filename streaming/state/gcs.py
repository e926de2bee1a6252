"""GCS's conditional create (``ifGenerationMatch=0``), the one call pyarrow's GCS filesystem lacks."""

from __future__ import annotations

import threading

from streaming.errors import UserError


class GcsConditional:
    def __init__(self) -> None:
        self._client = None
        self._lock = threading.Lock()  # a task's logs commit on several threads (streaming.job.task_io)

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()

    def _gcs(self):
        with self._lock:
            if self._client is None:
                try:
                    from google.cloud import storage  # noqa: PLC0415
                except ImportError:
                    raise UserError("a gs:// state dir needs google-cloud-storage for its conditional writes: "
                                    "pip install google-cloud-storage") from None
                self._client = storage.Client()
            return self._client

    def __call__(self, path: str, data: bytes) -> bool:
        from google.api_core.exceptions import PreconditionFailed  # noqa: PLC0415

        bucket, _, key = path.partition("/")
        try:
            self._gcs().bucket(bucket).blob(key).upload_from_string(data, if_generation_match=0)
        except PreconditionFailed:
            return False
        return True
