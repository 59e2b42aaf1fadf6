"""Behaviour deltas as data: why two sets of trials differ (``compare --json``'s ``behaviour``).

Computed by :mod:`atlante_eval.deltas` from both sides' reports and transcripts
(deterministic, no model); these are only the models, so a comparison can carry
them. See docs/compare.md for every delta and its test.
"""

from __future__ import annotations

from typing import Literal

from ..stats import ComparisonVerdict
from .models import OutputModel

__all__ = [
    "AlignOp",
    "AlignedStep",
    "BehaviourDeltas",
    "CheckChange",
    "CheckDelta",
    "DeltaTest",
    "EffortDelta",
    "EffortMetric",
    "PathDelta",
    "PathStep",
    "ScenarioBehaviour",
    "SideCounts",
    "TrialRef",
    "TypicalPath",
    "UsageDelta",
    "UsageItem",
]

#: What a usage delta counts: a skill, a subagent, a tool by its host name, or by kind.
UsageItem = Literal["skill", "subagent", "tool", "tool-kind"]
#: The per-trial amounts compared as effort.
EffortMetric = Literal["turns", "tokens", "cost", "durationMs"]
#: One step of an alignment: in both paths, replaced, only in BASE, only in HEAD.
AlignOp = Literal["same", "changed", "removed", "added"]
#: How a check's failures moved from BASE to HEAD.
CheckChange = Literal["started-failing", "stopped-failing", "fails-more", "fails-less", "same"]
#: The test behind a p-value.
DeltaTest = Literal["fisher-exact", "rank-sum-exact", "rank-sum-normal"]


class SideCounts(OutputModel):
    """How many of one side's trials the deltas rest on."""

    graded: int
    """Graded trials (executed minus infra-errors): the ones compared."""
    transcripts: int
    """Graded trials whose transcript could be read (usage and paths use only these)."""


class CheckDelta(OutputModel):
    """One check's failures on each side."""

    index: int
    """The check's position in the scenario document."""
    type: str
    """The check type."""
    base_failed: int
    """BASE trials where it did not pass (``fail`` or ``error``)."""
    base_graded: int
    """BASE trials whose checks ran."""
    head_failed: int
    """HEAD trials where it did not pass."""
    head_graded: int
    """HEAD trials whose checks ran."""
    change: CheckChange
    """``started-failing`` (never failed in BASE), ``stopped-failing`` (never in HEAD),
    ``fails-more``, ``fails-less`` or ``same`` (equal failure rates)."""
    p_value: float
    """Two-sided Fisher exact test of the failure rates."""
    summary: str
    """One line, e.g. ``check 2 file-contains now fails 5/6 (BASE 0/6)``."""


class UsageDelta(OutputModel):
    """How often one skill, subagent or tool was used on each side."""

    item: UsageItem
    """``skill``, ``subagent``, ``tool`` (by the host's tool name) or ``tool-kind``."""
    name: str
    """The skill, subagent or tool name, or the tool kind (``shell``, ``read``, ...)."""
    base_used: int
    """BASE trials (with a transcript) that used it at least once."""
    base_trials: int
    """BASE trials with a transcript."""
    head_used: int
    """HEAD trials that used it."""
    head_trials: int
    """HEAD trials with a transcript."""
    base_calls: float
    """Mean uses (calls, loads or delegations) per BASE trial."""
    head_calls: float
    """Mean uses per HEAD trial."""
    test: DeltaTest
    """Rank-sum test of the per-trial use counts (exact unless the samples are large)."""
    p_value: float
    """Two-sided p-value."""
    adjusted_p: float
    """``pValue`` Holm-adjusted over the scenario's usage deltas."""
    significant: bool
    """``adjustedP`` below the comparison's alpha."""
    summary: str
    """One line, e.g. ``skill api-conventions no longer used (6/6 → 1/6)``."""


class PathStep(OutputModel):
    """One normalised step of an action path: a tool call, a skill load or a delegation."""

    kind: str
    """``skill``, ``subagent``, or the tool's kind (``shell``, ``read``, ``write``, ...)."""
    name: str
    """The skill, subagent or tool name."""
    depth: int = 0
    """0 for the main agent; 1 inside a subagent, 2 inside a subagent's subagent, ..."""
    agent: str | None = None
    """The enclosing subagents, outermost first, joined by ``/`` (null for the main agent)."""
    count: int = 1
    """Consecutive repeats folded into this step (paths only; a trial's timeline keeps 1)."""
    detail: str | None = None
    """A short summary of the call's input (command, path, pattern), when it has one."""
    status: str | None = None
    """The call's status when not ``ok`` (``error``, ``denied``, ``pending``)."""
    t: int | None = None
    """Milliseconds since the session started (the first of folded repeats)."""


