"""Assemble trial results into scenario results and a run report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ..stats import ScenarioStats, scenario_statistics
from .models import (
    Meta,
    OriginInfo,
    RunReport,
    ScenarioActivity,
    ScenarioResult,
    ScenarioStatistics,
    ScenarioToolCalls,
    Spread,
    Totals,
    TrialResult,
    model_version_of,
)

__all__ = [
    "build_meta_model",
    "finalize",
    "scenario_activity",
    "statistics_of",
    "summarize",
    "totals",
]


def summarize(
    trials: Sequence[TrialResult],
    *,
    source: str | None = None,
    origin: OriginInfo | None = None,
    fingerprint: str | None = None,
    definition: str | None = None,
    description: str | None = None,
    prompt: str | None = None,
) -> ScenarioResult:
    """Summarise trials into a scenario result without a :class:`Scenario` (merge, reload).

    Trials are sorted by index; every statistic is recomputed from them.
    """
    ordered = sorted(trials, key=lambda t: t.i)
    stats = _statistics(ordered)
    reported_tokens = [t.tokens for t in ordered if t.tokens is not None]
    reported_costs = [t.cost for t in ordered if t.cost is not None]
    return ScenarioResult(
        trials=ordered,
        pass_rate=stats.pass_rate,
        mean_duration_ms=stats.mean_duration_ms,
        spread=Spread(duration_p95_ms=stats.duration_p95_ms),
        source=source,
        origin=origin,
        fingerprint=fingerprint,
        definition=definition,
        stats=_statistics_model(stats),
        tokens=sum(reported_tokens) if reported_tokens else None,
        cost=round(sum(reported_costs), 10) if reported_costs else None,
        description=description,
        activity=scenario_activity(ordered),
        prompt=prompt,
    )


def statistics_of(result: ScenarioResult) -> ScenarioStatistics:
    """Return the scenario's statistics, computed from its trials (time linear in them).

    A report's stored ``stats`` are never trusted: a report read back is a document
    anyone can edit, and reports written by the reference tool have none. The trials
    suffice (:mod:`.consistency` refuses a document whose stored figures disagree).
    """
    return _statistics_model(_statistics(sorted(result.trials, key=lambda t: t.i)))


def _statistics(trials: Sequence[TrialResult]) -> ScenarioStats:
    """The statistics of the trials that ran: one an interruption kept from starting is none."""
    ran = [t for t in trials if not t.not_started]
    return scenario_statistics(
        [t.verdict for t in ran],
        durations=[t.duration_ms for t in ran],
        tokens=[t.tokens for t in ran],
        costs=[t.cost for t in ran],
    )


def _statistics_model(stats: ScenarioStats) -> ScenarioStatistics:
    return ScenarioStatistics(
        executed=stats.executed,
        graded=stats.graded,
        passed=stats.passed,
        infra_errors=stats.infra_errors,
        skipped=stats.skipped,
        pass_rate_graded=stats.pass_rate_graded,
        wilson95=stats.wilson_interval,
        pass_at_k={str(k): v for k, v in stats.pass_at_k.items()},
        pass_hat_k={str(k): v for k, v in stats.pass_hat_k.items()},
        stability=stats.stability,
        tokens_mean=stats.mean_tokens,
        tokens_p95=stats.tokens_p95,
        cost_mean=stats.mean_cost,
        cost_p95=stats.cost_p95,
        cost_per_pass=stats.cost_per_pass,
    )


def totals(scenarios: dict[str, ScenarioResult]) -> Totals:
    """Run-wide trial, verdict, token and cost totals."""
    trials = [t for result in scenarios.values() for t in result.trials]
    return Totals(
        trials=len(trials),
        verdicts=dict(sorted(Counter(t.verdict for t in trials).items())),
        tokens=sum(t.tokens or 0 for t in trials),
        cost=round(sum(t.cost or 0.0 for t in trials), 10),
    )


def build_meta_model(meta: Meta, scenarios: dict[str, ScenarioResult]) -> Meta:
    """Fill ``meta.model``/``modelVersion`` from the first scenario (sorted) with a model.

    Within a scenario, the first trial (by index) that reported a model decides.
    """
    for name in sorted(scenarios):
        for trial in scenarios[name].trials:
            if trial.model:
                version = trial.model_version or model_version_of(trial.model)
                return meta.model_copy(update={"model": trial.model, "model_version": version})
    return meta


def finalize(report: RunReport) -> RunReport:
    """Return ``report`` with its totals and model identity filled in."""
    meta = build_meta_model(report.meta, report.scenarios)
    meta = meta.model_copy(update={"totals": totals(report.scenarios)})
    return report.model_copy(update={"meta": meta})


def _used(names: Iterable[dict[str, int]]) -> dict[str, int]:
    trials: Counter[str] = Counter()
    for used in names:
        trials.update(used.keys())
    return dict(sorted(trials.items()))


def scenario_activity(trials: Sequence[TrialResult]) -> ScenarioActivity | None:
    """Aggregate the trials' activity (``None`` when no trial has one)."""
    summaries = [t.activity for t in trials if t.activity is not None]
    if not summaries:
        return None
    kinds: Counter[str] = Counter()
    for summary in summaries:
        kinds.update(summary.tool_calls.by_kind)
    return ScenarioActivity(
        trials=len(summaries),
        skills=_used(s.skills for s in summaries),
        subagents=_used(s.subagents for s in summaries),
        tool_calls=ScenarioToolCalls(by_kind=dict(sorted(kinds.items()))),
    )
