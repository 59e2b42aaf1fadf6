"""Compare two run reports: did HEAD's harness pass more or less often than BASE's?

Per scenario common to both reports, and overall (stratified by scenario: each
scenario compared only with itself, never raw counts pooled), the comparison holds
both pass rates with Wilson intervals, the difference HEAD - BASE with a Newcombe
interval, a two-sided Fisher exact p-value, the p-value adjusted for multiple
comparisons, a verdict, and for inconclusive results the trials per side that
would likely settle it. The denominator is the
*graded* trials: executed trials minus infra-errors (skipped-budget trials never ran).
See docs/statistics.md for every formula and rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from .._util.paths import display_path
from ..choices import DEFAULT_ALPHA, DEFAULT_MARGIN, Adjust, FailOn
from ..diagnostics import Diagnostic, warning
from ..stats import (
    ComparisonVerdict,
    ProportionComparison,
    benjamini_hochberg_adjust,
    compare_proportions,
    holm_adjust,
    verdict,
    wilson_interval,
)
from ..stats.planning import PLANNING_POWER, planned_trials
from ..stats.stratified import Stratum, stratified_comparison
from .behaviour import BehaviourDeltas
from .compare_notes import (
    WARNING_NEXT,
    CompareWarning,
    adaptive_note,
    condition_warnings,
    power_note,
)
from .consistency import check_consistent
from .loading import load_report, report_path
from .models import OutputModel, RunReport, ScenarioResult
from .regrade_delta import RegradeDelta, regrade_delta
from .results import statistics_of

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "DEFAULT_ALPHA",
    "DEFAULT_MARGIN",
    "OVERALL",
    "PLANNING_POWER",
    "Adjust",
    "CompareResult",
    "CompareSettings",
    "CompareWarning",
    "Comparison",
    "FailOn",
    "RunInfo",
    "Side",
    "compare_report_files",
    "compare_reports",
    "decided_by",
    "gate_fails",
    "gate_rows",
]

#: Version of the ``compare --json`` document shape.
COMPARE_FORMAT_VERSION = 1
#: How the overall row is named where rows are listed (never a valid scenario name).
OVERALL = "(overall)"


class Side(OutputModel):
    """One report's trials of one scenario (or summed over the common scenarios)."""

    passed: int
    """Trials with verdict ``pass``."""
    graded: int
    """Executed trials minus infra-errors: the pass-rate denominator."""
    executed: int
    """Trials that ran (all but ``skipped-budget``)."""
    infra_errors: int
    """Trials with verdict ``infra-error`` (not counted in ``graded``)."""
    skipped: int
    """Trials with verdict ``skipped-budget`` (never ran)."""
    pass_rate: float
    """``passed / graded`` (0 when nothing was graded); in the overall row, the scenarios'
    rates weighted as the overall difference weighs them (not ``passed / graded``)."""
    interval: tuple[float, float]
    """Wilson score interval of ``passRate`` at the run's confidence (overall: MOVER)."""


class Comparison(OutputModel):
    """BASE against HEAD for one scenario, or overall."""

    base: Side
    """BASE's trials."""
    head: Side
    """HEAD's trials."""
    difference: float
    """``head.passRate - base.passRate``: positive means HEAD passes more often."""
    difference_interval: tuple[float, float]
    """Newcombe hybrid score interval of the difference at the run's confidence."""
    p_value: float
    """Two-sided Fisher exact p-value."""
    adjusted_p: float
    """``pValue`` after multiple-comparison adjustment (see ``settings.adjust``)."""
    verdict: ComparisonVerdict
    """``improved``, ``regressed``, ``unchanged`` or ``inconclusive``."""
    trials_needed: int | None
    """For ``inconclusive``: graded trials per side at which ``compare`` decides with 80%
    power at the observed rates; null when decided, without graded trials on a side, or
    when no count up to 200 per side would (see docs/statistics.md)."""
    strata: int | None = None
    """Overall row only: the scenarios it is stratified over (graded on both sides)."""


