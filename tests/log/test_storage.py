"""The log's storage on a local disk: JSON documents written whole."""

from __future__ import annotations

import os

from streaming.log import LocalStorage
from streaming.log.storage import read_json, write_json


def test_a_document_is_replaced_whole_and_a_missing_one_reads_as_none(tmp_path) -> None:
    path = str(tmp_path / "doc.json")
    storage = LocalStorage()
    assert read_json(storage, path) is None
    write_json(storage, path, {"a": 1})
    write_json(storage, path, {"a": 2, "b": [1, 2]})
    assert read_json(storage, path) == {"a": 2, "b": [1, 2]} and os.listdir(tmp_path) == ["doc.json"]
