"""The adaptive stopping rule by simulation, and the exact power of a one-look ``compare``.

:func:`simulate` replays the rule of :mod:`atlante_eval.stats.sequential` (the same
:func:`~atlante_eval.stats.sequential.assess` an adaptive run calls) over many seeded
runs with known pass probabilities: an independent check of the exact figures of
:mod:`.operating`, which the tests compare. :func:`fixed_power` is the exact power
of a one-look ``compare`` at a fixed trial count, and :func:`fixed_trials_for_power`
the smallest fixed count that matches a given power.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .proportions import ComparisonVerdict, compare_proportions, verdict
from .sequential import Look, SequentialDesign, assess
from .two_sample import assess_arm

__all__ = ["Simulation", "fixed_power", "fixed_trials_for_power", "simulate", "simulate_arms"]


@dataclass(frozen=True, slots=True)
class Simulation:
    """What many simulated adaptive comparisons decided, and at what cost."""

    runs: int
    """Simulated runs."""
    decisions: dict[str, int]
    """Runs per final decision (``undecidable``: stopped for futility)."""
    mean_trials: float
    """Mean HEAD trials used per run."""

    def rate(self, *verdicts: str) -> float:
        """Share of runs that ended in one of ``verdicts``."""
        return sum(self.decisions.get(v, 0) for v in verdicts) / self.runs


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(1 for _ in range(n) if rng.random() < p)


def _one_look(design: SequentialDesign) -> SequentialDesign:
    """``design`` calibrated as if its last look were its only one (no allowance for the others)."""
    return SequentialDesign(
        alpha=design.alpha, margin=design.margin, looks=(design.looks[-1],), family=design.family
    )


def simulate(
    design: SequentialDesign,
    *,
    base_rate: float,
    head_rate: float,
    base_trials: int,
    runs: int,
    seed: int,
    naive: bool = False,
) -> Simulation:
    """Run the stopping rule ``runs`` times: a fresh baseline, then HEAD look by look.

    With ``naive``, each look is judged by a design calibrated for one look only (no
    allowance for the others): optional stopping then inflates its error rate.
    """
    judge = _one_look(design) if naive else design

    def start(rng: random.Random) -> Step:
        base, passed = _binomial(rng, base_trials, base_rate), 0

        def step(more: int, look: int) -> Look:
            nonlocal passed
            passed += _binomial(rng, more, head_rate)
            return assess(
                judge,
                base_passed=base,
                base_graded=base_trials,
                passed=passed,
                graded=look,
                look=look,
            )

        return step

    return _replay(design.looks, runs=runs, seed=seed, start=start)


def simulate_arms(
    design: SequentialDesign,
    *,
    control_rate: float,
    arm_rate: float,
    runs: int,
    seed: int,
    naive: bool = False,
) -> Simulation:
    """Run the arms' stopping rule ``runs`` times: control and arm grow look by look.

    ``mean_trials`` counts the arm's trials (the control has as many). With
    ``naive``, each look is judged by a design calibrated for one look only.
    """
    judge = _one_look(design) if naive else design

    def start(rng: random.Random) -> Step:
        control = passed = 0

        def step(more: int, look: int) -> Look:
            nonlocal control, passed
            control += _binomial(rng, more, control_rate)
            passed += _binomial(rng, more, arm_rate)
            return assess_arm(
                judge,
                control_passed=control,
                control_graded=look,
                passed=passed,
                graded=look,
                look=look,
            )

        return step

    return _replay(design.looks, runs=runs, seed=seed, start=start)


#: One simulated run's next look: ``(trials added to each side, planned look)``.
Step = Callable[[int, int], Look]


def _replay(
    looks: tuple[int, ...], *, runs: int, seed: int, start: Callable[[random.Random], Step]
) -> Simulation:
    """Replay ``runs`` runs look by look (``start`` draws what a run begins with and
    returns its steps) until each stops; tally the outcomes and the trials used."""
    rng = random.Random(seed)  # noqa: S311 - a seeded simulation, not a secret
    decisions: Counter[str] = Counter()
    used = 0
    for _ in range(runs):
        step = start(rng)
        done = 0
        outcome = "inconclusive"
        for look in looks:
            judged = step(look - done, look)
            done = look
            outcome = "undecidable" if judged.stop == "undecidable" else judged.verdict
            if judged.stop is not None:
                break
        decisions[outcome] += 1
        used += done
    return Simulation(runs=runs, decisions=dict(decisions), mean_trials=used / runs)


def _pmf(n: int, p: float) -> list[float]:
    return [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]


def fixed_power(
    *,
    base_rate: float,
    head_rate: float,
    base_trials: int,
    head_trials: int,
    target: ComparisonVerdict,
    alpha: float,
    margin: float,
    family: int = 1,
) -> float:
    """Exact chance that one ``compare`` at ``head_trials`` reaches ``target``.

    The one-look rule is ``compare``'s: Fisher p times ``family`` below ``alpha``
    and the Newcombe interval at ``1 - alpha`` (the Bonferroni bound of Holm).
    """
    total = 0.0
    base_pmf, head_pmf = _pmf(base_trials, base_rate), _pmf(head_trials, head_rate)
    for s1, w1 in enumerate(base_pmf):
        if w1 < 1e-12:
            continue
        for s2, w2 in enumerate(head_pmf):
            if w2 < 1e-12:
                continue
            comparison = compare_proportions(s1, base_trials, s2, head_trials, confidence=1 - alpha)
            adjusted = min(1.0, comparison.p_value * family)
            if verdict(comparison, adjusted_p=adjusted, alpha=alpha, margin=margin) == target:
                total += w1 * w2
    return total


def fixed_trials_for_power(
    power: float,
    *,
    base_rate: float,
    head_rate: float,
    base_trials: int,
    target: ComparisonVerdict,
    alpha: float,
    margin: float,
    family: int = 1,
    cap: int = 200,
) -> int | None:
    """Smallest fixed HEAD trial count whose one-look power reaches ``power``; None past ``cap``."""
    for n in range(1, cap + 1):
        reached = fixed_power(
            base_rate=base_rate,
            head_rate=head_rate,
            base_trials=base_trials,
            head_trials=n,
            target=target,
            alpha=alpha,
            margin=margin,
            family=family,
        )
        if reached >= power:
            return n
    return None
