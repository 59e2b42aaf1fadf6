"""The arms section of a run page (``eval.variants``): the heat-map matrix and the forest plot.

The matrix has a row per scenario and a column per arm (the control first); each
cell is the arm's pass rate over its graded trials, coloured from red (0%) to
green (100%), with its uplift verdict, and links to that arm's trials of the
scenario on the same page. The forest plot draws every non-control arm's
difference against the control with its interval, per scenario and overall.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from ...report import RunReport, arm_names, arm_scenarios, statistics_of
from .svg import ForestRow, forest_plot

__all__ = ["ArmsSection", "HeatCell", "HeatRow", "arms_section", "row_anchor"]


@dataclass(frozen=True, slots=True)
class HeatCell:
    """One arm's trials of one scenario in the matrix."""

    arm: str
    passed: int
    graded: int
    rate: float | None
    verdict: str | None
    colour: str
    href: str


@dataclass(frozen=True, slots=True)
class HeatRow:
    """One scenario: a cell per arm (``None`` where the arm did not run it)."""

    scenario: str
    cells: list[HeatCell | None]


@dataclass(frozen=True, slots=True)
class ArmsSection:
    """The arms of the run, their matrix, totals and the uplift forest plot."""

    control: str
    arms: list[str]
    rows: list[HeatRow]
    totals: list[tuple[str, str, str, str]]
    forest: Markup
    test: str


def row_anchor(scenario_anchor: str, arm: str | None) -> str:
    """The page id of one arm's row of a scenario (``<anchor>@<arm>``; no arm: the anchor)."""
    return scenario_anchor if arm is None else f"{scenario_anchor}@{arm}"


def _colour(rate: float | None) -> str:
    """Red (0%) through yellow to green (100%); grey when nothing was graded."""
    if rate is None:
        return "hsl(0, 0%, 85%)"
    return f"hsl({rate * 120:.0f}, 70%, 72%)"


def arms_section(report: RunReport, anchors: dict[str, str]) -> ArmsSection | None:
    """The section of ``report`` (``None`` without arms); ``anchors``: each scenario's id."""
    names, uplift = arm_names(report), report.uplift
    if not names or uplift is None:
        return None
    per_arm = {arm: arm_scenarios(report, arm) for arm in names}
    rows = []
    for scenario in report.scenarios:
        cells: list[HeatCell | None] = []
        for arm in names:
            result = per_arm[arm].get(scenario)
            if result is None:
                cells.append(None)
                continue
            stats = statistics_of(result)
            rate = stats.pass_rate_graded if stats.graded else None
            found = uplift.arms.get(arm)
            row = found.scenarios.get(scenario) if found is not None else None
            cells.append(
                HeatCell(
                    arm=arm,
                    passed=stats.passed,
                    graded=stats.graded,
                    rate=rate,
                    verdict=row.verdict if row is not None else None,
                    colour=_colour(rate),
                    href=f"#{row_anchor(anchors[scenario], arm)}-trials",
                )
            )
        rows.append(HeatRow(scenario=scenario, cells=cells))
    forest_rows = [
        ForestRow(
            f"{label} · {arm}", row.difference, *row.difference_interval, css=f"c-{row.verdict}"
        )
        for arm, each in uplift.arms.items()
        for label, row in [*sorted(each.scenarios.items()), ("overall", each.overall)]
        if row is not None
    ]
    totals = [
        (
            arm,
            f"{t.passed}/{t.graded}",
            f"${t.cost:.4f}",
            "n/a" if t.cost_per_pass is None else f"${t.cost_per_pass:.4f}",
        )
        for arm, t in uplift.totals.items()
    ]
    return ArmsSection(
        control=names[0],
        arms=names,
        rows=rows,
        totals=totals,
        forest=forest_plot(forest_rows, subject=f"arm - {names[0]}"),
        test=f"two-sided Fisher exact test, Holm adjustment over {uplift.family_size} tests "
        f"(every arm, scenario and overall row), alpha {uplift.alpha:g}; Newcombe interval "
        f"of the difference; margin {uplift.margin * 100:g} points",
    )
