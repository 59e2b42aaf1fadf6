"""A scenario over nights, from its per-run counts: pooled rate, flips, first failure.

Pure functions (no database): :mod:`.queries` feeds them rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..stats import wilson_interval
from .models import NightOutcome, ScenarioNight, WindowStats

__all__ = ["first_failing", "flips", "last_passing", "outcome_of", "window"]


def outcome_of(passed: int, graded: int) -> NightOutcome:
    """``pass`` (all graded passed), ``fail`` (none), ``flaky`` (some) or ``none``."""
    if graded == 0:
        return "none"
    if passed == graded:
        return "pass"
    return "fail" if passed == 0 else "flaky"


def window(nights: Sequence[ScenarioNight]) -> WindowStats:
    """Trials pooled over ``nights`` with a 95% Wilson interval."""
    passed = sum(n.passed for n in nights)
    graded = sum(n.graded for n in nights)
    if graded == 0:
        return WindowStats(passed=0, graded=0, pass_rate=None, interval=None)
    return WindowStats(
        passed=passed,
        graded=graded,
        pass_rate=passed / graded,
        interval=wilson_interval(passed, graded),
    )


def flips(outcomes: Sequence[NightOutcome]) -> tuple[int, int]:
    """``(flips, pairs)``: changes pass ↔ not-pass between consecutive graded runs."""
    graded = [o == "pass" for o in outcomes if o != "none"]
    changes = sum(1 for before, after in itertools.pairwise(graded) if before != after)
    return changes, max(len(graded) - 1, 0)


def first_failing(nights: Sequence[ScenarioNight]) -> str | None:
    """The first run of the latest streak of graded runs that did not fully pass."""
    found: str | None = None
    for night in reversed(nights):
        if night.outcome == "none":
            continue
        if night.outcome == "pass":
            break
        found = night.run_id
    return found


def last_passing(nights: Sequence[ScenarioNight]) -> str | None:
    """The latest run in which every graded trial passed."""
    return next((n.run_id for n in reversed(nights) if n.outcome == "pass"), None)
