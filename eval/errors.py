"""Errors a user can cause with bad suites, trajectories or run directories."""

from __future__ import annotations

import os

from webfreeze.common.errors import WebfreezeError


class EvalError(WebfreezeError):
    """Base of every error this package raises on bad input; its message is one line."""


class TaskError(EvalError):
    """A task suite (or a file it refers to) is malformed.

    ``str()`` gives ``FILE:LINE: message`` (``FILE: message`` when no line applies).
    """

    def __init__(self, message: str, file: str | os.PathLike | None = None, line: int | None = None):
        self.message = message
        self.file = os.fspath(file) if file is not None else None
        self.line = line
        where = self.file or ""
        if where and line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}" if where else message)


class ReportError(EvalError):
    """A run directory cannot be scored (missing manifest, unreadable trajectory, ...)."""
