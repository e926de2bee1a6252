"""The sanitizer lane's plugin (scripts/test.sh --asan, with ``-p tests.asan``): the C extension is loaded from
the AddressSanitizer build named by KCOMPACT_ASAN_EXTENSION instead of the installed one, so the native tests
run its every read and write of memory under ASan. Loaded as a plugin, before any test imports the package."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

import pytest

ENV = "KCOMPACT_ASAN_EXTENSION"
MODULE = "streaming.kafka.native._rdkafka_columns"


class _SanitizedExtension(importlib.abc.MetaPathFinder):
    def __init__(self, path: str) -> None:
        self.path = path

    def find_spec(self, name, path=None, target=None):
        if name != MODULE:
            return None
        return importlib.util.spec_from_file_location(name, self.path,
                                                      loader=importlib.machinery.ExtensionFileLoader(name, self.path))


def pytest_configure(config: pytest.Config) -> None:
    built = os.environ.get(ENV)
    if not built or not os.path.isfile(built):
        raise pytest.UsageError(f"-p tests.asan needs {ENV} naming the AddressSanitizer build of the extension")
    if MODULE in sys.modules:
        raise pytest.UsageError(f"{MODULE} was imported before the ASan build could take its place")
    sys.meta_path.insert(0, _SanitizedExtension(built))


@pytest.fixture(autouse=True)
def _the_sanitized_build_is_the_one_loaded() -> None:
    module = sys.modules.get(MODULE)
    assert module is None or module.__file__ == os.environ[ENV], f"{MODULE} came from {module.__file__}"
