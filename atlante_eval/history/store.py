"""The history store's one interface: :class:`HistoryStore` over either backend.

Open it with :func:`open_store` (a context manager that closes it). Every method
runs in its own transaction; a database problem is a ``history-unavailable``
diagnostic (exit 3), never a traceback.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, warning
from ..report import REPORT_FILE, RunReport, load_report, report_path
from . import baselines as _baselines
from . import quarantine as _quarantine
from .database import Database, open_database
from .ingest import IngestResult, ingest_report
from .location import DEFAULT_BASELINE, HistoryLocation
from .models import Blessing, FlakyScenario, HistoryRun, Quarantine, ScenarioHistory, ScenarioNight
from .queries import RunFilter, flaky_scenarios, list_runs, run_matrix, scenario_history

__all__ = ["HistoryStore", "RunFilter", "actor", "open_store"]

_SELFTEST_HOST = "selftest"
#: Deepest directory level searched for reports under a directory given to ingest.
_MAX_DEPTH = 6


def actor() -> str:
    """Who is acting: ``$GITHUB_ACTOR`` in GitHub Actions, else the operating-system user."""
    named = os.environ.get("GITHUB_ACTOR", "").strip()
    if named:
        return named
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


class HistoryStore:
    """Runs, scenarios and trials of every recorded report; baselines; quarantine."""

    def __init__(self, database: Database) -> None:
        self._database = database

    @property
    def location(self) -> HistoryLocation:
        """Where the store is."""
        return self._database.location

    def close(self) -> None:
        """Release the database connections."""
        self._database.close()

    # --- recording -------------------------------------------------------------------

    def ingest(
        self, report: RunReport, *, report_path: str | None = None, run_dir: str | None = None
    ) -> IngestResult:
        """Record one report (idempotent: see :mod:`.ingest`)."""
        return ingest_report(self._database, report, report_path=report_path, run_dir=run_dir)

    def ingest_path(self, path: Path) -> tuple[list[IngestResult], list[Diagnostic]]:
        """Record the report at ``path``: a report file, a run directory, or a directory of runs.

        Selftest reports are left out with a warning; in a directory of runs an
        unreadable report is left out with a warning too.
        """
        files = _report_files(path)
        results: list[IngestResult] = []
        notes: list[Diagnostic] = []
        for file in files:
            try:
                report = load_report(file)
            except DiagnosticError as exc:
                if len(files) == 1 and file == report_path(path):
                    raise
                notes.extend(
                    warning(d.code, f"left out: {d.message}", source=str(file))
                    for d in exc.diagnostics[:1]
                )
                continue
            if report.meta.host == _SELFTEST_HOST or (file.parent / "selftest.json").exists():
                notes.append(
                    warning(
                        "history-ingest-skipped",
                        f"{file} is a selftest report; the history records runs only",
                        source=str(file),
                    )
                )
                continue
            results.append(
                self.ingest(
                    report,
                    report_path=display_path(file.absolute()),
                    run_dir=display_path(file.parent.absolute()),
                )
            )
        return results, notes

    # --- reading ---------------------------------------------------------------------

    def runs(self, where: RunFilter | None = None) -> list[HistoryRun]:
        """Recorded runs, newest first."""
        with self._database.read() as connection:
            return list_runs(connection, where or RunFilter())

    def scenario(
        self, name: str, *, last: int = 10, where: RunFilter | None = None
    ) -> ScenarioHistory | None:
        """``name`` over its last ``last`` runs (None when no recorded run ran it)."""
        with self._database.read() as connection:
            return scenario_history(connection, name, last=last, where=where or RunFilter())

    def flaky(
        self, *, last: int = 20, where: RunFilter | None = None, min_runs: int = 2
    ) -> list[FlakyScenario]:
        """Scenarios whose outcome flips across the last ``last`` runs, most first."""
        with self._database.read() as connection:
            return flaky_scenarios(
                connection, last=last, where=where or RunFilter(), min_runs=min_runs
            )

    def matrix(
        self, where: RunFilter | None = None
    ) -> tuple[list[HistoryRun], dict[str, dict[str, ScenarioNight]]]:
        """Runs (oldest first) and, per scenario, its night in each run."""
        with self._database.read() as connection:
            return run_matrix(connection, where or RunFilter())

    def run_dir(self, run_id: str) -> Path | None:
        """The directory the stored run was recorded from, when it still exists."""
        with self._database.read() as connection:
            recorded = _baselines.stored_run_dir(connection, run_id)
        return Path(recorded) if recorded is not None and Path(recorded).is_dir() else None

    def report(self, run_id: str) -> RunReport:
        """The stored run's report, rebuilt (without diffs)."""
        with self._database.read() as connection:
            return _baselines.load_run_report(connection, run_id)

    # --- baselines -------------------------------------------------------------------

    def bless(
        self, run_id: str, *, reason: str, name: str = DEFAULT_BASELINE, by: str | None = None
    ) -> Blessing:
        """Bless a stored run as baseline ``name`` for its host, model and arm."""
        return _baselines.bless_run(
            self._database, run_id, name=name, by=by or actor(), reason=reason
        )

    def blessings(self, *, everything: bool = False) -> list[Blessing]:
        """Baselines in force (or every blessing ever)."""
        with self._database.read() as connection:
            return _baselines.list_blessings(connection, everything=everything)

    def baseline(
        self, name: str, *, host: str, model: str | None, arm: str | None = None
    ) -> tuple[Blessing, RunReport]:
        """The blessed baseline ``name`` for a condition, and its report."""
        with self._database.read() as connection:
            blessing = _baselines.find_baseline(connection, name, host=host, model=model, arm=arm)
            return blessing, _baselines.load_run_report(connection, blessing.run_id)

    # --- quarantine ------------------------------------------------------------------

    def quarantine(
        self,
        scenario: str,
        *,
        reason: str,
        owner: str | None = None,
        until: date | None = None,
        by: str | None = None,
    ) -> Quarantine:
        """Quarantine ``scenario`` (replacing one in force)."""
        return _quarantine.add_quarantine(
            self._database, scenario, reason=reason, owner=owner, until=until, by=by or actor()
        )

    def release(self, scenario: str, *, by: str | None = None) -> bool:
        """End ``scenario``'s quarantine; False when none is in force."""
        return _quarantine.remove_quarantine(self._database, scenario, by=by or actor())

    def quarantines(self, *, everything: bool = False) -> list[Quarantine]:
        """Quarantines in force (or every one ever)."""
        with self._database.read() as connection:
            return _quarantine.list_quarantines(connection, everything=everything)

    def quarantined(self) -> dict[str, Quarantine]:
        """Quarantines in force today, by scenario."""
        with self._database.read() as connection:
            return _quarantine.active_quarantines(connection)


@contextmanager
def open_store(location: HistoryLocation) -> Iterator[HistoryStore]:
    """Open (and migrate) the store at ``location``; close it on the way out."""
    store = HistoryStore(open_database(location))
    try:
        yield store
    finally:
        store.close()


def _report_files(path: Path) -> list[Path]:
    """The report files ``path`` names: itself, its ``report.json``, or every one below it."""
    if path.is_file() or (path / REPORT_FILE).is_file():
        return [report_path(path)]
    if not path.is_dir():
        return [report_path(path)]  # load_report says what is wrong with it
    found = []
    for current, dirs, files in os.walk(path, followlinks=False):
        depth = len(Path(current).relative_to(path).parts)
        dirs[:] = sorted(d for d in dirs if d != "trials") if depth < _MAX_DEPTH else []
        if REPORT_FILE in files and not (Path(current) / REPORT_FILE).is_symlink():
            found.append(Path(current) / REPORT_FILE)
    return found
