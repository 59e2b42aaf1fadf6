"""Path deltas: each side's typical action path, and where the two first diverge.

A trial's path is its steps (:mod:`.steps`) with consecutive repeats folded. A
side's typical path is the one most of its trials followed exactly; when no path
is more common than another (small or varied samples), it is the medoid among the
most common ones: the path with the smallest total edit distance to every trial's
path (ties: the lowest trial index). The two typical paths are aligned by edit
distance (:mod:`.align`). How many trials of each side followed BASE's typical
path is compared with the Fisher exact test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..report import TrialResult
from ..report.behaviour import PathDelta, PathStep, TrialRef, TypicalPath
from ..stats.proportions import fisher_exact_two_sided
from .align import align, edit_distance, first_divergence
from .steps import StepKey, step_key

__all__ = ["EXAMPLES", "MAX_PATH_STEPS", "MEDOID_CANDIDATES", "TrialPath", "path_delta"]

#: Most steps of a path compared (a longer path is cut there).
MAX_PATH_STEPS = 400
#: Most candidate paths weighed when choosing a medoid.
MEDOID_CANDIDATES = 30
#: Example trials named per typical path.
EXAMPLES = 3

#: A trial and its folded path.
TrialPath = tuple[TrialResult, Sequence[PathStep]]


def _keys(steps: Sequence[PathStep]) -> tuple[StepKey, ...]:
    return tuple(step_key(step) for step in steps[:MAX_PATH_STEPS])


def typical_path(paths: Sequence[TrialPath], files: Mapping[int, str] | None = None) -> TypicalPath:
    """The most common path of ``paths`` (the medoid among ties); ``paths`` is not empty.

    ``files`` names each trial's transcript (relative to its run directory) for the
    examples.
    """
    groups: dict[tuple[StepKey, ...], list[TrialPath]] = {}
    for trial, steps in sorted(paths, key=lambda pair: pair[0].i):
        groups.setdefault(_keys(steps), []).append((trial, steps))
    most = max(len(members) for members in groups.values())
    candidates = [key for key, members in groups.items() if len(members) == most]
    chosen = candidates[0]
    if len(candidates) > 1:
        chosen = _medoid(candidates[:MEDOID_CANDIDATES], groups)
    members = groups[chosen]
    return TypicalPath(
        steps=list(members[0][1][:MAX_PATH_STEPS]),
        followed=len(members),
        trials=len(paths),
        chosen_by="most-common" if most > 1 or len(groups) == 1 else "medoid",
        examples=[
            TrialRef(i=trial.i, verdict=trial.verdict, transcript=(files or {}).get(trial.i))
            for trial, _ in members[:EXAMPLES]
        ],
    )


def _medoid(
    candidates: Sequence[tuple[StepKey, ...]], groups: dict[tuple[StepKey, ...], list[TrialPath]]
) -> tuple[StepKey, ...]:
    """The candidate with the smallest total edit distance to every trial's path."""
    codes: dict[StepKey, int] = {}
    coded = {key: [codes.setdefault(step, len(codes)) for step in key] for key in groups}
    distances: dict[tuple[int, int], int] = {}
    order = {key: index for index, key in enumerate(groups)}

    def distance(one: tuple[StepKey, ...], other: tuple[StepKey, ...]) -> int:
        pair = (min(order[one], order[other]), max(order[one], order[other]))
        if pair not in distances:
            distances[pair] = edit_distance(coded[one], coded[other])
        return distances[pair]

    totals = {
        key: sum(distance(key, other) * len(members) for other, members in groups.items())
        for key in candidates
    }
    return min(candidates, key=lambda key: (totals[key], groups[key][0][0].i))


def path_delta(
    base: Sequence[TrialPath],
    head: Sequence[TrialPath],
    *,
    files: tuple[Mapping[int, str], Mapping[int, str]] = ({}, {}),
) -> PathDelta | None:
    """Both sides' typical paths aligned (``None`` when a side has no path).

    ``files``: BASE's and HEAD's transcript files by trial index, for the examples.
    """
    if not base or not head:
        return None
    old, new = typical_path(base, files[0]), typical_path(head, files[1])
    rows = align(old.steps, new.steps)
    target = _keys(old.steps)
    following = sum(1 for _, steps in head if _keys(steps) == target)
    return PathDelta(
        base=old,
        head=new,
        alignment=rows,
        first_divergence=first_divergence(rows),
        distance=sum(1 for row in rows if row.op != "same"),
        base_following=old.followed,
        head_following=following,
        p_value=fisher_exact_two_sided(old.followed, len(base), following, len(head)),
    )
