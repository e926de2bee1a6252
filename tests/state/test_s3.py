"""Which of pyarrow's S3 errors are a store that did not answer (tried again) and which are refusals
(raised at once): the messages are pyarrow's own, as it raised them against MinIO."""

from __future__ import annotations

import pytest

from streaming.state.s3 import unanswered

REFUSED_CONNECTION = ("When getting information for key 'x/a' in bucket 'b': AWS Error NETWORK_CONNECTION during "
                      "HeadObject operation: curlCode: 7, Could not connect to server")
DEADLINE = ("When getting information for key 'state/x' in bucket 'b': AWS Error NETWORK_CONNECTION during "
            "HeadObject operation: curlCode: 28, Timeout was reached; Details: Operation too slow.")
UNTRUSTED = ("When listing objects under key 'jobs' in bucket 'b': AWS Error NETWORK_CONNECTION during "
             "ListObjectsV2 operation: curlCode: 60, SSL peer certificate or SSH remote key was not OK")
DENIED = ("When getting information for key 'x/a' in bucket 'b': AWS Error ACCESS_DENIED during HeadObject "
          "operation: No response body.")


@pytest.mark.parametrize("message,retried", [
    (REFUSED_CONNECTION, True),
    (DEADLINE, True),
    ("AWS Error SERVICE_UNAVAILABLE during PutObject operation: Server not initialized", True),
    ("AWS Error UNKNOWN (HTTP status 503) during CompleteMultipartUpload operation", True),
    ("AWS Error UNKNOWN (HTTP status 501) during PutObject operation: Not Implemented", False),
    (UNTRUSTED, False),
    (DENIED, False),
    ("AWS Error NO_SUCH_BUCKET during ListObjectsV2 operation", False),
])
def test_an_error_is_tried_again_only_when_the_store_did_not_answer(message: str, retried: bool) -> None:
    assert unanswered(OSError(message)) is retried
