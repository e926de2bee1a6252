"""The state dir: its names, documents replaced whole, and the locks that keep writers apart."""

from __future__ import annotations

import os
import threading
import time

import pytest

from streaming.errors import JobError
from streaming.log import ArrowStorage, LocalStorage
from streaming.state.layout import list_log_dirs, log_dir, spark_checkpoint
from streaming.state.locks import StateDirLock, partition_lock
from streaming.state.stores import StateStoreError, open_state_dir


def test_log_dirs_are_listed_with_their_topic_and_partition_even_when_the_topic_has_dashes(tmp_path) -> None:
    for topic, p in (("orders-eu-2", 0), ("orders-eu-2", 11), ("x", 3)):
        os.makedirs(log_dir(open_state_dir(str(tmp_path)), topic, p))
    os.makedirs(os.path.join(tmp_path, "logs", "not-a-partition"))
    assert [(d.pid.topic, d.pid.partition) for d in list_log_dirs(open_state_dir(str(tmp_path)))] == \
        [("orders-eu-2", 0), ("orders-eu-2", 11), ("x", 3)]


def test_a_second_compactor_is_refused_naming_the_holder(tmp_path) -> None:
    state = open_state_dir(str(tmp_path))
    held = StateDirLock(state)
    try:
        with pytest.raises(JobError, match=f"in use by another compactor \\(pid {os.getpid()}\\)"):
            StateDirLock(state)
    finally:
        held.release()
    StateDirLock(state).release()


def test_a_partition_writer_waits_for_the_one_before_it(tmp_path) -> None:
    order: list[str] = []
    state = open_state_dir(str(tmp_path))
    with partition_lock(state, str(tmp_path)):
        def second() -> None:
            with partition_lock(state, str(tmp_path)):
                order.append("second")
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first")
    t.join(10)
    assert order == ["first", "second"]
    with partition_lock(state, str(tmp_path)), pytest.raises(TimeoutError, match="still locked"), \
            partition_lock(state, str(tmp_path), timeout_s=0.2):
        pass


@pytest.mark.integration
def test_a_state_dir_is_a_local_path_or_a_uri_of_a_pyarrow_filesystem(tmp_path, s3_server) -> None:
    for uri in (str(tmp_path), f"file://{tmp_path}"):
        state = open_state_dir(uri)
        assert state.local and isinstance(state.storage, LocalStorage) and state.root == str(tmp_path)
        assert spark_checkpoint(state) == f"{tmp_path}/checkpoint"
    bucket = s3_server.new_bucket()
    remote = open_state_dir(s3_server.uri(bucket, "jobs/a/"))
    assert not remote.local and isinstance(remote.storage, ArrowStorage) and remote.root == f"{bucket}/jobs/a"
    assert log_dir(remote, "t", 0) == f"{bucket}/jobs/a/logs/t-0"
    assert spark_checkpoint(remote) == f"s3a://{bucket}/jobs/a/checkpoint", "Spark's (Hadoop's) name for S3"


@pytest.mark.parametrize("uri,error", [
    ("ftp://host/dir", "unsupported scheme ftp://"),
    ("s3://bucket/a?endpoint_override=127.0.0.1:9&scheme=http&region=us-east-1", "the store cannot be read: .*connect"),
    ("s3://bucket/a?endpoint_override=127.0.0.1:9&scheme=http&tls_verify_certificates=false",
     "tls_verify_certificates: pyarrow reads this from the URI, but its S3FileSystem does not take it"),
])
def test_a_state_dir_that_cannot_be_used_is_one_clear_error(uri: str, error: str) -> None:
    with pytest.raises(StateStoreError, match=error) as err:
        open_state_dir(uri)
    assert "\n" not in str(err.value)


def test_a_local_state_dir_that_is_or_lies_below_a_file_is_one_clear_error(tmp_path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a state dir")
    for uri, said in ((str(a_file), "is a file"), (f"{a_file}/jobs/a", f"lies below {a_file}, which is a file")):
        with pytest.raises(StateStoreError, match=f"--state-dir {uri} {said}, not a directory") as err:
            open_state_dir(uri)
        assert "\n" not in str(err.value)
    assert a_file.read_text() == "not a state dir"
