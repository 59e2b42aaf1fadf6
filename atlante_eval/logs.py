"""Structured logging: structlog on top of the standard ``logging`` module.

Library code binds ``scenario``, ``trial`` and ``host`` and logs events such as
``trial.start``; nothing is printed unless the application configures logging.
The CLI does, once, with :func:`configure_logging` (``--log-format``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from .choices import LogFormat

__all__ = ["LogFormat", "configure_logging", "get_logger"]


_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """Return a logger that hands events to the stdlib logger ``name`` (silent by default)."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(name),
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to whatever ``sys.stderr`` is when a record is emitted.

    While the CLI's live status line runs, ``sys.stderr`` is redirected through it,
    so log lines are printed above the status line instead of garbling it.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)
        super().emit(record)


def configure_logging(fmt: LogFormat) -> None:
    """Send ``atlante_eval`` events to stderr as JSON lines or console text, or nowhere."""
    root = logging.getLogger("atlante_eval")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.propagate = False
    if fmt == "none":
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL + 1)
        return
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    handler = _StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root.addHandler(handler)
    root.setLevel(logging.INFO)
