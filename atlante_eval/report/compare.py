"""Compare two run reports: did HEAD's harness pass more or less often than BASE's?

Per scenario common to both reports, and overall (graded trials pooled across those
scenarios), the comparison holds both pass rates with Wilson intervals, the
difference HEAD - BASE with a Newcombe interval, a two-sided Fisher exact p-value,
the p-value adjusted for multiple comparisons, a verdict, and for inconclusive
results the trials per side that would likely settle it. The denominator is the
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
from .behaviour import BehaviourDeltas
from .loading import load_report, report_path
from .models import OutputModel, RunReport, ScenarioResult
from .results import statistics_of

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "DEFAULT_ALPHA",
    "DEFAULT_MARGIN",
    "PLANNING_POWER",
    "Adjust",
    "CompareResult",
    "CompareSettings",
    "Comparison",
    "FailOn",
    "RunInfo",
    "Side",
    "compare_report_files",
    "compare_reports",
    "gate_fails",
]

#: Version of the ``compare --json`` document shape.
COMPARE_FORMAT_VERSION = 1


class Side(OutputModel):
    """One report's trials of one scenario (or pooled over the common scenarios)."""

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
    """``passed / graded`` (0 when nothing was graded)."""
    interval: tuple[float, float]
    """Wilson score interval of ``passRate`` at the run's confidence."""


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
    """For ``inconclusive``: graded trials per side that would likely decide, else null."""


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


