"""Structured logging: structlog on top of the standard ``logging`` module.

Library code binds ``scenario``, ``trial`` and ``host`` and logs events such as
``trial.start``; nothing is printed unless the application configures logging.
The CLI does, once, with :func:`configure_logging` (``--log-format``).

structlog (and the console renderer it pulls in) is imported only when an event
is actually emitted: a logger whose stdlib level is disabled costs one
``isEnabledFor`` check, so a run without ``--log-format`` never imports it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from ..choices import LogFormat

__all__ = [
    "LogFormat",
    "Logger",
    "bind_context",
    "configure_logging",
    "get_logger",
    "unbind_context",
]

_CONTEXT: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "atlante_eval_log_context", default=None
)


def _context() -> Mapping[str, Any]:
    return _CONTEXT.get() or {}


def bind_context(**values: Any) -> None:
    """Add ``values`` to every event logged from this context (e.g. ``run_id``)."""
    _CONTEXT.set({**_context(), **values})


def unbind_context(*names: str) -> None:
    """Remove ``names`` from the context bound with :func:`bind_context`."""
    _CONTEXT.set({k: v for k, v in _context().items() if k not in names})


def _merge_context(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    return {**_context(), **event}


def _shared() -> list[Any]:
    import structlog

    return [
        structlog.contextvars.merge_contextvars,
        _merge_context,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


class Logger:
    """A logger that hands events to the stdlib logger ``name`` through structlog, lazily."""

    def __init__(self, name: str) -> None:
        self._std = logging.getLogger(name)
        self._bound: Any = None

    def _structlog(self) -> Any:
        if self._bound is None:
            import structlog

            self._bound = structlog.wrap_logger(
                self._std,
                processors=[*_shared(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
                wrapper_class=structlog.stdlib.BoundLogger,
            )
        return self._bound

    def _emit(self, level: int, method: str, event: str, values: dict[str, Any]) -> None:
        if self._std.isEnabledFor(level):
            getattr(self._structlog(), method)(event, **values)

    def debug(self, event: str, **values: Any) -> None:
        """Log ``event`` at DEBUG."""
        self._emit(logging.DEBUG, "debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        """Log ``event`` at INFO."""
        self._emit(logging.INFO, "info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        """Log ``event`` at WARNING."""
        self._emit(logging.WARNING, "warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        """Log ``event`` at ERROR."""
        self._emit(logging.ERROR, "error", event, values)

    def exception(self, event: str, **values: Any) -> None:
        """Log ``event`` at ERROR with the exception being handled."""
        self._emit(logging.ERROR, "exception", event, values)


def get_logger(name: str) -> Logger:
    """Return a logger that hands events to the stdlib logger ``name`` (silent by default)."""
    return Logger(name)


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
    import structlog

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
