"""Terminal lines of an adaptive run: each look's estimate, and the decisions and saving.

Scenario names come from documents and are escaped by the caller's printers
(:func:`atlante_eval._util.terminal.printable`).
"""

from __future__ import annotations

from .._util.terminal import printable
from ..report import AdaptiveRecord, ScenarioLooked

__all__ = ["look_line", "summary_lines"]


def _points(value: float) -> str:
    """A difference in percentage points with its sign: ``-52.1``."""
    return f"{value * 100:+.1f}"


def look_line(event: ScenarioLooked) -> str:
    """``flip: look at 6 trials · 0% vs base 100% · -100.0 [-100.0, -48.3] pts · regressed``."""
    look = event.look
    rate = look.passed / look.graded if look.graded else 0.0
    low, high = look.interval
    state = (
        "continues"
        if event.stopped is None
        else "decided"
        if event.stopped == "decided"
        else f"stops: {event.stopped}"
    )
    return (
        f"{printable(event.scenario)}: look at {look.trials} trials · "
        f"{round(rate * 100)}% vs base {round(event.base_rate * 100)}% · "
        f"{_points(look.difference)} [{_points(low)}, {_points(high)}] pts · "
        f"{look.verdict} ({state})"
    )


def summary_lines(record: AdaptiveRecord) -> list[str]:
    """The summary's adaptive section: per scenario decision, the saving, compare's view."""
    lines = [
        f"adaptive against {printable(record.baseline_run_id)} · {len(record.looks)} planned "
        f"looks ({', '.join(str(n) for n in record.looks)}) · alpha {record.alpha:g} · "
        f"margin {record.margin:g}"
    ]
    for name, scenario in record.scenarios.items():
        flag = " · definition changed since the baseline" if scenario.changed else ""
        lines.append(
            f"  {printable(name)}: {scenario.decision} after {scenario.trials} trials "
            f"({scenario.stopped}){flag}"
        )
    lines.append(
        f"trials used {record.trials_used} · a fixed-count run reaching the same decisions: "
        f"{record.fixed_trials} (--trials {record.fixed_per_scenario}) · saving {record.saving}"
    )
    if record.max_cost is not None:
        lines.append(f"cost ${record.cost:.4f} of --max-cost ${record.max_cost:g}")
    differing = [
        f"{printable(name)} (compare: {s.compare_verdict})"
        for name, s in record.scenarios.items()
        if s.decision != "new" and s.decision != s.compare_verdict
    ]
    if differing:
        lines.append(
            "compare on the final counts differs on "
            + ", ".join(differing)
            + ": it judges them as one look; the decisions above allow for every look "
            "(docs/statistics.md, 'compare after an adaptive run')"
        )
    else:
        lines.append("compare on the final counts agrees with every decision")
    return lines
