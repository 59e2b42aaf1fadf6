"""The run page as data: meta, per-scenario statistics and charts, the verdict grid, trials.

:func:`run_page` turns any run report (a run's own, a merged one, a selftest's,
or the reference tool's, whose statistics are computed from its trials) into a
:class:`RunPage` the ``run.html.j2`` template draws.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from ...report import (
    RunFiles,
    RunReport,
    ScenarioResult,
    arm_names,
    arm_scenarios,
    statistics_of,
    trial_key,
)
from ..causes import check_failures, describe_failure, no_graded_note, verdict_counts
from ..run_setup import setup_facts
from ..trial import build_trial_view
from .arms_page import ArmsSection, arms_section, row_anchor
from .svg import interval_bar, strip_plot
from .trial import PAGE_CAPS, TrialPanel, allowances, trial_panel

__all__ = ["GridCell", "RunPage", "ScenarioRow", "anchor_of", "run_page"]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


@dataclass(frozen=True, slots=True)
class GridCell:
    """One trial in the verdict grid."""

    i: int
    verdict: str
    anchor: str


@dataclass(frozen=True, slots=True)
class ScenarioRow:
    """One scenario's line in the run page."""

    name: str
    anchor: str
    description: str | None
    trials: int
    verdicts: dict[str, int]
    pass_rate: float
    graded: int
    passed: int
    rate_graded: float | None
    interval: tuple[float, float] | None
    interval_bar: Markup | None
    stability: str | None
    pass_at_k: list[tuple[str, float, float]]
    mean_duration_ms: int
    duration_p95_ms: int
    duration_strip: Markup
    tokens: int | None
    tokens_mean: float | None
    tokens_strip: Markup | None
    cost: float | None
    note: str | None
    failing_checks: list[str]
    skills: dict[str, int]
    subagents: dict[str, int]
    tool_kinds: dict[str, int]
    cells: list[GridCell]
    panels: list[TrialPanel]


@dataclass(frozen=True, slots=True)
class RunPage:
    """The whole run page."""

    title: str
    run_id: str
    facts: list[tuple[str, str]]
    verdicts: dict[str, int]
    total_trials: int
    scenarios: list[ScenarioRow]
    max_trials: int
    arms: ArmsSection | None = None


def anchor_of(position: int, name: str) -> str:
    """A scenario's id in the page: ``s-<name>`` for a plain name, else by position."""
    return f"s-{name}" if _SLUG.match(name) else f"s{position}"


def _pass_at_k(result: ScenarioResult) -> list[tuple[str, float, float]]:
    stats = statistics_of(result)
    return [
        (k, stats.pass_at_k[k], stats.pass_hat_k.get(k, 0.0))
        for k in sorted(stats.pass_at_k, key=int)
    ]


@dataclass(frozen=True, slots=True)
class _Entry:
    """One row to draw: a scenario, or one arm's trials of it (``name@arm``)."""

    name: str
    result: ScenarioResult
    anchor: str
    key: str
    label: str


def _entries(report: RunReport) -> list[_Entry]:
    """Every scenario (of a run with arms: every arm's, next to each other)."""
    anchors = {name: anchor_of(p, name) for p, name in enumerate(report.scenarios)}
    arms = {arm: arm_scenarios(report, arm) for arm in arm_names(report)}
    if not arms:
        return [_Entry(n, r, anchors[n], n, n) for n, r in report.scenarios.items()]
    return [
        _Entry(
            name,
            each[name],
            row_anchor(anchors[name], arm),
            trial_key(report, name, arm),
            f"{name}@{arm}",
        )
        for name in report.scenarios
        for arm, each in arms.items()
        if name in each
    ]


