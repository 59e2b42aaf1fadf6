"""Check deltas: each check's failures on each side, and which started or stopped failing.

A check is known by its position and type in the scenario document. Its failure
rate is over the trials whose checks ran; ``fail`` and ``error`` both count as
failing. The rates are compared with the two-sided Fisher exact test. Checks that
passed in every trial of both sides are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..report import TrialResult
from ..report.behaviour import CheckChange, CheckDelta
from ..stats.proportions import fisher_exact_two_sided

__all__ = ["check_deltas"]


def _failures(trials: Sequence[TrialResult]) -> tuple[Counter[tuple[int, str]], int]:
    """Failing trials per check, and how many trials' checks ran."""
    ran = [t for t in trials if t.checks is not None]
    failed: Counter[tuple[int, str]] = Counter()
    for trial in ran:
        for key in {(c.index, c.type) for c in trial.checks or [] if c.verdict != "pass"}:
            failed[key] += 1
    return failed, len(ran)


def check_deltas(base: Sequence[TrialResult], head: Sequence[TrialResult]) -> list[CheckDelta]:
    """Every check that did not pass in some trial of either side, in check order."""
    before, base_graded = _failures(base)
    after, head_graded = _failures(head)
    rows = []
    for index, kind in sorted(set(before) | set(after)):
        old, new = before[(index, kind)], after[(index, kind)]
        change = _change(old, base_graded, new, head_graded)
        rows.append(
            CheckDelta(
                index=index,
                type=kind,
                base_failed=old,
                base_graded=base_graded,
                head_failed=new,
                head_graded=head_graded,
                change=change,
                p_value=fisher_exact_two_sided(old, base_graded, new, head_graded)
                if base_graded and head_graded
                else 1.0,
                summary=_summary(index, kind, change, (old, base_graded), (new, head_graded)),
            )
        )
    return rows


def _change(old: int, base_graded: int, new: int, head_graded: int) -> CheckChange:
    if old == 0 and new:
        return "started-failing"
    if new == 0 and old:
        return "stopped-failing"
    difference = new * base_graded - old * head_graded  # compares new/head with old/base
    if difference > 0:
        return "fails-more"
    return "fails-less" if difference < 0 else "same"


def _summary(
    index: int, kind: str, change: CheckChange, old: tuple[int, int], new: tuple[int, int]
) -> str:
    name = f"check {index} {kind}"
    before, after = f"{old[0]}/{old[1]}", f"{new[0]}/{new[1]}"
    if change == "started-failing":
        return f"{name} now fails {after} (BASE {before})"
    if change == "stopped-failing":
        return f"{name} no longer fails (BASE {before}, HEAD {after})"
    verb = {"fails-more": "fails more", "fails-less": "fails less", "same": "fails"}[change]
    return f"{name} {verb}: {before} → {after}"
