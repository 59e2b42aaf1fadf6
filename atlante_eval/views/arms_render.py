"""The arms x scenarios table of a run with arms, for the terminal (docs/variants.md).

Each cell is an arm's passed/graded trials of a scenario; a non-control arm's cell
carries its uplift verdict against the control (``+`` improved, ``-`` regressed,
``=`` unchanged, ``?`` inconclusive). The last rows are the overall verdicts and
each arm's cost per passing trial.
"""

from __future__ import annotations

from .._util.terminal import printable
from ..report import RunReport, arm_names, arm_scenarios, statistics_of

__all__ = ["arm_table_lines"]

_MARK = {"improved": "+", "regressed": "-", "unchanged": "=", "inconclusive": "?"}


def arm_table_lines(report: RunReport) -> list[str]:
    """The table's lines (empty for a run without arms)."""
    names, uplift = arm_names(report), report.uplift
    if not names or uplift is None:
        return []
    per_arm = {arm: arm_scenarios(report, arm) for arm in names}
    header = ["scenario", *(f"{a} (control)" if a == names[0] else a for a in names)]
    rows = [header]
    for scenario in sorted(report.scenarios):
        row = [scenario]
        for arm in names:
            result = per_arm[arm].get(scenario)
            if result is None:
                row.append("-")
                continue
            stats = statistics_of(result)
            cell = f"{stats.passed}/{stats.graded}"
            found = uplift.arms.get(arm)
            verdict = found.scenarios.get(scenario) if found is not None else None
            row.append(cell if verdict is None else f"{cell} {_MARK[verdict.verdict]}")
        rows.append(row)
    overall = ["overall"]
    for arm in names:
        found = uplift.arms.get(arm)
        row_of = found.overall if found is not None else None
        overall.append("" if row_of is None else f"{row_of.difference:+.2f} {row_of.verdict}")
    rows.append(overall)
    cost = ["cost/pass"]
    for arm in names:
        each = uplift.totals.get(arm)
        per = each.cost_per_pass if each is not None else None
        cost.append("-" if per is None else f"${per:.4f}")
    rows.append(cost)
    widths = [max(len(printable(r[c])) for r in rows) for c in range(len(header))]
    lines = [
        f"arms x scenarios (passed/graded; uplift vs {printable(names[0])}: "
        "+ improved, - regressed, = unchanged, ? inconclusive)"
    ]
    lines += [
        "  " + "  ".join(printable(r[c]).ljust(widths[c]) for c in range(len(r))) for r in rows
    ]
    return lines
