"""The history page as data: every run report under a directory, oldest first.

:func:`collect_reports` walks a directory (a project's ``.atlante/eval``, or a
folder of downloaded CI artifacts) for ``report.json`` files, without following
symbolic links and within bounds, and leaves out selftest reports. :func:`history_page`
lines the runs up by start time: per scenario its pass rate with the Wilson
interval over time, its stability class per run, and the runs where it regressed
as ``compare`` judges each run against the one before; per run its tokens and cost.
A partial run (interrupted, or one shard) is marked so, its row and its judgements.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from ...diagnostics import Diagnostic, DiagnosticError, warning
from ...report import REPORT_FILE, RunReport, arms_as_scenarios, load_report, statistics_of
from ...report.compare import compare_reports
from .svg import SeriesPoint, series_chart

__all__ = [
    "MAX_HISTORY_REPORTS",
    "HistoryCell",
    "HistoryPage",
    "HistoryRun",
    "HistoryScenario",
    "collect_reports",
    "history_page",
]

#: Most reports one history page reads (the newest are kept).
MAX_HISTORY_REPORTS = 500
#: Deepest directory level searched below the history directory.
MAX_HISTORY_DEPTH = 6
_SELFTEST_HOST = "selftest"


@dataclass(frozen=True, slots=True)
class LoadedReport:
    """A report found under the history directory, and where."""

    path: Path
    report: RunReport
    started_at: str | None = None
    """When its trials ran: a regraded report takes its original run's place in time."""


def _regrades_replace(loaded: list[LoadedReport]) -> list[LoadedReport]:
    """A regraded report stands for the run it regraded (the same trials, judged again).

    Of a run and its regrades, only the newest regrade stays, at the original run's
    start time; otherwise one night's trials would count twice.
    """
    by_id = {item.report.run_id: item for item in loaded}

    def root(item: LoadedReport) -> str:
        current, seen = item.report, set()
        while current.meta.regraded_from in by_id and current.run_id not in seen:
            seen.add(current.run_id)
            current = by_id[current.meta.regraded_from].report
        return current.run_id

    groups: dict[str, list[LoadedReport]] = {}
    for item in loaded:
        groups.setdefault(root(item), []).append(item)
    kept = []
    for origin, items in groups.items():
        newest = max(items, key=lambda i: (i.report.meta.started_at or "", i.report.run_id))
        start = by_id[origin].report.meta.started_at if origin in by_id else None
        kept.append(LoadedReport(newest.path, newest.report, start))
    return kept


def _is_selftest(file: Path, report: RunReport) -> bool:
    return report.meta.host == _SELFTEST_HOST or (file.parent / "selftest.json").exists()


def collect_reports(directory: Path) -> tuple[list[LoadedReport], list[Diagnostic]]:
    """Every run report under ``directory`` (selftests left out), oldest first, and warnings.

    An unreadable report is left out with a warning naming it.
    """
    found: list[Path] = []
    root = Path(directory)
    for current, dirs, files in os.walk(root, followlinks=False):
        depth = len(Path(current).relative_to(root).parts)
        if depth >= MAX_HISTORY_DEPTH:
            dirs.clear()
        dirs[:] = sorted(d for d in dirs if d != "trials")
        candidate = Path(current) / REPORT_FILE
        if REPORT_FILE in files and not candidate.is_symlink():
            found.append(candidate)
    loaded: list[LoadedReport] = []
    notes: list[Diagnostic] = []
    for file in found:
        try:
            report = load_report(file)
        except DiagnosticError as exc:
            first = exc.diagnostics[0].message if exc.diagnostics else "unreadable"
            notes.append(
                warning(
                    "report-unreadable",
                    f"left out of the history: {first}",
                    source=str(file),
                    next="remove or repair the report",
                )
            )
            continue
        if not _is_selftest(file, report):
            loaded.append(LoadedReport(file, report))
    loaded = _regrades_replace(loaded)
    loaded.sort(key=lambda r: (r.started_at or "", r.report.run_id, str(r.path)))
    if len(loaded) > MAX_HISTORY_REPORTS:
        notes.append(
            warning(
                "report-unreadable",
                f"{len(loaded) - MAX_HISTORY_REPORTS} older reports left out of the history "
                f"(at most {MAX_HISTORY_REPORTS})",
                source=str(directory),
            )
        )
        loaded = loaded[-MAX_HISTORY_REPORTS:]
    return loaded, notes