class RunInfo(OutputModel):
    """What identifies one side's run."""

    path: str
    """The report file that was read."""
    run_id: str
    """The report's run id."""
    host: str
    """Host name."""
    host_version: str | None
    """Host CLI version, when recorded."""
    model: str
    """Model."""
    manifest_digest: str | None
    """Native-output manifest digest: the harness revision, when recorded."""
    started_at: str | None
    """UTC start time, when recorded."""
    trials: int
    """Trials per scenario the run was configured with."""


class CompareSettings(OutputModel):
    """The decision rule's parameters."""

    alpha: float
    """Significance level for the adjusted p-values."""
    margin: float
    """Largest change (0-1 scale) that counts as unchanged."""
    confidence: float
    """Confidence level of every interval: ``1 - alpha``."""
    adjust: Adjust
    """Multiple-comparison adjustment: ``holm`` (FWER), ``bh`` (FDR) or ``none``."""
    family_size: int
    """Number of tests adjusted together (common scenarios with graded trials, plus overall)."""
    power: float
    """Power assumed for ``trialsNeeded``."""
    denominator: Literal["graded"]
    """Always ``graded``: executed trials minus infra-errors."""


class CompareResult(OutputModel):
    """The whole comparison: the ``compare --json`` document (see docs/cli.md)."""

    format_version: int
    """Version of this document's shape."""
    base: RunInfo
    """The BASE run."""
    head: RunInfo
    """The HEAD run."""
    harness_changed: bool | None
    """Whether the manifest digests differ (null when either is not recorded)."""
    settings: CompareSettings
    """The decision rule's parameters."""
    scenarios: dict[str, Comparison]
    """Per common scenario, by name (sorted)."""
    overall: Comparison | None
    """Stratified over the common scenarios (null when there are none)."""
    added: dict[str, Side]
    """Scenarios only in HEAD."""
    removed: dict[str, Side]
    """Scenarios only in BASE."""
    counts: dict[str, int]
    """Scenarios per verdict, plus ``added`` and ``removed``."""
    warnings: list[CompareWarning]
    """Differences in conditions between the runs; the comparison was still made."""
    decided_by: dict[str, list[str]]
    """The rows that found a change, for ``regressed`` and ``improved``: scenario names, and
    ``(overall)`` for the overall row. The headline and ``--fail-on`` read this."""
    behaviour: BehaviourDeltas | None = None
    """Why scenarios changed: behaviour deltas from both runs' transcripts (the CLI adds
    them with :func:`atlante_eval.deltas.behaviour_deltas`; null when not computed)."""
    regrade: RegradeDelta | None = None
    """When one report regraded the other: the trials whose verdict changed, and why."""

    def to_json(self) -> str:
        """Serialise as the stable ``--json`` document (2-space indent, trailing newline).

        ``regrade`` appears only when one report regraded the other.
        """
        unused = {"regrade"} if self.regrade is None else None
        return self.model_dump_json(by_alias=True, indent=2, exclude=unused) + "\n"

    def diagnostics(self) -> list[Diagnostic]:
        """The warnings as diagnostics for the terminal."""
        return [warning(w.code, w.message, next=WARNING_NEXT.get(w.code)) for w in self.warnings]


