"""The report's models of a run with arms (``eval.variants``; additive, docs/variants.md).

``meta.variants`` lists the arms (:class:`ArmInfo`); ``uplift`` (:class:`UpliftRecord`)
compares every other arm with the control, per scenario and overall, with the
statistics and verdicts of ``compare``, and sums each arm's tokens and cost.
"""

from __future__ import annotations

from typing import Literal

from .base import OutputModel

__all__ = ["ArmInfo", "ArmTotals", "UpliftArm", "UpliftComparison", "UpliftRecord"]

UpliftVerdict = Literal["improved", "regressed", "unchanged", "inconclusive"]


class ArmInfo(OutputModel):
    """One arm of the run, as it ran."""

    name: str
    """The arm's name (``TrialResult.variant`` of its trials)."""
    control: bool
    """Whether it is the control arm: the one the report's seed fields show."""
    model: str | None = None
    """The model its trials used (absent: the host's default)."""
    host_version: str | None = None
    """The probed version of its host CLI."""
    harness: str
    """``project``, ``none``, or the path of the other project root, as configured."""
    manifest_digest: str | None = None
    """Digest of the native outputs it installed (its harness revision)."""
    scenario_key: str | None = None
    """How its trials are named in the run directory and journal: absent for the control
    (``trials/<scenario>/<i>``), ``@<arm>`` for the others (``trials/<scenario>@<arm>/<i>``)."""


class ArmTotals(OutputModel):
    """One arm's trials over every scenario: pass rate, tokens and cost."""

    trials: int
    """Trials of the arm in the report."""
    graded: int
    """Executed trials minus infra-errors."""
    passed: int
    """Trials that passed."""
    pass_rate: float
    """``passed / graded`` (0 when nothing was graded)."""
    tokens: int
    """Tokens its trials reported."""
    cost: float
    """Cost its trials reported (USD)."""
    cost_per_pass: float | None = None
    """``cost / passed`` (absent when nothing passed)."""


class UpliftComparison(OutputModel):
    """An arm against the control for one scenario (or overall, stratified by scenario)."""

    control_passed: int
    """The control's passing trials."""
    control_graded: int
    """The control's graded trials."""
    control_rate: float
    """The control's pass rate (overall: as the stratified difference weighs it)."""
    arm_passed: int
    """The arm's passing trials."""
    arm_graded: int
    """The arm's graded trials."""
    arm_rate: float
    """The arm's pass rate."""
    difference: float
    """``armRate - controlRate``: positive means the arm passes more often (the uplift)."""
    difference_interval: tuple[float, float]
    """Newcombe interval of the difference at ``1 - alpha`` (overall: MOVER)."""
    p_value: float
    """Two-sided Fisher exact p-value (overall: stratified)."""
    adjusted_p: float
    """``pValue`` adjusted over the whole uplift table (every arm, scenario and overall)."""
    verdict: UpliftVerdict
    """What ``compare`` would say with that adjusted p-value."""


class UpliftArm(OutputModel):
    """One non-control arm against the control."""

    scenarios: dict[str, UpliftComparison]
    """Per scenario graded in both arms, by name."""
    overall: UpliftComparison | None = None
    """Stratified over those scenarios (absent when there are none)."""


class UpliftRecord(OutputModel):
    """Every non-control arm against the control, and every arm's totals."""

    control: str
    """The control arm."""
    alpha: float
    """Significance level; intervals are at ``1 - alpha``."""
    margin: float
    """Largest change counted as unchanged."""
    adjust: Literal["holm"]
    """Multiple-comparison adjustment, over the whole table."""
    family_size: int
    """Tests adjusted together."""
    arms: dict[str, UpliftArm]
    """Per non-control arm."""
    totals: dict[str, ArmTotals]
    """Per arm (the control too): trials, pass rate, tokens, cost, cost per passing trial."""