class CompareWarning(OutputModel):
    """A difference between the two runs that weakens the comparison."""

    code: str
    """Stable slug, e.g. ``compare-model-differs``."""
    message: str
    """What differs."""
    base: str | None
    """BASE's value, when it is one value."""
    head: str | None
    """HEAD's value, when it is one value."""


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
    """Graded trials pooled over the common scenarios (null when there are none)."""
    added: dict[str, Side]
    """Scenarios only in HEAD."""
    removed: dict[str, Side]
    """Scenarios only in BASE."""
    counts: dict[str, int]
    """Scenarios per verdict, plus ``added`` and ``removed``."""
    warnings: list[CompareWarning]
    """Differences in conditions between the runs; the comparison was still made."""
    behaviour: BehaviourDeltas | None = None
    """Why scenarios changed: behaviour deltas from both runs' transcripts (the CLI adds
    them with :func:`atlante_eval.deltas.behaviour_deltas`; null when not computed)."""

    def to_json(self) -> str:
        """Serialise as the stable ``--json`` document (2-space indent, trailing newline)."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    def diagnostics(self) -> list[Diagnostic]:
        """The warnings as diagnostics for the terminal."""
        return [warning(w.code, w.message, next=_WARNING_NEXT.get(w.code)) for w in self.warnings]


_WARNING_NEXT = {
    "compare-host-differs": "compare runs of the same host and version to isolate the harness",
    "compare-model-differs": "compare runs of the same model to isolate the harness",
    "compare-budget-differs": "compare runs with the same eval.budget to isolate the harness",
    "compare-scenario-changed": "a changed scenario measures something else; rerun BASE on it",
    "compare-partial-report": "rerun (or resume) the interrupted run before trusting the result",
    "compare-shard-report": "merge the shards with `atlante-eval merge` and compare the result",
    "compare-adaptive-differs": "trust the adaptive run's decisions (report.json adaptive); "
    "see docs/statistics.md, 'compare after an adaptive run'",
}


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
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"margin must be in (0, 1], got {margin}")
    confidence = 1.0 - alpha
    common = sorted(set(base.scenarios) & set(head.scenarios))
    pairs = _pairs(base, head, common, confidence)
    raw = {key: _raw(b, h, confidence) for key, (b, h) in pairs.items()}
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
        )
        for key in pairs
    }
    overall = decided.pop(None, None)
    scenarios = {name: comparison for name, comparison in decided.items() if name is not None}
    added = sorted(set(head.scenarios) - set(base.scenarios))
    removed = sorted(set(base.scenarios) - set(head.scenarios))
    digests = (base.meta.manifest_digest, head.meta.manifest_digest)
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
        warnings=_warnings(base, head, common) + _adaptive_note(base, head, scenarios),
    )


#: A comparison's key: a scenario's name, or ``None`` for the pooled overall comparison.
_Key = str | None


def _pairs(
    base: RunReport, head: RunReport, common: Sequence[str], confidence: float
) -> dict[_Key, tuple[Side, Side]]:
    """BASE's and HEAD's side of each common scenario, and pooled over them (key ``None``)."""
    pairs: dict[_Key, tuple[Side, Side]] = {
        name: (_side(base.scenarios[name], confidence), _side(head.scenarios[name], confidence))
        for name in common
    }
    if common:
        pairs[None] = (
            _pool([b for b, _ in pairs.values()], confidence),
            _pool([h for _, h in pairs.values()], confidence),
        )
    return pairs


def _family(
    pairs: Mapping[_Key, tuple[Side, Side]],
    raw: Mapping[_Key, ProportionComparison],
    common: Sequence[str],
    adjust: Adjust,
) -> tuple[list[_Key], dict[_Key, float]]:
    """The tests adjusted together, and their adjusted p-values.

    The family is each common scenario with graded trials on both sides, and the
    pooled overall test when it is not just the one scenario's (then the overall
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
) -> Comparison:
    outcome = verdict(comparison, adjusted_p=adjusted_p, alpha=alpha, margin=margin)
    needed = (
        _trials_needed(
            comparison, base, head, alpha=alpha, change_alpha=change_alpha, margin=margin
        )
        if outcome == "inconclusive"
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


def gate_fails(result: CompareResult, fail_on: FailOn | None) -> bool:
    """Whether ``--fail-on`` trips: a regressed scenario or overall (or any change)."""
    if fail_on is None:
        return False
    tripping = {"regressed"} if fail_on == "regressed" else {"regressed", "improved"}
    verdicts = [c.verdict for c in result.scenarios.values()]
    if result.overall is not None:
        verdicts.append(result.overall.verdict)
    return any(v in tripping for v in verdicts)


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


def _pool(sides: Sequence[Side], confidence: float) -> Side:
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
    trials to detect it at ``change_alpha`` (alpha shared out over the family). A
    smaller one is planned as a change to rule out: the trials to detect a change of
    ``margin`` around the mean rate at ``alpha`` (the interval is not adjusted). Both
    use Fleiss's formula at :data:`PLANNING_POWER`, floored at the smallest count per
    side at which the observed rates would meet the interval part of the rule (so the
    answer always exceeds the trials already graded). None when a side has none.
    """
    if not base.graded or not head.graded:
        return None
    return planned_trials(
        comparison,
        alpha=alpha,
        change_alpha=change_alpha,
        margin=margin,
        change=abs(comparison.difference) >= margin,
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


def _warnings(base: RunReport, head: RunReport, common: list[str]) -> list[CompareWarning]:
    found: list[CompareWarning] = []

    def differ(code: str, what: str, old: object, new: object) -> None:
        if old != new:
            found.append(
                CompareWarning(
                    code=code,
                    message=f"the runs differ in {what}: BASE {_show(old)}, HEAD {_show(new)}",
                    base=None if old is None else str(old),
                    head=None if new is None else str(new),
                )
            )

    b, h = base.meta, head.meta
    differ("compare-host-differs", "host", b.host, h.host)
    if b.host_version is not None and h.host_version is not None:
        differ("compare-host-differs", "host version", b.host_version, h.host_version)
    differ("compare-model-differs", "model", b.model, h.model)
    for field, info in type(b.config).model_fields.items():
        if field == "trials":  # a different trial count changes n, which the statistics use
            continue
        old, new = getattr(b.config, field), getattr(h.config, field)
        differ("compare-budget-differs", f"budget {info.alias or field}", old, new)
    # The definition digest covers only the scenario document and fixture. Reports
    # without it fall back to the fingerprint, which also covers the harness, host,
    # model and budget: it shows a scenario change only when those agree.
    same_conditions = not found and b.manifest_digest == h.manifest_digest
    changed = [
        name
        for name in common
        if _scenario_changed(base.scenarios[name], head.scenarios[name], same_conditions)
    ]
    if changed:
        found.append(
            CompareWarning(
                code="compare-scenario-changed",
                message="scenario documents or fixtures differ between the runs: "
                + ", ".join(changed),
                base=None,
                head=None,
            )
        )
    for label, meta in (("BASE", b), ("HEAD", h)):
        if meta.interrupted:
            found.append(
                CompareWarning(
                    code="compare-partial-report",
                    message=f"the {label} run was interrupted; its unfinished trials count "
                    "as infra-errors and are not graded",
                    base=None,
                    head=None,
                )
            )
        if meta.shard:
            found.append(
                CompareWarning(
                    code="compare-shard-report",
                    message=f"the {label} report is shard {meta.shard} of a run, not the whole run",
                    base=None,
                    head=None,
                )
            )
    return found


def _scenario_changed(old: ScenarioResult, new: ScenarioResult, same_conditions: bool) -> bool:
    if old.definition and new.definition:
        return old.definition != new.definition
    if not (same_conditions and old.fingerprint and new.fingerprint):
        return False
    return old.fingerprint != new.fingerprint


def _show(value: object) -> str:
    return (
        "(not recorded)" if value is None else repr(value) if isinstance(value, str) else str(value)
    )


def _adaptive_note(
    base: RunReport, head: RunReport, scenarios: dict[str, Comparison]
) -> list[CompareWarning]:
    """Explain where ``compare`` differs from an adaptive HEAD run's own decisions on BASE."""
    record = head.adaptive
    if record is None or record.baseline_run_id != base.run_id:
        return []
    differing = [
        f"{name} (run: {record.scenarios[name].decision}, compare: {comparison.verdict})"
        for name, comparison in scenarios.items()
        if name in record.scenarios
        and record.scenarios[name].decision != "new"
        and record.scenarios[name].decision != comparison.verdict
    ]
    if not differing:
        return []
    return [
        CompareWarning(
            code="compare-adaptive-differs",
            message=f"HEAD is an adaptive run against this BASE that judged each of its "
            f"{len(record.looks)} planned looks at alpha/{len(record.looks)}; compare judges "
            "the final counts as a single look, which is not valid after optional stopping, "
            "and differs on " + ", ".join(differing),
            base=None,
            head=None,
        )
    ]