@dataclass(frozen=True, slots=True)
class HistoryRun:
    """One run (a column of the history)."""

    run_id: str
    path: str
    started_at: str | None
    host: str
    model: str
    harness: str | None
    tokens: int
    cost: float
    trials: int
    regressions: list[str]
    partial: bool = False
    """The run was interrupted or is one shard: a partial report."""
    regraded_from: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryCell:
    """One scenario in one run."""

    present: bool
    rate: float | None = None
    interval: tuple[float, float] | None = None
    stability: str | None = None
    regressed: bool = False
    improved: bool = False
    partial: bool = False
    """The run is partial: its judgement rests on the trials that finished."""


@dataclass(frozen=True, slots=True)
class HistoryScenario:
    """One scenario over the runs."""

    name: str
    chart: Markup
    cells: list[HistoryCell]


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """The whole history page."""

    title: str
    directory: str
    runs: list[HistoryRun]
    scenarios: list[HistoryScenario]


def _partial(report: RunReport) -> bool:
    return bool(report.meta.interrupted) or report.meta.shard is not None


def history_page(directory: Path, reports: list[LoadedReport]) -> HistoryPage:
    """The history of ``reports`` (oldest first), found under ``directory``.

    A run with arms shows each arm's scenarios as ``<scenario>@<arm>``, so every arm has
    its own line across runs.
    """
    reports = [dataclasses.replace(r, report=arms_as_scenarios(r.report)) for r in reports]
    verdicts: list[dict[str, str]] = [{}]
    for before, after in itertools.pairwise(reports):
        compared = compare_reports(before.report, after.report)
        verdicts.append({name: c.verdict for name, c in compared.scenarios.items()})
    runs = []
    for loaded, judged in zip(reports, verdicts, strict=True):
        report, totals = loaded.report, loaded.report.meta.totals
        trials = report.all_trials()
        runs.append(
            HistoryRun(
                run_id=report.run_id,
                path=str(loaded.path),
                started_at=report.meta.started_at,
                host=report.meta.host,
                model=report.meta.model,
                harness=report.meta.manifest_digest[:12] if report.meta.manifest_digest else None,
                tokens=totals.tokens if totals else sum(t.tokens or 0 for t in trials),
                cost=totals.cost if totals else sum(t.cost or 0.0 for t in trials),
                trials=len(trials),
                regressions=sorted(n for n, v in judged.items() if v == "regressed"),
                partial=_partial(report),
                regraded_from=report.meta.regraded_from,
            )
        )
    names = sorted({name for loaded in reports for name in loaded.report.scenarios})
    scenarios = []
    for name in names:
        cells: list[HistoryCell] = []
        points: list[SeriesPoint] = []
        for loaded, judged in zip(reports, verdicts, strict=True):
            result = loaded.report.scenarios.get(name)
            if result is None:
                cells.append(HistoryCell(present=False))
                points.append(SeriesPoint(loaded.report.run_id, None))
                continue
            stats = statistics_of(result)
            graded = stats.graded > 0
            cell = HistoryCell(
                present=True,
                rate=stats.pass_rate_graded if graded else None,
                interval=stats.wilson95 if graded else None,
                stability=stats.stability,
                regressed=judged.get(name) == "regressed",
                improved=judged.get(name) == "improved",
                partial=_partial(loaded.report),
            )
            cells.append(cell)
            points.append(
                SeriesPoint(
                    loaded.report.run_id,
                    cell.rate,
                    *(cell.interval or (0.0, 0.0)),
                    css="regressed" if cell.regressed else "",
                )
            )
        scenarios.append(HistoryScenario(name, series_chart(points), cells))
    return HistoryPage(
        title=f"atlante-eval history of {directory}",
        directory=str(directory),
        runs=runs,
        scenarios=scenarios,
    )