class TrialRef(OutputModel):
    """A trial given as an example."""

    i: int
    """Trial index."""
    verdict: str
    """Its verdict."""
    transcript: str | None
    """Its transcript, relative to its run directory."""


class TypicalPath(OutputModel):
    """One side's most common action path."""

    steps: list[PathStep]
    """The path's steps (consecutive repeats folded)."""
    followed: int
    """Trials whose path is exactly this one."""
    trials: int
    """Trials with a transcript."""
    chosen_by: Literal["most-common", "medoid"]
    """``most-common``: followed by more trials than any other path; ``medoid``: no path
    was more common, so the one closest (edit distance) to all the others."""
    examples: list[TrialRef]
    """Up to three trials that followed it."""


class AlignedStep(OutputModel):
    """One row of two aligned paths."""

    op: AlignOp
    """``same``, ``changed`` (substituted), ``removed`` (BASE only), ``added`` (HEAD only)."""
    base: PathStep | None
    """BASE's step (null when added)."""
    head: PathStep | None
    """HEAD's step (null when removed)."""


class PathDelta(OutputModel):
    """Both sides' typical paths, aligned step by step."""

    base: TypicalPath
    """BASE's typical path."""
    head: TypicalPath
    """HEAD's typical path."""
    alignment: list[AlignedStep]
    """The minimum edit-distance alignment of the two paths."""
    first_divergence: int | None
    """Index in ``alignment`` of the first row that is not ``same`` (null: identical)."""
    distance: int
    """Edit distance between the two paths (insertions, deletions, substitutions)."""
    base_following: int
    """BASE trials that followed BASE's typical path (= ``base.followed``)."""
    head_following: int
    """HEAD trials that followed BASE's typical path."""
    p_value: float
    """Two-sided Fisher exact test of those two shares."""


class EffortDelta(OutputModel):
    """One amount per trial on each side."""

    metric: EffortMetric
    """``turns``, ``tokens``, ``cost`` (USD) or ``durationMs``."""
    base_mean: float | None
    """Mean per BASE trial that recorded it (null: none did)."""
    head_mean: float | None
    """Mean per HEAD trial that recorded it."""
    base_trials: int
    """BASE trials that recorded it."""
    head_trials: int
    """HEAD trials that recorded it."""
    difference: float | None
    """``headMean - baseMean``."""
    relative: float | None
    """``difference / baseMean`` (null when BASE's mean is 0 or missing)."""
    test: DeltaTest | None
    """Rank-sum test of the per-trial amounts (null when a side has none)."""
    p_value: float | None
    """Two-sided p-value."""


class ScenarioBehaviour(OutputModel):
    """Behaviour deltas of one scenario (or of two arms)."""

    verdict: ComparisonVerdict | None
    """The pass-rate verdict the deltas explain, when there is one."""
    base: SideCounts
    """What BASE's deltas rest on."""
    head: SideCounts
    """What HEAD's deltas rest on."""
    checks: list[CheckDelta]
    """Every check that failed on either side, in check order."""
    usage: list[UsageDelta] | None
    """Skills, subagents and tools, most significant first (null without transcripts)."""
    paths: PathDelta | None
    """Typical paths and where they diverge (null without transcripts)."""
    effort: list[EffortDelta]
    """Turns, tokens, cost and duration per trial."""
    probable_cause: str | None
    """For a regressed or improved scenario: the most significant deltas in one line.
    An association observed in these trials, not proof of what caused the change."""
    notes: list[str]
    """What the deltas could not use, e.g. transcripts absent from a side."""


class BehaviourDeltas(OutputModel):
    """Behaviour deltas of every scenario in both runs."""

    alpha: float
    """Significance level a usage delta's adjusted p-value is judged at."""
    base_dir: str | None
    """BASE's run directory, absolute (transcripts are read from its ``trials/``; bytes
    that are not UTF-8 shown as ``\\xNN``)."""
    head_dir: str | None
    """HEAD's run directory, absolute."""
    scenarios: dict[str, ScenarioBehaviour]
    """Per scenario in both runs, by name (sorted)."""
