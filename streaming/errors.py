"""The errors that mean "the input is wrong": the CLI reports them in one line, without a traceback.

Each package's own error of that kind derives from UserError, so this module imports nothing and the CLI
recognises them all without importing the packages (or Spark) behind them.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can change: a setting, an argument, the state dir, the environment."""


class UsageError(UserError, ValueError):
    """Bad command-line input."""


class JobError(UserError, RuntimeError):
    """A condition that stops the job before anything runs; the message says what to change."""


USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError)
