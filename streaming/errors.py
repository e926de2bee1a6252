"""The errors that mean "the input is wrong": the CLI reports them in one line, without a traceback."""

from __future__ import annotations

from streaming.broker import BrokerError
from streaming.cleaner.checkpoint import CheckpointError
from streaming.cleaner.config import ConfigError
from streaming.source.options import SourceOptionError


class UsageError(ValueError):
    """Bad command-line input."""


class JobError(RuntimeError):
    """A condition that stops the job before anything runs; the message says what to change."""


USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, SourceOptionError, CheckpointError, UsageError,
                                                JobError, BrokerError, FileNotFoundError)
