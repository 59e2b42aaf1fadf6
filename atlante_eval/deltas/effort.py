"""Effort deltas: turns, tokens, cost and duration per trial on each side.

Tokens, cost and duration come from the report (``tokens``, ``cost``,
``durationMs``); turns from the trial's ``activity`` or, failing that, its
transcript (the host's own count, else its model steps). Each metric is averaged
over the trials that recorded it and compared with the rank-sum test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..report import TrialResult
from ..report.behaviour import EffortDelta, EffortMetric
from ..stats.proportions import mean
from ..stats.ranks import rank_sum_test
from ..transcript import ResultEntry, TranscriptEntry, UsageEntry

__all__ = ["effort_deltas", "transcript_turns"]

Transcripts = Mapping[int, Sequence[TranscriptEntry]]


def transcript_turns(entries: Sequence[TranscriptEntry]) -> int:
    """Turns a transcript shows: the host's counts summed, else its usage snapshots."""
    counted = [e.turns for e in entries if isinstance(e, ResultEntry) and e.turns is not None]
    if counted:
        return sum(counted)
    return sum(1 for e in entries if isinstance(e, UsageEntry))


def _turns(trial: TrialResult, transcripts: Transcripts) -> float | None:
    if trial.activity is not None:
        return trial.activity.turns
    entries = transcripts.get(trial.i)
    return transcript_turns(entries) if entries is not None else None


_METRICS: dict[EffortMetric, Callable[[TrialResult, Transcripts], float | None]] = {
    "turns": _turns,
    "tokens": lambda trial, _: trial.tokens,
    "cost": lambda trial, _: trial.cost,
    "durationMs": lambda trial, _: trial.duration_ms,
}


def _recorded(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def effort_deltas(
    base: Sequence[TrialResult],
    head: Sequence[TrialResult],
    *,
    base_transcripts: Transcripts,
    head_transcripts: Transcripts,
) -> list[EffortDelta]:
    """Each metric that some trial of either side recorded."""
    rows = []
    for metric, read in _METRICS.items():
        before = _recorded(read(t, base_transcripts) for t in base)
        after = _recorded(read(t, head_transcripts) for t in head)
        if not before and not after:
            continue
        old = mean(before) if before else None
        new = mean(after) if after else None
        difference = new - old if old is not None and new is not None else None
        test = rank_sum_test(before, after) if before and after else None
        rows.append(
            EffortDelta(
                metric=metric,
                base_mean=old,
                head_mean=new,
                base_trials=len(before),
                head_trials=len(after),
                difference=difference,
                relative=difference / old if difference is not None and old else None,
                test=None
                if test is None
                else "rank-sum-exact"
                if test.method == "exact"
                else "rank-sum-normal",
                p_value=test.p_value if test is not None else None,
            )
        )
    return rows
