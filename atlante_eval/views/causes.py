"""Why a trial did not pass, in one line, and how often each check failed.

The progress printer, the run summary and ``atlante-eval show`` all explain a
non-pass the same way: a ``fail`` names its failing checks by index and type with
one line of evidence (for a command, the line of its output a person would read:
:func:`atlante_eval.checks.output_cause.output_cause`); an ``infra-error`` the
first line of its error; a
``timeout`` or ``budget-exceeded`` the limit it hit; a ``skipped-budget`` the
session budget. A resource limit the trial reached (``memory limit 512 MB
reached``) leads the cause, whatever the verdict. Everything here is plain text
already made safe for a terminal (:func:`atlante_eval._util.terminal.printable`):
evidence and errors come from the agent, the host and the checks, and are untrusted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from .._util.terminal import first_line, printable, shorten
from ..report import CheckResult, MetaConfig, ScenarioResult, TrialResult

__all__ = [
    "CAUSE_WIDTH",
    "EVIDENCE_WIDTH",
    "CheckFailure",
    "check_failures",
    "describe_failure",
    "evidence_line",
    "no_graded_note",
    "trial_cause",
    "verdict_counts",
]

#: Longest evidence line of one check in a cause.
EVIDENCE_WIDTH = 100
#: Longest cause line.
CAUSE_WIDTH = 240
#: Failing checks named in one cause; the rest are counted.
_NAMED_CHECKS = 2


def _raw_line(check: CheckResult) -> str:
    """The evidence of ``check``, worded by its type's registry entry, before escaping."""
    evidence = check.evidence
    if "cause" in evidence:
        return first_line(str(evidence["cause"]))
    from ..checks import check_kind  # the checks' registry: not before a trial has run

    kind = check_kind(check.type)
    if kind is None:  # a report from another version or tool: show what it recorded
        return first_line(json.dumps(evidence, ensure_ascii=False))
    return kind.line(evidence)


def evidence_line(check: CheckResult, *, width: int = EVIDENCE_WIDTH) -> str:
    """One escaped, shortened line saying what ``check`` saw."""
    return shorten(printable(_raw_line(check)), width)


def _failed_checks(result: TrialResult) -> list[CheckResult]:
    return [c for c in result.checks or [] if c.verdict != "pass"]


def _fail_cause(result: TrialResult) -> str:
    failed = _failed_checks(result)
    if not failed:
        return "no failing check recorded"
    named = [
        f"check {c.index} {printable(c.type)}"
        f"{' errored' if c.verdict == 'error' else ''}: {evidence_line(c)}"
        for c in failed[:_NAMED_CHECKS]
    ]
    more = len(failed) - _NAMED_CHECKS
    return "; ".join(named) + (f" (+{more} more failing)" if more > 0 else "")


def _thousands(value: int) -> str:
    return f"{value:,}"


def trial_cause(result: TrialResult, config: MetaConfig | None = None) -> str | None:
    """Why ``result`` did not pass, in one escaped line (``None`` for a pass).

    ``config`` is the run's budget (``meta.config``): it names the token and
    session limits; without it the trial's own error text is used.
    """
    verdict = result.verdict
    if verdict == "pass":
        return None
    limits = _limits_cause(result)
    if verdict == "fail":
        cause = _fail_cause(result)
    elif verdict == "timeout" and result.timeout_ms is not None:
        cause = f"timeout after {result.timeout_ms} ms"
    elif limits is not None:
        cause = printable(first_line(result.error or "")) or limits
        limits = None  # the error leads with the limit already
    elif verdict == "budget-exceeded" and config is not None:
        used = "?" if result.tokens is None else _thousands(result.tokens)
        cause = f"budget-exceeded: {used} tokens > maxTokens {_thousands(config.max_tokens)}"
    elif verdict == "skipped-budget":
        limit = f" {config.max_sessions}" if config is not None else ""
        cause = f"maxSessions{limit} reached: the trial did not start"
    else:
        cause = printable(first_line(result.error or "")) or "no error recorded"
    if limits is not None:
        cause = f"{limits}; {cause}"
    return shorten(cause, CAUSE_WIDTH)


def _limits_cause(result: TrialResult) -> str | None:
    """``memory limit 512 MB reached (session)``: the limits ``result`` reached, or ``None``."""
    if not result.limits_reached:
        return None
    return "; ".join(r.cause for r in result.limits_reached)


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """How often one check of a scenario failed (or could not run) over its trials."""

    index: int
    """The check's position in the scenario document."""
    type: str
    """The check type."""
    failed: int
    """Trials where it failed."""
    errored: int
    """Trials where it could not produce a verdict."""
    graded: int
    """Trials where the checks ran."""

    def describe(self) -> str:
        """``check 2 file-contains failed 2/3`` (and ``errored 1/3`` when it did)."""
        return describe_failure(self.index, self.type, self.failed, self.errored, self.graded)


def describe_failure(index: int, kind: str, failed: int, errored: int, graded: int) -> str:
    """``check 2 file-contains failed 2/3, errored 1/3``: one check's failures, escaped."""
    parts = []
    if failed:
        parts.append(f"failed {failed}/{graded}")
    if errored:
        parts.append(f"errored {errored}/{graded}")
    return f"check {index} {printable(kind)} {', '.join(parts)}"


def check_failures(result: ScenarioResult) -> list[CheckFailure]:
    """Every check of ``result`` that did not pass in some trial, in check order."""
    ran = [t for t in result.trials if t.checks is not None]
    failed: Counter[tuple[int, str]] = Counter()
    errored: Counter[tuple[int, str]] = Counter()
    for trial in ran:
        for check in trial.checks or []:
            if check.verdict == "fail":
                failed[(check.index, check.type)] += 1
            elif check.verdict == "error":
                errored[(check.index, check.type)] += 1
    keys = sorted(set(failed) | set(errored))
    return [
        CheckFailure(index, kind, failed[(index, kind)], errored[(index, kind)], len(ran))
        for index, kind in keys
    ]


def verdict_counts(result: ScenarioResult) -> Counter[str]:
    """How many trials of ``result`` ended in each verdict."""
    return Counter(t.verdict for t in result.trials)


def no_graded_note(result: ScenarioResult) -> str | None:
    """``not run (3 skipped-budget)`` or ``no graded trials (3 infra-error)``, else ``None``.

    A scenario none of whose trials was graded has no meaningful pass rate.
    """
    counts = verdict_counts(result)
    ungraded = counts["skipped-budget"] + counts["infra-error"]
    if not result.trials or ungraded < len(result.trials):
        return None
    detail = ", ".join(f"{counts[v]} {v}" for v in ("infra-error", "skipped-budget") if counts[v])
    label = "not run" if counts["infra-error"] == 0 else "no graded trials"
    return f"{label} ({detail})"
