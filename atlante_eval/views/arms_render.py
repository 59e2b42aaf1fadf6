"""The arms x scenarios table of a run with arms, as data and as terminal text (docs/variants.md).

:func:`arm_table` reads it from a report (``show --json`` prints it as the run
view's ``arms``); :func:`arm_table_text` draws it for the run's summary and
``show``. Each cell is an arm's passed/graded trials of a scenario; a non-control
arm's cell carries its uplift verdict against the control (``+`` improved, ``-``
regressed, ``=`` unchanged, ``?`` inconclusive). The last rows are the overall
verdicts and each arm's cost per passing trial.
"""

from __future__ import annotations

from .._util.terminal import printable
from ..report import OutputModel, RunReport, arm_names, arm_scenarios, statistics_of
from ..report.arm_models import UpliftVerdict

__all__ = ["ArmCell", "ArmColumn", "ArmRow", "ArmTable", "arm_table", "arm_table_lines"]

_MARK = {"improved": "+", "regressed": "-", "unchanged": "=", "inconclusive": "?"}


class ArmCell(OutputModel):
    """One arm's trials of one scenario."""

    arm: str
    """The arm."""
    passed: int
    """Its passing trials."""
    graded: int
    """Its graded trials."""
    verdict: UpliftVerdict | None = None
    """Its uplift verdict against the control (absent for the control)."""
    difference: float | None = None
    """Its pass rate minus the control's (absent for the control)."""


class ArmRow(OutputModel):
    """One scenario: a cell per arm that ran it, in the table's arm order."""

    scenario: str
    """The scenario."""
    cells: list[ArmCell]
    """Its cells."""


class ArmColumn(OutputModel):
    """One arm over every scenario."""

    name: str
    """The arm's name."""
    control: bool
    """Whether it is the control."""
    model: str | None
    """Its model (absent: the run's)."""
    harness: str
    """``project``, ``none`` or the other root's path."""
    passed: int
    """Its passing trials."""
    graded: int
    """Its graded trials."""
    cost: float
    """Its cost (USD)."""
    cost_per_pass: float | None
    """Its cost per passing trial."""
    verdict: UpliftVerdict | None = None
    """Its overall uplift verdict (absent for the control)."""
    difference: float | None = None
    """Its overall difference against the control."""


class ArmTable(OutputModel):
    """The arms x scenarios table."""

    control: str
    """The control arm."""
    arms: list[ArmColumn]
    """The arms, the control first."""
    rows: list[ArmRow]
    """The scenarios, by name."""


def arm_table(report: RunReport) -> ArmTable | None:
    """The table of ``report`` (``None`` for a run without arms)."""
    names, uplift = arm_names(report), report.uplift
    if not names or uplift is None:
        return None
    infos = {a.name: a for a in report.meta.variants or []}
    per_arm = {arm: arm_scenarios(report, arm) for arm in names}
    rows = []
    for scenario in sorted(report.scenarios):
        cells = []
        for arm in names:
            result = per_arm[arm].get(scenario)
            if result is None:
                continue
            stats = statistics_of(result)
            found = uplift.arms.get(arm)
            row = found.scenarios.get(scenario) if found is not None else None
            cells.append(
                ArmCell(
                    arm=arm,
                    passed=stats.passed,
                    graded=stats.graded,
                    verdict=row.verdict if row is not None else None,
                    difference=row.difference if row is not None else None,
                )
            )
        rows.append(ArmRow(scenario=scenario, cells=cells))
    columns = []
    for arm in names:
        found = uplift.arms.get(arm)
        overall = found.overall if found is not None else None
        totals = uplift.totals.get(arm)
        columns.append(
            ArmColumn(
                name=arm,
                control=arm == names[0],
                model=infos[arm].model,
                harness=infos[arm].harness,
                passed=totals.passed if totals else 0,
                graded=totals.graded if totals else 0,
                cost=totals.cost if totals else 0.0,
                cost_per_pass=totals.cost_per_pass if totals else None,
                verdict=overall.verdict if overall is not None else None,
                difference=overall.difference if overall is not None else None,
            )
        )
    return ArmTable(control=names[0], arms=columns, rows=rows)


def arm_table_text(table: ArmTable) -> list[str]:
    """The table's lines for a terminal (untrusted names made printable)."""
    names = [column.name for column in table.arms]
    header = ["scenario", *(f"{a} (control)" if a == table.control else a for a in names)]
    rows = [header]
    for row in table.rows:
        by_arm = {cell.arm: cell for cell in row.cells}
        line = [row.scenario]
        for arm in names:
            cell = by_arm.get(arm)
            if cell is None:
                line.append("-")
                continue
            text = f"{cell.passed}/{cell.graded}"
            line.append(text if cell.verdict is None else f"{text} {_MARK[cell.verdict]}")
        rows.append(line)
    rows.append(
        [
            "overall",
            *(
                ""
                if c.verdict is None or c.difference is None
                else f"{c.difference:+.2f} {c.verdict}"
                for c in table.arms
            ),
        ]
    )
    rows.append(
        [
            "cost/pass",
            *("-" if c.cost_per_pass is None else f"${c.cost_per_pass:.4f}" for c in table.arms),
        ]
    )
    widths = [max(len(printable(r[c])) for r in rows) for c in range(len(header))]
    lines = [
        f"arms x scenarios (passed/graded; uplift vs {printable(table.control)}: "
        "+ improved, - regressed, = unchanged, ? inconclusive)"
    ]
    lines += [
        "  " + "  ".join(printable(r[c]).ljust(widths[c]) for c in range(len(r))).rstrip()
        for r in rows
    ]
    return lines


def arm_table_lines(report: RunReport) -> list[str]:
    """The table's lines for ``report`` (empty for a run without arms)."""
    table = arm_table(report)
    return [] if table is None else arm_table_text(table)
