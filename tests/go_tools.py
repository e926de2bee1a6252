"""Servers the tests build from the Go module proxy (Toxiproxy, MinIO): ``go install`` once into
~/.cache/kcompact, at a pinned version, then the cached binary ever after."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from streaming.runtime.user_cache import cache_root, filling, publish, scratch_beside


class GoBuildError(RuntimeError):
    """A test server could not be built; the message says why."""


@dataclass(frozen=True)
class GoTool:
    name: str     # what the cache directory and the messages call it
    module: str   # the package go install builds
    version: str  # the pinned version (a tag or a pseudo-version)
    binary: str   # what go install names the command

    @property
    def directory(self) -> Path:
        return cache_root() / f"{self.name.lower()}-{self.version}"

    def ensure(self) -> Path:
        """The binary, built with ``go install`` the first time (or by the set-up still building it)."""
        with filling(self.directory):
            if not _complete(self.directory, self.binary):
                self._build()
        return self.directory / self.binary

    def _build(self) -> None:
        go = shutil.which("go")
        if go is None:
            raise GoBuildError(f"go is missing: the tests build {self.name} {self.version} with it (Go 1.24 or "
                               f"newer, https://go.dev/dl)")
        scratch = scratch_beside(self.directory)
        # without the symbol table and DWARF (-s -w): a shorter link, and the tests never debug these servers
        done = subprocess.run([go, "install", "-ldflags=-s -w", f"{self.module}@{self.version}"],
                              capture_output=True, text=True,
                              env={**os.environ, "GOBIN": str(scratch), "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0 or not _complete(scratch, self.binary):
            shutil.rmtree(scratch, ignore_errors=True)
            raise GoBuildError(f"building {self.name} {self.version} failed: "
                               f"{(done.stdout + done.stderr).strip()[-800:]}")
        publish(scratch, self.directory, lambda d: _complete(d, self.binary))

    def main(self) -> None:
        """``python -m tests.<module>`` (the test set-up runs it): built, or one line saying why not."""
        try:
            print(f"{self.name} {self.version} at {self.ensure()}")
        except GoBuildError as exc:
            print(f"kcompact: {exc}", file=sys.stderr)
            sys.exit(1)


def _complete(directory: Path, binary: str) -> bool:
    return (directory / binary).is_file() and os.access(directory / binary, os.X_OK)
