"""Where the history store is: a SQLite file or a PostgreSQL URL, resolved once.

Import-light on purpose (no SQLAlchemy): ``run`` resolves the location before its
first trial and only opens the store after the report is published.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..choices import HistoryBackend
from ..diagnostics import DiagnosticError, error

__all__ = [
    "BLESSED",
    "DEFAULT_BASELINE",
    "DEFAULT_HISTORY_FILE",
    "HistoryLocation",
    "blessed_name",
    "history_location",
    "parse_history_url",
]

#: The embedded default store, relative to the project root.
DEFAULT_HISTORY_FILE = Path(".atlante") / "eval" / "history.sqlite"

#: The name of a baseline blessed without ``--name``.
DEFAULT_BASELINE = "default"
#: How a command names the blessed baseline instead of a report: ``blessed[:NAME]``.
BLESSED = "blessed"

_POSTGRES_SCHEMES = {"postgresql", "postgres", "postgresql+psycopg"}


@dataclass(frozen=True, slots=True)
class HistoryLocation:
    """A resolved history store: its backend, SQLAlchemy URL and a printable name."""

    backend: HistoryBackend
    """``sqlite`` or ``postgresql``."""
    url: str
    """The SQLAlchemy URL (driver named), passwords included: never print it."""
    display: str
    """What messages show: the SQLite path, or the PostgreSQL URL without its password."""
    path: Path | None = None
    """The SQLite file (``None`` for PostgreSQL)."""


def parse_history_url(raw: str, *, base: Path | None = None) -> HistoryLocation:
    """Parse ``--history`` / ``eval.history``: a path, ``sqlite:///PATH`` or ``postgresql://…``.

    A relative path is taken relative to ``base`` (default: the current directory).

    Raises:
        DiagnosticError: ``history-invalid-url`` (exit 2) for anything else.
    """
    text = raw.strip()
    if not text:
        raise _invalid(raw, "it is empty")
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in _POSTGRES_SCHEMES:
        parts = urlsplit(text)
        if not parts.hostname and "host=" not in parts.query:
            raise _invalid(_redacted(parts), "a PostgreSQL URL needs a host (postgresql://HOST/DB)")
        if not parts.path.strip("/"):
            raise _invalid(_redacted(parts), "a PostgreSQL URL needs a database name (…/DB)")
        url = urlunsplit(("postgresql+psycopg", *parts[1:]))
        return HistoryLocation("postgresql", url, _redacted(parts))
    if scheme in {"sqlite", "sqlite+pysqlite"}:
        rest = text.split("://", 1)[1]
        if not rest.startswith("/") or rest == "/":
            raise _invalid(raw, "write sqlite:///relative/path or sqlite:////absolute/path")
        return _sqlite(Path(rest[1:]), base)
    if scheme:
        raise _invalid(raw, f"the scheme {scheme!r} is not supported")
    return _sqlite(Path(text).expanduser(), base)


def history_location(
    option: str | None,
    *,
    configured: str | bool | None,
    project_root: Path | None,
) -> HistoryLocation | None:
    """The store a command uses: ``--history``, else ``eval.history``, else the default,
    ``<project>/.atlante/eval/history.sqlite`` (also when ``run --out`` publishes elsewhere).

    Returns None when ``eval.history`` is ``false`` (and no option overrides it) or
    when there is neither an option nor a project.
    """
    if option is not None:
        return parse_history_url(option)
    if configured is False:
        return None
    if isinstance(configured, str):
        return parse_history_url(configured, base=project_root)
    if project_root is None:
        return None
    return _sqlite(project_root / DEFAULT_HISTORY_FILE, None)


def _sqlite(path: Path, base: Path | None) -> HistoryLocation:
    if not path.is_absolute():
        path = (base if base is not None else Path.cwd()) / path
    path = path.absolute()
    return HistoryLocation("sqlite", f"sqlite+pysqlite:///{path}", str(path), path)


def _redacted(parts: SplitResult) -> str:
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    return urlunsplit(("postgresql", netloc, parts.path, parts.query, ""))


def _invalid(raw: str, why: str) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "history-invalid-url",
                f"the history location {raw!r} is not usable: {why}",
                expected="a SQLite file path, sqlite:///PATH, or postgresql://USER@HOST/DB",
                next="fix --history or eval.history (see docs/history.md)",
            )
        ]
    )


def blessed_name(spec: str) -> str | None:
    """``blessed`` → ``default``; ``blessed:NAME`` → NAME; anything else → None."""
    if spec == BLESSED:
        return DEFAULT_BASELINE
    if spec.startswith(f"{BLESSED}:") and spec[len(BLESSED) + 1 :].strip():
        return spec[len(BLESSED) + 1 :].strip()
    return None
