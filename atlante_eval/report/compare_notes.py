"""What weakens a comparison: differing conditions, an adaptive HEAD, too few trials.

Each note is a :class:`CompareWarning` in ``compare``'s result (``warnings`` in
``--json``) and a warning diagnostic on the terminal, with a ``next`` step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Protocol

from ..stats.planning import OneLookRule, detectable_drop, one_look_power, trials_for_power
from ..stats.proportions import fisher_exact_two_sided
from .models import Meta, OutputModel, RunReport, ScenarioResult
from .results import statistics_of

__all__ = [
    "DETECT_POINTS",
    "WARNING_NEXT",
    "CompareWarning",
    "adaptive_note",
    "condition_warnings",
    "power_note",
]

#: The drop (percentage points, from a scenario that always passed) a comparison
#: should be able to detect with 80% power; fewer trials than that get a warning.
DETECT_POINTS = 30
_POWER = 0.8


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


WARNING_NEXT = {
    "compare-host-differs": "compare runs of the same host to isolate the harness",
    "compare-host-version-differs": "pin the host version (eval.hostVersion, docs/hosts.md) so "
    "both runs use the same one and the comparison isolates the harness",
    "compare-model-differs": "compare runs of the same model to isolate the harness",
    "compare-budget-differs": "compare runs with the same eval.budget to isolate the harness",
    "compare-scenario-changed": "a changed scenario measures something else; rerun BASE on it",
    "compare-partial-report": "rerun (or resume) the interrupted run before trusting the result",
    "compare-shard-report": "merge the shards with `atlante-eval merge` and compare the result",
    "compare-adaptive-differs": "trust the adaptive run's decisions (report.json adaptive); "
    "see docs/statistics.md, 'compare after an adaptive run'",
    "compare-infra-differs": "rerun the run with more infra-errors (or use --retry-infra); "
    "infra-errors are left out of the pass rates, so they cost trials, not verdicts",
    "compare-underpowered": "run more trials per scenario (--trials), or let an adaptive run "
    "find how many each scenario needs (run --against BASE --until-decided)",
}


class _Judged(Protocol):
    """A scenario's row of the comparison, as far as the notes read it."""

    @property
    def verdict(self) -> str: ...


class _Counted(Protocol):
    """One side of a row: its graded trials."""

    @property
    def graded(self) -> int: ...


class _Row(_Judged, Protocol):
    @property
    def base(self) -> _Counted: ...

    @property
    def head(self) -> _Counted: ...


def condition_warnings(base: RunReport, head: RunReport, common: list[str]) -> list[CompareWarning]:
    """Differences in the runs' conditions: host, model, budget, scenarios, partial runs."""
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
    if None not in (b.host_version, h.host_version) and b.host_version != h.host_version:
        found.append(_host_version_warning(b, h))
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
    found.extend(_infra_differs(base, head, common))
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


def _host_version_warning(base: Meta, head: Meta) -> CompareWarning:
    """``compare-host-version-differs``, saying where each host came from (a pin, or PATH)."""
    shown = [
        repr(m.host_version) + (f" ({m.host_source.kind})" if m.host_source else "")
        for m in (base, head)
    ]
    return CompareWarning(
        code="compare-host-version-differs",
        message=f"the runs differ in host version: BASE {shown[0]}, HEAD {shown[1]}",
        base=base.host_version,
        head=head.host_version,
    )


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


def adaptive_note(
    base: RunReport, head: RunReport, scenarios: Mapping[str, _Judged]
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
            message=f"HEAD is an adaptive run against this BASE whose design allows for each "
            f"of its {len(record.looks)} planned looks; compare judges the final counts as a "
            "single look, which is not valid after optional stopping, and differs on "
            + ", ".join(differing),
            base=None,
            head=None,
        )
    ]


def _infra_differs(base: RunReport, head: RunReport, common: list[str]) -> list[CompareWarning]:
    """Infra-error rates over the common scenarios that differ beyond chance (Fisher, 5%)."""
    sides = []
    for report in (base, head):
        stats = [statistics_of(report.scenarios[name]) for name in common]
        sides.append((sum(s.infra_errors for s in stats), sum(s.executed for s in stats)))
    (e1, n1), (e2, n2) = sides
    if not n1 or not n2 or e1 * n2 == e2 * n1 or fisher_exact_two_sided(e1, n1, e2, n2) >= 0.05:
        return []
    return [
        CompareWarning(
            code="compare-infra-differs",
            message=f"infra-error rates differ between the runs: BASE {e1 / n1:.0%} ({e1} of "
            f"{n1} trials), HEAD {e2 / n2:.0%} ({e2} of {n2}); the scenarios that lost more "
            "trials are compared on fewer (the overall row weighs each scenario by its own "
            "counts, so it is not misled)",
            base=f"{e1}/{n1}",
            head=f"{e2}/{n2}",
        )
    ]


def power_note(
    scenarios: Mapping[str, _Row], *, alpha: float, margin: float, family: int
) -> list[CompareWarning]:
    """Say when the runs' trial counts cannot detect a drop of :data:`DETECT_POINTS` points.

    Read at the most common pair of graded counts (BASE, HEAD) of the compared
    scenarios: the smallest drop from 100% that ``compare``'s rule detects with 80%
    power at these counts, and the trials per side it needs for :data:`DETECT_POINTS`.
    """
    pairs = Counter(
        (row.base.graded, row.head.graded)
        for row in scenarios.values()
        if row.base.graded and row.head.graded
    )
    if not pairs:
        return []
    (n1, n2), count = min(pairs.items(), key=lambda item: (-item[1], sum(item[0])))
    rule = OneLookRule(
        alpha=alpha, change_alpha=alpha / family if family > 1 else alpha, margin=margin
    )
    drop = detectable_drop(
        lambda rate: one_look_power(
            rule, base_rate=1.0, head_rate=rate, base_trials=n1, head_trials=n2, target="regressed"
        ),
        power=_POWER,
    )
    if drop is not None and drop <= DETECT_POINTS:
        return []
    needed = trials_for_power(
        rule, base_rate=1.0, head_rate=1.0 - DETECT_POINTS / 100, target="regressed", power=_POWER
    )
    counts = f"{n1} graded trials per side" if n1 == n2 else f"{n1} (BASE) and {n2} (HEAD) graded"
    what = (
        "cannot detect any drop, not even 100% -> 0%"
        if drop is None
        else f"can detect only drops of {drop} points or more"
    )
    share = f"alpha {alpha:g}" + (f" over {family} tests" if family > 1 else "")
    return [
        CompareWarning(
            code="compare-underpowered",
            message=f"with {counts} ({count} of {len(scenarios)} scenarios), compare {what} "
            f"(from 100%, with 80% power at {share}); at least "
            f"{needed if needed is not None else 'more than 200'} per side are needed to "
            f"detect a {DETECT_POINTS}-point drop",
            base=str(n1),
            head=str(n2),
        )
    ]