def compare_reports(
    base: RunReport,
    head: RunReport,
    *,
    base_path: str = "",
    head_path: str = "",
    alpha: float = DEFAULT_ALPHA,
    margin: float = DEFAULT_MARGIN,
    adjust: Adjust = "holm",
) -> CompareResult:
    """Compare BASE with HEAD scenario by scenario and overall.

    Args:
        base: The earlier (accepted) report.
        head: The report of the revision under test.
        base_path: Where BASE was read from (recorded in the result).
        head_path: Where HEAD was read from.
        alpha: Significance level (0 < alpha < 1); intervals are at ``1 - alpha``.
        margin: Largest change counted as unchanged (0 < margin <= 1).
        adjust: Multiple-comparison adjustment across the family of tests.

    Raises:
        ValueError: ``alpha`` or ``margin`` out of range.
        DiagnosticError: ``report-unreadable`` (exit 2) for a report that contradicts
            its own trials (every statistic is recomputed from the trials).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"margin must be in (0, 1], got {margin}")
    check_consistent(base, base_path or "BASE")
    check_consistent(head, head_path or "HEAD")
    confidence = 1.0 - alpha
    common = sorted(set(base.scenarios) & set(head.scenarios))
    pairs, raw, strata = _pairs(base, head, common, confidence)
    family, adjusted = _family(pairs, raw, common, adjust)
    change_alpha = alpha / len(family) if adjust != "none" and len(family) > 1 else alpha
    decided = {
        key: _decide(
            *pairs[key],
            raw[key],
            adjusted_p=adjusted.get(key, raw[key].p_value),
            alpha=alpha,
            margin=margin,
            change_alpha=change_alpha,
            plan=key is not None or len(common) == 1,
        )
        for key in pairs
    }
    overall = decided.pop(None, None)
    if overall is not None:
        overall = overall.model_copy(update={"strata": strata})
    scenarios = {name: comparison for name, comparison in decided.items() if name is not None}
    added = sorted(set(head.scenarios) - set(base.scenarios))
    removed = sorted(set(base.scenarios) - set(head.scenarios))
    digests = (base.meta.manifest_digest, head.meta.manifest_digest)
    delta = regrade_delta(base, head)
    return CompareResult(
        format_version=COMPARE_FORMAT_VERSION,
        base=_run_info(base, base_path),
        head=_run_info(head, head_path),
        harness_changed=digests[0] != digests[1] if all(digests) else None,
        settings=CompareSettings(
            alpha=alpha,
            margin=margin,
            confidence=confidence,
            adjust=adjust,
            family_size=len(family),
            power=PLANNING_POWER,
            denominator="graded",
        ),
        scenarios=scenarios,
        overall=overall,
        added={name: _side(head.scenarios[name], confidence) for name in added},
        removed={name: _side(base.scenarios[name], confidence) for name in removed},
        counts=_counts(scenarios, added=len(added), removed=len(removed)),
        warnings=_regrade_expected(
            condition_warnings(base, head, common)
            + adaptive_note(base, head, scenarios)
            + power_note(scenarios, alpha=alpha, margin=margin, family=max(1, len(family))),
            delta,
        ),
        decided_by=decided_by(scenarios, overall),
        regrade=delta,
    )


#: A comparison's key: a scenario's name, or ``None`` for the stratified overall comparison.
_Key = str | None


def _pairs(
    base: RunReport, head: RunReport, common: Sequence[str], confidence: float
) -> tuple[dict[_Key, tuple[Side, Side]], dict[_Key, ProportionComparison], int]:
    """Each common scenario's sides and comparison, and the overall ones (key ``None``).

    Also returns how many scenarios the overall row is stratified over.
    """
    pairs: dict[_Key, tuple[Side, Side]] = {
        name: (_side(base.scenarios[name], confidence), _side(head.scenarios[name], confidence))
        for name in common
    }
    raw: dict[_Key, ProportionComparison] = {
        key: _raw(b, h, confidence) for key, (b, h) in pairs.items()
    }
    strata = 0
    if common:
        pairs[None], raw[None], strata = _overall(pairs, confidence)
    return pairs, raw, strata


def _overall(
    pairs: Mapping[_Key, tuple[Side, Side]], confidence: float
) -> tuple[tuple[Side, Side], ProportionComparison, int]:
    """The overall sides and comparison, stratified by scenario (one scenario: its own)."""
    sides = list(pairs.values())
    found = stratified_comparison(
        [Stratum(b.passed, b.graded, h.passed, h.graded) for b, h in sides],
        confidence=confidence,
    )
    if len(sides) == 1:
        only = sides[0]
        return only, _raw(*only, confidence), found.strata
    summed = (_sum([b for b, _ in sides], confidence), _sum([h for _, h in sides], confidence))
    base = summed[0].model_copy(update={"pass_rate": found.rate1, "interval": found.interval1})
    head = summed[1].model_copy(update={"pass_rate": found.rate2, "interval": found.interval2})
    comparison = ProportionComparison(
        rate1=found.rate1,
        rate2=found.rate2,
        difference=found.difference,
        difference_interval=found.difference_interval,
        p_value=found.p_value,
        trials_needed=None,
    )
    return (base, head), comparison, found.strata


def decided_by(
    scenarios: Mapping[str, Comparison], overall: Comparison | None
) -> dict[str, list[str]]:
    """The rows that found each change: scenario names, and :data:`OVERALL`."""
    rows = list(scenarios.items()) + ([(OVERALL, overall)] if overall is not None else [])
    return {
        change: [name for name, comparison in rows if comparison.verdict == change]
        for change in ("regressed", "improved")
    }


def _family(
    pairs: Mapping[_Key, tuple[Side, Side]],
    raw: Mapping[_Key, ProportionComparison],
    common: Sequence[str],
    adjust: Adjust,
) -> tuple[list[_Key], dict[_Key, float]]:
    """The tests adjusted together, and their adjusted p-values.

    The family is each common scenario with graded trials on both sides, and the
    overall test when it is not just the one scenario's (then the overall
    takes that scenario's adjusted p-value).
    """
    family = [key for key, (b, h) in pairs.items() if b.graded and h.graded]
    if len(common) < 2 and None in family:
        family.remove(None)
    adjusted = dict(zip(family, _adjust([raw[k].p_value for k in family], adjust), strict=True))
    if len(common) == 1 and common[0] in adjusted:
        adjusted[None] = adjusted[common[0]]
    return family, adjusted


def _counts(scenarios: Mapping[str, Comparison], *, added: int, removed: int) -> dict[str, int]:
    """Scenarios per verdict, plus ``added`` and ``removed``."""
    counts = dict.fromkeys(("improved", "regressed", "unchanged", "inconclusive"), 0)
    for comparison in scenarios.values():
        counts[comparison.verdict] += 1
    counts["added"] = added
    counts["removed"] = removed
    return counts


def compare_report_files(
    base: Path | str,
    head: Path | str,
    *,
    alpha: float = DEFAULT_ALPHA,
    margin: float = DEFAULT_MARGIN,
    adjust: Adjust = "holm",
) -> CompareResult:
    """Read two reports (``report.json`` files or run directories) and compare them.

    What ``atlante-eval compare BASE HEAD`` computes; the result records each
    report's file as shown on the terminal.

    Raises:
        DiagnosticError: ``report-unreadable`` (exit 2) for a report that cannot be read.
        ValueError: ``alpha`` or ``margin`` out of range.
    """
    base_file, head_file = report_path(base), report_path(head)
    return compare_reports(
        load_report(base_file),
        load_report(head_file),
        base_path=display_path(base_file),
        head_path=display_path(head_file),
        alpha=alpha,
        margin=margin,
        adjust=adjust,
    )


def _decide(
    base: Side,
    head: Side,
    comparison: ProportionComparison,
    *,
    adjusted_p: float,
    alpha: float,
    margin: float,
    change_alpha: float,
    plan: bool,
) -> Comparison:
    outcome = verdict(comparison, adjusted_p=adjusted_p, alpha=alpha, margin=margin)
    needed = (
        _trials_needed(
            comparison, base, head, alpha=alpha, change_alpha=change_alpha, margin=margin
        )
        if outcome == "inconclusive" and plan
        else None
    )
    return Comparison(
        base=base,
        head=head,
        difference=comparison.difference,
        difference_interval=comparison.difference_interval,
        p_value=comparison.p_value,
        adjusted_p=adjusted_p,
        verdict=outcome,
        trials_needed=needed,
    )


def gate_rows(result: CompareResult, fail_on: FailOn | None) -> list[str]:
    """The rows that trip ``--fail-on``: regressed ones (or, for ``change``, any change).

    Scenario names, and :data:`OVERALL` for the overall row; empty when the gate passes.
    """
    if fail_on is None:
        return []
    changes = ("regressed",) if fail_on == "regressed" else ("regressed", "improved")
    return [row for change in changes for row in result.decided_by.get(change, [])]


def gate_fails(result: CompareResult, fail_on: FailOn | None) -> bool:
    """Whether ``--fail-on`` trips: a regressed scenario or overall (or any change)."""
    return bool(gate_rows(result, fail_on))


def _side(result: ScenarioResult, confidence: float) -> Side:
    stats = statistics_of(result)
    return _make_side(
        passed=stats.passed,
        graded=stats.graded,
        executed=stats.executed,
        infra_errors=stats.infra_errors,
        skipped=stats.skipped,
        confidence=confidence,
    )


def _sum(sides: Sequence[Side], confidence: float) -> Side:
    return _make_side(
        passed=sum(s.passed for s in sides),
        graded=sum(s.graded for s in sides),
        executed=sum(s.executed for s in sides),
        infra_errors=sum(s.infra_errors for s in sides),
        skipped=sum(s.skipped for s in sides),
        confidence=confidence,
    )


def _make_side(
    *, passed: int, graded: int, executed: int, infra_errors: int, skipped: int, confidence: float
) -> Side:
    return Side(
        passed=passed,
        graded=graded,
        executed=executed,
        infra_errors=infra_errors,
        skipped=skipped,
        pass_rate=passed / graded if graded else 0.0,
        interval=wilson_interval(passed, graded, confidence=confidence),
    )


def _raw(base: Side, head: Side, confidence: float) -> ProportionComparison:
    return compare_proportions(
        base.passed, base.graded, head.passed, head.graded, confidence=confidence
    )


def _adjust(pvalues: list[float], adjust: Adjust) -> list[float]:
    if adjust == "holm":
        return holm_adjust(pvalues)
    if adjust == "bh":
        return benjamini_hochberg_adjust(pvalues)
    return list(pvalues)


def _trials_needed(
    comparison: ProportionComparison,
    base: Side,
    head: Side,
    *,
    alpha: float,
    change_alpha: float,
    margin: float,
) -> int | None:
    """Graded trials per side that would likely turn an inconclusive result into a verdict.

    An observed change of at least ``margin`` is planned as a change to confirm: the
    trials at which ``compare`` decides it (at ``change_alpha``, alpha shared out over
    the family) with :data:`PLANNING_POWER`. A smaller one is planned as a change to
    rule out: the trials at which it says ``unchanged`` with that power. Both are
    powers of the rule itself at the observed rates (:mod:`atlante_eval.stats.planning`),
    searched from one more than the trials already graded. None when a side has none.
    """
    if not base.graded or not head.graded:
        return None
    return planned_trials(
        comparison,
        alpha=alpha,
        change_alpha=change_alpha,
        margin=margin,
        change=abs(comparison.difference) >= margin - 1e-9,  # 9/10 - 10/10 is a 10-point change
        start=max(base.graded, head.graded) + 1,
    )


def _run_info(report: RunReport, path: str) -> RunInfo:
    meta = report.meta
    return RunInfo(
        path=path,
        run_id=report.run_id,
        host=meta.host,
        host_version=meta.host_version,
        model=meta.model,
        manifest_digest=meta.manifest_digest,
        started_at=meta.started_at,
        trials=meta.config.trials,
    )


def _regrade_expected(
    found: list[CompareWarning], delta: RegradeDelta | None
) -> list[CompareWarning]:
    """A regrade changes its scenarios' checks on purpose: no warning says they differ."""
    if delta is None:
        return found
    return [w for w in found if w.code != "compare-scenario-changed"]
