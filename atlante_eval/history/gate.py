"""``--fail-on`` with a history: quarantined and unstable scenarios do not trip the gate.

The comparison shown is unchanged (a quarantined scenario is still reported); the
gate judges the comparison of the same two reports without the exempted
scenarios (so the overall row does not carry them either), and every
exemption is said as a warning (``gate-quarantined``, ``gate-unstable``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ..choices import FailOn
from ..diagnostics import Diagnostic, warning
from ..report import OutputModel, RunReport
from ..report.compare import CompareResult, compare_reports, gate_rows
from .models import Quarantine, ScenarioHistory

__all__ = ["GateDecision", "GateExemption", "decide_gate", "unstable_scenarios"]


class GateExemption(OutputModel):
    """A scenario the gate ignored, and why."""

    scenario: str
    """Scenario name."""
    reason: Literal["quarantined", "unstable"]
    """``quarantined`` (history quarantine) or ``unstable`` (``--gate-stable-nights``)."""
    detail: str
    """The quarantine's reason, or what made it unstable."""
    verdict: str | None
    """Its verdict in the comparison (null when only in one report)."""


class GateDecision(OutputModel):
    """What ``--fail-on`` decided (the ``gate`` key of ``compare --json``)."""

    fail_on: FailOn
    """The gate asked for."""
    fails: bool
    """Whether it trips (exit 1)."""
    ignored: list[GateExemption]
    """Scenarios left out of the gate."""
    decided_by: list[str]
    """The rows that trip it: scenario names, and ``(overall)`` for the overall row."""


def unstable_scenarios(
    histories: Mapping[str, ScenarioHistory | None], nights: int
) -> dict[str, str]:
    """Scenarios not stable over their last ``nights`` runs, with what made them so.

    Stable: at least ``nights`` graded runs, all of one outcome (every trial passed,
    or none did).
    """
    unstable: dict[str, str] = {}
    for name, history in histories.items():
        graded = [n for n in history.nights if n.outcome != "none"] if history else []
        if len(graded) < nights:
            unstable[name] = f"{len(graded)} graded runs recorded, fewer than {nights}"
            continue
        outcomes = {n.outcome for n in graded[-nights:]}
        if len(outcomes) > 1 or "flaky" in outcomes:
            unstable[name] = f"outcomes over the last {nights} runs: " + ", ".join(
                n.outcome for n in graded[-nights:]
            )
    return unstable


def decide_gate(
    base: RunReport,
    head: RunReport,
    result: CompareResult,
    fail_on: FailOn,
    *,
    quarantined: Mapping[str, Quarantine],
    unstable: Mapping[str, str],
) -> tuple[GateDecision, list[Diagnostic]]:
    """Decide ``--fail-on`` without the quarantined and unstable scenarios."""
    verdicts: dict[str, str | None] = {n: c.verdict for n, c in result.scenarios.items()}
    present = set(base.scenarios) | set(head.scenarios)
    ignored: list[GateExemption] = []
    for name in sorted(present):
        held = quarantined.get(name)
        if held is not None:
            detail = held.reason + (f" (owner {held.owner})" if held.owner else "")
            detail += f", until {held.until}" if held.until else ""
            ignored.append(
                GateExemption(
                    scenario=name, reason="quarantined", detail=detail, verdict=verdicts.get(name)
                )
            )
        elif name in unstable:
            ignored.append(
                GateExemption(
                    scenario=name,
                    reason="unstable",
                    detail=unstable[name],
                    verdict=verdicts.get(name),
                )
            )
    skip = {e.scenario for e in ignored}
    judged = result
    if skip:
        judged = compare_reports(
            _without(base, skip),
            _without(head, skip),
            alpha=result.settings.alpha,
            margin=result.settings.margin,
            adjust=result.settings.adjust,
        )
    rows = gate_rows(judged, fail_on)
    decision = GateDecision(fail_on=fail_on, fails=bool(rows), ignored=ignored, decided_by=rows)
    return decision, [_note(e) for e in ignored]


def _without(report: RunReport, names: set[str]) -> RunReport:
    """``report`` without the scenarios ``names``; its totals, which counted them, dropped
    (a report whose totals disagree with its trials is refused as forged)."""
    kept = {n: r for n, r in report.scenarios.items() if n not in names}
    meta = report.meta.model_copy(update={"totals": None})
    return report.model_copy(update={"scenarios": kept, "meta": meta})


def _note(exemption: GateExemption) -> Diagnostic:
    verdict = f" ({exemption.verdict})" if exemption.verdict else ""
    if exemption.reason == "quarantined":
        return warning(
            "gate-quarantined",
            f"the gate ignores quarantined scenario {exemption.scenario}{verdict}: "
            f"{exemption.detail}",
            next="`atlante-eval history quarantine remove NAME` once it is fixed",
        )
    return warning(
        "gate-unstable",
        f"the gate ignores scenario {exemption.scenario}{verdict}, not stable over the "
        f"--gate-stable-nights window: {exemption.detail}",
        next="see `atlante-eval history show NAME`",
    )
