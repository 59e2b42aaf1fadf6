"""The history page drawn from the history store: a scenarios x runs heat map and trends.

Each cell is a scenario's pass rate in one run (graded trials), coloured by
tenths; each run's column header marks a partial (interrupted or one shard),
resumed or adaptive run, and the blessed baselines. Under the map, one trend
chart per scenario: its pass rate per run with the 95% interval.

A run with arms is stored as one run per arm (``<runId>@<arm>`` beside the
control's ``<runId>``); the page folds them back into one column per run and
gives each arm of a scenario its own row, ``<scenario>@<arm>``, so the map and
the trends follow each arm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from markupsafe import Markup

from ...history.models import HistoryRun, Quarantine, ScenarioNight
from .svg import SeriesPoint, series_chart

__all__ = ["StoreCell", "StoreColumn", "StorePage", "StoreRow", "store_history_page"]


@dataclass(frozen=True, slots=True)
class StoreColumn:
    """One run: a column of the heat map."""

    index: int
    run: HistoryRun
    marks: list[str]
    """``partial``, ``resumed``, ``adaptive``, ``shard I/N``."""


@dataclass(frozen=True, slots=True)
class StoreCell:
    """A scenario in one run (``night`` None: the run did not run it)."""

    night: ScenarioNight | None
    heat: str
    """CSS class: ``heat-0`` … ``heat-10`` by tenths of the pass rate, ``heat-none``,
    ``heat-absent``."""
    title: str


@dataclass(frozen=True, slots=True)
class StoreRow:
    """One scenario: a row of the heat map, and its trend chart."""

    name: str
    cells: list[StoreCell]
    chart: Markup
    quarantine: Quarantine | None


@dataclass(frozen=True, slots=True)
class StorePage:
    """The whole page."""

    title: str
    store: str
    columns: list[StoreColumn]
    rows: list[StoreRow]


def _marks(run: HistoryRun) -> list[str]:
    marks = []
    if run.interrupted:
        marks.append("partial")
    if run.shard:
        marks.append(f"shard {run.shard}")
    if run.resumed_from or run.absorbed:
        marks.append("resumed" if run.resumed_from else "merged")
    if run.adaptive:
        marks.append("adaptive")
    return marks


def _cell(run: HistoryRun, night: ScenarioNight | None) -> StoreCell:
    if night is None:
        return StoreCell(None, "heat-absent", f"{run.run_id}: not run")
    if night.pass_rate is None:
        return StoreCell(night, "heat-none", f"{run.run_id}: no graded trials")
    low, high = night.interval or (0.0, 0.0)
    title = (
        f"{run.run_id}: {night.passed}/{night.graded} passed, "
        f"{night.pass_rate:.0%} [{low:.0%}-{high:.0%}]"
    )
    return StoreCell(night, f"heat-{round(night.pass_rate * 10)}", title)


def _fold_arms(
    runs: list[HistoryRun], matrix: Mapping[str, Mapping[str, ScenarioNight]]
) -> tuple[list[HistoryRun], Mapping[str, Mapping[str, ScenarioNight]]]:
    """One column per run, one row per scenario and arm (nothing changes without arms)."""
    if all(run.arm is None for run in runs):
        return runs, matrix
    base = {run.run_id: run.run_id.partition("@")[0] for run in runs}
    kept: dict[str, HistoryRun] = {}
    for run in runs:
        if base[run.run_id] not in kept or "@" not in run.run_id:
            kept[base[run.run_id]] = run
    arm_of = {run.run_id: run.arm for run in runs}
    folded: dict[str, dict[str, ScenarioNight]] = {}
    for name, nights in matrix.items():
        for run_id, night in nights.items():
            arm = arm_of.get(run_id)
            row = name if arm is None else f"{name}@{arm}"
            folded.setdefault(row, {})[kept[base[run_id]].run_id] = night
    ordered = [run for run in runs if kept.get(base[run.run_id]) is run]
    return ordered, dict(sorted(folded.items()))


def store_history_page(
    store: str,
    runs: list[HistoryRun],
    matrix: Mapping[str, Mapping[str, ScenarioNight]],
    quarantined: Mapping[str, Quarantine],
) -> StorePage:
    """The page over ``runs`` (oldest first) and each scenario's nights in them."""
    runs, matrix = _fold_arms(runs, matrix)
    columns = [StoreColumn(i + 1, run, _marks(run)) for i, run in enumerate(runs)]
    rows = []
    for name, nights in matrix.items():
        cells = [_cell(run, nights.get(run.run_id)) for run in runs]
        points = [
            SeriesPoint(
                run.run_id,
                cell.night.pass_rate if cell.night else None,
                *((cell.night.interval if cell.night else None) or (0.0, 0.0)),
            )
            for run, cell in zip(runs, cells, strict=True)
        ]
        quarantine = quarantined.get(name.partition("@")[0])  # a scenario name has no @
        rows.append(StoreRow(name, cells, series_chart(points), quarantine))
    return StorePage(
        title=f"atlante-eval history of {store}",
        store=store,
        columns=columns,
        rows=rows,
    )