def _scenario(
    entry: _Entry,
    report: RunReport,
    *,
    files: RunFiles | None,
    links_from: Path | None,
    longest_ms: float,
    most_tokens: float,
    shares: dict[tuple[str, int], int],
) -> ScenarioRow:
    result, anchor, key = entry.result, entry.anchor, entry.key
    stats = statistics_of(result)
    graded = stats.graded > 0
    trials = sorted(result.trials, key=lambda t: t.i)
    executed = [t for t in trials if t.verdict != "skipped-budget"]
    tokens = [float(t.tokens) for t in trials if t.tokens is not None]
    activity = result.activity
    return ScenarioRow(
        name=entry.label,
        anchor=anchor,
        description=result.description,
        trials=len(trials),
        verdicts=dict(verdict_counts(result)),
        pass_rate=result.pass_rate,
        graded=stats.graded,
        passed=stats.passed,
        rate_graded=stats.pass_rate_graded if graded else None,
        interval=stats.wilson95 if graded else None,
        interval_bar=interval_bar(stats.pass_rate_graded, *stats.wilson95) if graded else None,
        stability=stats.stability,
        pass_at_k=_pass_at_k(result),
        mean_duration_ms=result.mean_duration_ms,
        duration_p95_ms=result.spread.duration_p95_ms,
        duration_strip=strip_plot(
            [t.duration_ms / 1000 for t in executed], maximum=longest_ms / 1000, unit="s"
        ),
        tokens=result.tokens,
        tokens_mean=stats.tokens_mean,
        tokens_strip=strip_plot(tokens, maximum=most_tokens, unit="tokens") if tokens else None,
        cost=result.cost,
        note=no_graded_note(result),
        failing_checks=[
            describe_failure(f.index, f.type, f.failed, f.errored, f.graded)
            for f in check_failures(result)
        ],
        skills=dict(activity.skills) if activity else {},
        subagents=dict(activity.subagents) if activity else {},
        tool_kinds=dict(activity.tool_calls.by_kind) if activity else {},
        cells=[GridCell(t.i, t.verdict, f"{anchor}-t{t.i}") for t in trials],
        panels=[
            trial_panel(
                build_trial_view(
                    t,
                    run_id=report.run_id,
                    scenario=key,
                    config=report.meta.config,
                    files=files,
                    caps=PAGE_CAPS,
                    prompt=result.prompt,
                ),
                f"{anchor}-t{t.i}",
                run_dir=files.path if files is not None else None,
                links_from=links_from,
                allowance=shares[(key, t.i)],
            )
            for t in trials
        ],
    )


def _duration(ms: int | None) -> str:
    if ms is None:
        return "unknown"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _facts(report: RunReport) -> list[tuple[str, str]]:
    meta = report.meta
    totals = meta.totals
    tokens = totals.tokens if totals else sum(t.tokens or 0 for t in report.all_trials())
    cost = totals.cost if totals else sum(t.cost or 0.0 for t in report.all_trials())
    facts = [(fact.label, fact.value) for fact in setup_facts(meta)]
    facts += [
        ("harness", meta.manifest_digest[:12] if meta.manifest_digest else "not recorded"),
        ("started", meta.started_at or "not recorded"),
        ("took", _duration(meta.wall_time_ms)),
        ("tokens", f"{tokens:,}"),
        ("cost", f"${cost:.4f}"),
        ("trials per scenario", str(meta.config.trials)),
        ("engine", f"{meta.engine} {meta.atlante}"),
    ]
    if meta.shard:
        facts.append(("shard", meta.shard))
    if meta.resumed_from:
        facts.append(("resumed from", meta.resumed_from))
    if meta.regraded_from:
        facts.append(("regraded from", f"run {meta.regraded_from} (same trials, current checks)"))
    if meta.interrupted:
        facts.append(("interrupted", "yes: this is a partial report"))
    return facts


def run_page(report: RunReport, *, run_dir: Path | None, links_from: Path | None) -> RunPage:
    """The page of ``report``; transcripts are read from ``run_dir`` when given.

    A run with arms shows every arm's trials (rows ``<scenario>@<arm>``) and the arms section.
    """
    entries = _entries(report)
    trials = [t for e in entries for t in e.result.trials]
    longest = float(max((t.duration_ms for t in trials), default=0))
    most = float(max((t.tokens or 0 for t in trials), default=0))
    verdicts: dict[str, int] = {}
    for trial in trials:
        verdicts[trial.verdict] = verdicts.get(trial.verdict, 0) + 1
    # Failing trials get three times a passing trial's share of the page.
    keys = [(e.key, t.i, t.verdict) for e in entries for t in e.result.trials]
    weights = [1 if verdict == "pass" else 3 for _, _, verdict in keys]
    shares = {(n, i): a for (n, i, _), a in zip(keys, allowances(weights), strict=True)}
    files: RunFiles | None = None
    if run_dir is not None:
        with contextlib.suppress(OSError):
            files = RunFiles.open_existing(run_dir)
    try:
        rows = _rows(entries, report, files, links_from, longest, most, shares)
    finally:
        if files is not None:
            files.close()
    return RunPage(
        title=f"atlante-eval run {report.run_id}",
        run_id=report.run_id,
        facts=_facts(report),
        verdicts=verdicts,
        total_trials=len(trials),
        scenarios=rows,
        max_trials=max((len(e.result.trials) for e in entries), default=0),
        arms=arms_section(
            report, {name: anchor_of(p, name) for p, name in enumerate(report.scenarios)}
        ),
    )


def _rows(
    entries: list[_Entry],
    report: RunReport,
    files: RunFiles | None,
    links_from: Path | None,
    longest: float,
    most: float,
    shares: dict[tuple[str, int], int],
) -> list[ScenarioRow]:
    return [
        _scenario(
            entry,
            report,
            files=files,
            links_from=links_from,
            longest_ms=longest,
            most_tokens=most,
            shares=shares,
        )
        for entry in entries
    ]
