"""How the command shows library logging: one line per record on stderr.

Library code reports through :mod:`logging` (loggers under ``agentbench``); the command prints records at
INFO and above as ``agentbench: <message>``. A module of its own, light to import, so that
``agentbench/__main__.py`` can report what it does before the CLI's modules are imported.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["StderrLineHandler", "log_to_stderr"]


class StderrLineHandler(logging.Handler):
    """A log record as one line on the current ``sys.stderr``: ``agentbench: <message>``, no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = " ".join(record.getMessage().splitlines())
            stream = sys.stderr
            stream.write(f"agentbench: {message}\n")
            stream.flush()
        except Exception:  # pragma: no cover - logging must never break the command
            self.handleError(record)


@contextmanager
def log_to_stderr(level: int = logging.INFO) -> Iterator[None]:
    """While the command runs, print the ``agentbench`` loggers' records at ``level`` and above on stderr
    (the handler and level are removed afterwards, so calling :func:`main` in a process leaves no trace)."""
    logger = logging.getLogger("agentbench")
    handler = StderrLineHandler(level)
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
