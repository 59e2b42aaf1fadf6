"""The live status line's figures: trials done by verdict, what runs, and the time left.

:class:`RunStatus` follows a run's progress events and says, at any moment,
``3/10 done · 2 running · 1 pass · 1 fail · 1 timeout · 0 error · 0 other ·
0:41 · ~1:20 left``. Timeouts and infra errors are counted apart from the
other non-passes (they point at the budget and at the machine, not at the
agent). The time left is estimated from the durations of the trials that
finished (:func:`remaining_ms`); it is shown once one has.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["RunStatus", "clock", "remaining_ms"]

#: Verdicts the status line counts by name; ``other`` counts the rest.
_NAMED = (("pass", "pass"), ("fail", "fail"), ("timeout", "timeout"), ("infra-error", "error"))


def clock(seconds: float) -> str:
    """``1:05`` (minutes and seconds), or ``1:02:05`` past an hour."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def remaining_ms(
    *, finished: Sequence[int], running: Sequence[float], waiting: int, jobs: int
) -> float | None:
    """Estimate the milliseconds until every trial has finished; ``None`` before any has.

    Each trial still to run is expected to take the mean of ``finished`` (the
    durations of the trials that ran, in ms); a running trial, that mean less what
    it has run (``running``: milliseconds since each started, never below 0). The
    work left is shared among ``jobs`` lanes, or fewer when fewer trials are left;
    and it takes at least as long as the longest trial left (a whole mean while one
    has yet to start).
    """
    if not finished:
        return None
    mean = sum(finished) / len(finished)
    left = [max(mean - elapsed, 0.0) for elapsed in running]
    work = sum(left) + waiting * mean
    lanes = max(1, min(jobs, waiting + len(running)))
    longest = mean if waiting else max(left, default=0.0)
    return max(work / lanes, longest)


@dataclass
class RunStatus:
    """What the status line says about a run, from its progress events."""

    now: Callable[[], float] = time.monotonic
    """The clock, in seconds (tests drive their own)."""
    started: float = field(default=0.0)
    total: int | None = None
    jobs: int = 1
    verdicts: Counter[str] = field(default_factory=Counter)
    durations: list[int] = field(default_factory=list)
    running: dict[tuple[str, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started = self.now()

    def plan(self, total: int, jobs: int) -> None:
        """The run's plan is ready: ``total`` trials, ``jobs`` at a time."""
        self.total = total
        self.jobs = max(jobs, 1)

    def start(self, scenario: str, trial: int) -> None:
        """A trial started."""
        self.running[(scenario, trial)] = self.now()

    def finish(self, scenario: str, trial: int, verdict: str, duration_ms: int) -> None:
        """A trial has its verdict (a skipped one never ran: its duration does not count)."""
        self.running.pop((scenario, trial), None)
        self.verdicts[verdict] += 1
        if verdict != "skipped-budget":
            self.durations.append(duration_ms)

    def eta_ms(self) -> float | None:
        """Milliseconds left, by :func:`remaining_ms`; ``None`` before the plan or any result."""
        if self.total is None:
            return None
        done = sum(self.verdicts.values())
        now = self.now()
        running = [(now - since) * 1000 for since in self.running.values()]
        waiting = max(self.total - done - len(running), 0)
        return remaining_ms(
            finished=self.durations, running=running, waiting=waiting, jobs=self.jobs
        )

    def line(self) -> str:
        """``3/10 done · 2 running · 1 pass · 1 fail · 1 timeout · 0 error · 0 other · 0:41``."""
        elapsed = clock(self.now() - self.started)
        if self.total is None:
            return f"preparing the run · {elapsed}"
        done = sum(self.verdicts.values())
        named = [f"{self.verdicts[verdict]} {label}" for verdict, label in _NAMED]
        other = done - sum(self.verdicts[verdict] for verdict, _ in _NAMED)
        parts = [f"{done}/{self.total} done", f"{len(self.running)} running", *named]
        parts += [f"{other} other", elapsed]
        eta = self.eta_ms()
        if eta is not None and done < self.total:
            parts.append(f"~{clock(math.ceil(eta / 1000))} left")
        return " · ".join(parts)
