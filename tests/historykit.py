"""Shared pieces of the history tests: a store on either backend, and dated reports."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pgkit import fresh_database, postgres_server
from reports import report, trials
from typer.testing import CliRunner, Result

from atlante_eval import RunReport
from atlante_eval.cli import app
from atlante_eval.history import parse_history_url
from atlante_eval.history.store import HistoryStore, open_store

__all__ = [
    "as_json",
    "dated_report",
    "fresh_database",
    "invoke",
    "night",
    "postgres_server",
    "store",
    "store_url",
]

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A history store URL on each backend: a SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    url: str = request.getfixturevalue("fresh_database")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[HistoryStore]:
    """The store at ``store_url``, open."""
    with open_store(parse_history_url(store_url)) as opened:
        yield opened


def night(day: int) -> str:
    """The start time of night ``day`` (1-based) in March 2026."""
    return f"2026-03-{day:02d}T02:00:00.000Z"


def dated_report(
    day: int,
    scenarios: Mapping[str, Sequence[str]],
    *,
    serial: int = 0,
    **meta: Any,
) -> RunReport:
    """A report of night ``day`` whose trials recorded their start (so they have keys)."""
    started = night(day)
    built = {
        name: trials(verdicts, started_at=started.replace("02:00:00", f"02:{n:02d}:00"))
        for n, (name, verdicts) in enumerate(sorted(scenarios.items()))
    }
    return report(
        built,
        run_id=f"2026-03-{day:02d}T02-00-00-{serial:04x}",
        started_at=started,
        **meta,
    )


def invoke(*args: str | Path) -> Result:
    """Run the CLI; no traceback may escape."""
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def as_json(result: Result) -> Any:
    """The command's JSON output."""
    return json.loads(result.stdout)
