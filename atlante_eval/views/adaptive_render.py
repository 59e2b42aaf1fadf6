"""Terminal lines of an adaptive run: each look's estimate, and the decisions and saving.

Scenario names come from documents and are escaped by the caller's printers
(:func:`atlante_eval._util.terminal.printable`).
"""

from __future__ import annotations

from .._util.terminal import printable
from ..report import AdaptiveOverall, AdaptiveRecord, AdaptiveStop, ScenarioLooked

__all__ = ["look_line", "overall_line", "stop_text", "summary_lines"]

_METHOD = {
    "exact-pocock": "exact group-sequential design",
    "exact-pocock-arms": "exact group-sequential design, control and arms growing together",
    "bonferroni-looks": "Bonferroni over the looks",
}


def _points(value: float) -> str:
    """A difference in percentage points with its sign: ``-52.1``."""
    return f"{value * 100:+.1f}"


def stop_text(stopped: AdaptiveStop, max_trials: int | None) -> str:
    """Why a scenario stopped, in words: ``undecidable within 50 trials``, ``max-trials``."""
    if stopped == "undecidable":
        return f"undecidable within {max_trials} trials" if max_trials else "undecidable"
    return stopped


def look_line(event: ScenarioLooked) -> str:
    """``flip: look at 6 trials · 0% vs base 100% · -100.0 [-100.0, -48.3] pts · regressed``."""
    look = event.look
    rate = look.passed / look.graded if look.graded else 0.0
    against = "base" if event.control is None else f"control {printable(event.control)}"
    low, high = look.interval
    state = (
        "continues"
        if event.stopped is None
        else "decided"
        if event.stopped == "decided"
        else f"stops: {stop_text(event.stopped, event.max_trials)}"
    )
    return (
        f"{printable(event.scenario)}: look at {look.trials} trials · "
        f"{round(rate * 100)}% vs {against} {round(event.base_rate * 100)}% · "
        f"{_points(look.difference)} [{_points(low)}, {_points(high)}] pts · "
        f"{look.verdict} ({state})"
    )


def overall_line(overall: AdaptiveOverall) -> str:
    """The stratified overall row, as ``compare`` prints it."""
    low, high = overall.interval
    return (
        f"overall (stratified over {overall.scenarios} scenarios): "
        f"{round(overall.base_rate * 100)}% -> {round(overall.head_rate * 100)}% · "
        f"{_points(overall.difference)} [{_points(low)}, {_points(high)}] pts · "
        f"p adj {overall.adjusted_p:.3g} · {overall.verdict}"
    )


def summary_lines(record: AdaptiveRecord) -> list[str]:
    """The summary's adaptive section: per scenario decision, overall, saving, compare's view."""
    against = (
        f"each arm against the control arm {printable(record.control)}"
        if record.control is not None
        else f"against {printable(record.baseline_run_id)}"
    )
    lines = [
        f"adaptive {against} · "
        f"{_METHOD.get(record.method, record.method)} · {len(record.looks)} planned "
        f"looks ({', '.join(str(n) for n in record.looks)}) · alpha {record.alpha:g} · "
        f"margin {record.margin:g}"
    ]
    for name, scenario in record.scenarios.items():
        flag = " · definition changed since the baseline" if scenario.changed else ""
        lines.append(
            f"  {printable(name)}: {scenario.decision} after {scenario.trials} trials "
            f"({stop_text(scenario.stopped, record.max_trials)}){flag}"
        )
    if record.overall is not None:
        lines.append(overall_line(record.overall))
    saving = (
        f"saving {record.saving}"
        if record.saving >= 0
        else f"{-record.saving} more than that run (no saving)"
    )
    lines.append(
        f"trials used {record.trials_used} · a fixed-count run reaching the same decisions: "
        f"{record.fixed_trials} (--trials {record.fixed_per_scenario}) · {saving}"
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
