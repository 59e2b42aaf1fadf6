"""Refuse a report whose stored figures contradict its own trials.

A report read back is a document anyone can edit. ``compare`` and ``run --against``
recompute every statistic from the trials (:func:`.results.statistics_of`), so a
forged ``stats`` block cannot change a verdict; a document whose stored figures
disagree with its trials is refused outright, before anything is compared or any
trial runs, with ``report-unreadable`` (exit 2) naming the first contradiction.

What is checked, per scenario: trial indexes are distinct and not negative;
durations, tokens and costs are not negative; the stored ``stats`` counts
(``executed``, ``graded``, ``passed``, ``infraErrors``, ``skipped``) and rates
(``passRate``, ``stats.passRateGraded``) equal what the trials give; and
``meta.totals``, when present, counts the trials listed. Each check is linear in
the number of trials.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ..diagnostics import DiagnosticError, error
from .models import RunReport, ScenarioResult

__all__ = ["check_consistent", "inconsistencies"]

#: Rates are recomputed in floating point; a stored rate may differ by rounding only.
_RATE_TOLERANCE = 1e-9
_COUNTS = (
    ("executed", "executed"),
    ("graded", "graded"),
    ("passed", "passed"),
    ("infra_errors", "infraErrors"),
    ("skipped", "skipped"),
)


def inconsistencies(report: RunReport) -> Iterator[tuple[str, str]]:
    """Each contradiction in ``report``: its JSON pointer and what is wrong (first first)."""
    for name, result in report.scenarios.items():
        where = "/scenarios/" + name.replace("~", "~0").replace("/", "~1")
        yield from _trial_problems(result, where)
        yield from _stored_problems(result, where)
    totals = report.meta.totals
    if totals is not None:
        listed = [t for result in report.scenarios.values() for t in result.trials]
        if totals.trials != len(listed):
            yield "/meta/totals/trials", f"says {totals.trials} trials, {len(listed)} are listed"
        counted = dict(Counter(t.verdict for t in listed))
        if {k: v for k, v in totals.verdicts.items() if v} != counted:
            yield "/meta/totals/verdicts", "does not count the verdicts of the listed trials"


def _trial_problems(result: ScenarioResult, where: str) -> Iterator[tuple[str, str]]:
    seen: set[int] = set()
    for position, trial in enumerate(result.trials):
        pointer = f"{where}/trials/{position}"
        if trial.i < 0 or trial.i in seen:
            yield f"{pointer}/i", f"trial index {trial.i} is negative or repeated"
        seen.add(trial.i)
        for field, value in (
            ("durationMs", trial.duration_ms),
            ("tokens", trial.tokens),
            ("cost", trial.cost),
        ):
            if value is not None and value < 0:
                yield f"{pointer}/{field}", f"{field} is negative ({value})"


@dataclass(frozen=True, slots=True)
class _Counts:
    """What a scenario's trials give, the figures a comparison uses."""

    executed: int
    graded: int
    passed: int
    infra_errors: int
    skipped: int

    @classmethod
    def of(cls, result: ScenarioResult) -> _Counts:
        # A trial an interruption kept from starting (notStarted) counts nowhere, as in
        # results.statistics_of: the stored figures a run wrote leave it out.
        ran = [t for t in result.trials if not t.not_started]
        verdicts = Counter(t.verdict for t in ran)
        skipped, infra = verdicts["skipped-budget"], verdicts["infra-error"]
        executed = len(ran) - skipped
        return cls(executed, executed - infra, verdicts["pass"], infra, skipped)

    @property
    def pass_rate_graded(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


def _stored_problems(result: ScenarioResult, where: str) -> Iterator[tuple[str, str]]:
    actual = _Counts.of(result)
    trials = len(result.trials)
    if abs(result.pass_rate - (actual.passed / actual.executed if actual.executed else 0.0)) > (
        _RATE_TOLERANCE
    ):
        yield (
            f"{where}/passRate",
            f"passRate {result.pass_rate} is not what its {trials} trials give "
            f"({actual.passed} passed of {actual.executed} executed)",
        )
    stored = result.stats
    if stored is None:
        return
    for field, key in _COUNTS:
        claimed, counted = getattr(stored, field), getattr(actual, field)
        if claimed != counted:
            yield (
                f"{where}/stats/{key}",
                f"stats claim {key} {claimed}, but its {trials} trials give {counted}",
            )
    if abs(stored.pass_rate_graded - actual.pass_rate_graded) > _RATE_TOLERANCE:
        yield (
            f"{where}/stats/passRateGraded",
            f"stats claim passRateGraded {stored.pass_rate_graded}, but its trials give "
            f"{actual.pass_rate_graded}",
        )


def check_consistent(report: RunReport, source: str) -> None:
    """Raise ``report-unreadable`` (exit 2) when ``report`` contradicts its own trials.

    Args:
        report: the report read back.
        source: where it was read from, as shown to the user.

    Raises:
        DiagnosticError: ``report-unreadable`` naming the first contradiction.
    """
    found = list(inconsistencies(report))
    if not found:
        return
    pointer, problem = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise DiagnosticError(
        [
            error(
                "report-unreadable",
                f"{source or 'the report'} contradicts its own trials at {pointer}: "
                f"{problem}{more}",
                source=source or None,
                pointer=pointer,
                next="pass the report.json a run wrote; this one was edited or forged "
                "(statistics are always recomputed from the trials)",
            )
        ]
    )
