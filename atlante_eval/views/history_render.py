"""Plain-text views of the history commands (``history list``, ``show``, ``flaky``, …).

Every name in the store came from a project, a host or an agent: it is printed
through :func:`atlante_eval._util.terminal.printable`, so no control sequence acts.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._util.terminal import printable
from ..history.ingest import IngestResult
from ..history.models import (
    Blessing,
    FlakyScenario,
    HistoryRun,
    Quarantine,
    ScenarioHistory,
    WindowStats,
)

__all__ = [
    "render_blessings",
    "render_flaky",
    "render_ingested",
    "render_quarantines",
    "render_runs",
    "render_scenario_history",
]

_OUTCOME_MARK = {"pass": "P", "fail": "F", "flaky": "~", "none": "."}


def _rate(window: WindowStats) -> str:
    if window.pass_rate is None or window.interval is None:
        return "no graded trials"
    low, high = window.interval
    return (
        f"{window.passed}/{window.graded} {round(100 * window.pass_rate)}% "
        f"[{round(100 * low)}-{round(100 * high)}%]"
    )


def _flags(run: HistoryRun) -> str:
    flags = []
    if run.shard:
        flags.append(f"shard {run.shard}")
    if run.interrupted:
        flags.append("partial")
    if run.resumed_from:
        flags.append("resumed")
    if run.adaptive:
        flags.append("adaptive")
    flags.extend(f"blessed:{name}" for name in run.blessed)
    return " ".join(flags)


def render_runs(runs: Sequence[HistoryRun]) -> str:
    """One line per run, newest first."""
    if not runs:
        return "no runs recorded"
    lines = []
    for run in runs:
        when = (run.started_at or "")[:19].replace("T", " ")
        harness = (run.harness or "")[:12]
        lines.append(
            printable(
                f"{run.run_id}  {when}  {run.host} {run.host_version or ''} · {run.model}"
                + (f" · arm {run.arm}" if run.arm else "")
                + f" · harness {harness or '-'} · {run.scenarios} scenarios · "
                f"{run.passed}/{run.trials} trials passed"
                + (f" · ${run.cost:.4f}" if run.cost else "")
                + (f"  {_flags(run)}" if _flags(run) else "")
            )
        )
    return "\n".join(lines)


def render_scenario_history(history: ScenarioHistory) -> str:
    """A scenario over its last runs: one line per run, then the window's summary."""
    lines = [printable(f"{history.scenario}: {len(history.nights)} runs")]
    for night in history.nights:
        when = (night.started_at or "")[:10]
        rate = _rate(
            WindowStats(
                passed=night.passed,
                graded=night.graded,
                pass_rate=night.pass_rate,
                interval=night.interval,
            )
        )
        marks = [
            m
            for m, on in (
                ("partial", night.partial),
                ("resumed", night.resumed),
                ("adaptive", night.adaptive),
            )
            if on
        ]
        lines.append(
            printable(f"  {night.run_id}  {when}  {night.outcome:<5}  {rate}")
            + (f"  ({', '.join(marks)})" if marks else "")
        )
    flip = f"{history.flip_rate:.2f}" if history.flip_rate is not None else "-"
    lines += [
        f"pass rate over these runs: {_rate(history.window)}",
        f"flips {history.flips} (rate {flip}) · runs with mixed trials {history.flaky_runs}",
        printable(
            f"first failing run: {history.first_failing or '-'} · last passing run: "
            f"{history.last_passing or '-'}"
        ),
    ]
    if history.quarantine is not None:
        held = history.quarantine
        lines.append(
            printable(
                f"quarantined by {held.added_by}: {held.reason}"
                + (f" (owner {held.owner})" if held.owner else "")
                + (f" until {held.until}" if held.until else "")
            )
        )
    return "\n".join(lines)


def render_flaky(found: Sequence[FlakyScenario]) -> str:
    """Flaky scenarios, most flips first, with their outcome strip (oldest first)."""
    if not found:
        return "no scenario flipped in the runs considered"
    lines = ["SCENARIO  FLIPS  RATE  MIXED  PASS RATE  OUTCOMES (P pass, F fail, ~ mixed)"]
    for item in found:
        strip = "".join(_OUTCOME_MARK[o] for o in item.outcomes)
        lines.append(
            printable(
                f"{item.scenario}  {item.flips}/{item.runs - 1}  {item.flip_rate:.2f}  "
                f"{item.flaky_runs}  {_rate(item.window)}  {strip}"
                + ("  quarantined" if item.quarantined else "")
            )
        )
    return "\n".join(lines)


def render_quarantines(held: Sequence[Quarantine]) -> str:
    """The quarantine list."""
    if not held:
        return "no scenario is quarantined"
    lines = []
    for item in held:
        state = "" if item.active else ("  (removed)" if item.removed_at else "  (expired)")
        lines.append(
            printable(
                f"{item.scenario}: {item.reason}"
                + (f" · owner {item.owner}" if item.owner else "")
                + (f" · until {item.until}" if item.until else "")
                + f" · by {item.added_by} {item.added_at[:10]}{state}"
            )
        )
    return "\n".join(lines)


def render_blessings(found: Sequence[Blessing]) -> str:
    """Blessed baselines."""
    if not found:
        return "no baseline is blessed"
    return "\n".join(
        printable(
            f"{b.name}: run {b.run_id} · {b.host} · {b.model}"
            + (f" · arm {b.arm}" if b.arm else "")
            + f" · blessed by {b.blessed_by} {b.blessed_at[:19].replace('T', ' ')}"
            + (f": {b.reason}" if b.reason else "")
        )
        for b in found
    )


def render_ingested(results: Sequence[IngestResult]) -> str:
    """One line per recorded report."""
    lines = []
    for result in results:
        if result.status == "unchanged":
            lines.append(f"already recorded: {result.run_id}")
        elif result.absorbed:
            lines.append(
                f"recorded {result.run_id} ({result.trials} trials), superseding "
                + ", ".join(result.absorbed)
            )
        else:
            lines.append(f"recorded {result.run_id} ({result.trials} trials)")
    return printable("\n".join(lines), multiline=True)
