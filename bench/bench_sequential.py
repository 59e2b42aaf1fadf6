"""Operating characteristics of adaptive runs (``run --until-decided``), computed exactly.

For the default design (alpha 0.05, margin 0.1, looks from 4 to 50 trials) and the
documented grid (a baseline of 10, 20 or 40 trials; 1, 5 or 20 scenarios, so a
family of 1, 6 or 21 tests as ``compare`` counts it; common pass rates 0.1 to 1.0),
prints the exact worst-case family-wise error over the common pass rate, the
expected HEAD trials per scenario with no change, and power and expected trials for
0.9 -> 0.3, 0.9 -> 0.6 and 0.8 -> 0.7; each beside the same figure for the earlier
design (Bonferroni over the looks). Every figure enumerates every baseline and
HEAD outcome (:mod:`atlante_eval.stats.operating`): nothing is simulated. The
figures in docs/statistics.md ("Adaptive runs") come from this session:
``python -m bench sequential``.
"""

from __future__ import annotations

from atlante_eval.stats.exact import Outcomes, binomial_pmf
from atlante_eval.stats.futility import FUTILITY
from atlante_eval.stats.operating import (
    bonferroni_outcomes,
    change_error,
    design_outcomes,
    family_error,
)
from atlante_eval.stats.sequential import SequentialDesign, boundaries, look_schedule

ALPHA = 0.05
MARGIN = 0.1
LOOKS = look_schedule(4, 50)
BASELINES = (10, 20, 40)
SCENARIOS = (1, 5, 20)
RATES = tuple(round(0.1 * i, 1) for i in range(1, 11))
DROPS = ((0.9, 0.3), (0.9, 0.6), (0.8, 0.7))


def _design(scenarios: int) -> SequentialDesign:
    family = scenarios + (1 if scenarios >= 2 else 0)
    return SequentialDesign(alpha=ALPHA, margin=MARGIN, looks=LOOKS, family=family)


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _nightly(outcomes: Outcomes) -> float:
    """18 unchanged scenarios at 90% plus drops 0.9 -> 0.3 and 0.9 -> 0.6."""
    return (
        18 * outcomes.expected_trials(0.9, 0.9)
        + outcomes.expected_trials(0.9, 0.3)
        + outcomes.expected_trials(0.9, 0.6)
    )


def _case(baseline: int, scenarios: int) -> list[str]:
    design = _design(scenarios)
    bounds = boundaries(design, baseline)
    new, old = design_outcomes(design, baseline), bonferroni_outcomes(design, baseline)
    (new_error, at), (old_error, old_at) = change_error(new), change_error(old)
    lines = [
        f"baseline {baseline} trials, {scenarios} scenario{'s' if scenarios > 1 else ''} "
        f"(family {design.family}): critical p {bounds.critical_p:.5f} (was "
        f"{ALPHA / len(LOOKS) / design.family:.5f}), look confidence "
        f"{bounds.look_confidence:.4f}",
        f"  worst-case family-wise error {_pct(family_error(new_error, scenarios))} "
        f"(per scenario {_pct(new_error)} at p={at:.2f}); was "
        f"{_pct(family_error(old_error, scenarios))} (per scenario {_pct(old_error)} "
        f"at p={old_at:.2f})",
        "  no change, expected HEAD trials at rate " + " ".join(f"{rate:>4}" for rate in RATES),
        "                                   now "
        + " ".join(f"{new.expected_trials(r, r):4.1f}" for r in RATES),
        "                                   was "
        + " ".join(f"{old.expected_trials(r, r):4.1f}" for r in RATES),
    ]
    for base, head in DROPS:
        found, before = new.chances(base, head), old.chances(base, head)
        lines.append(
            f"  {base} -> {head}: regressed {_pct(found['regressed'])} in "
            f"{new.expected_trials(base, head):.1f} trials; was {_pct(before['regressed'])} "
            f"in {old.expected_trials(base, head):.1f}"
        )
    if scenarios == 20:
        lines.append(
            f"  nightly (18 unchanged at 90%, 0.9 -> 0.3, 0.9 -> 0.6): "
            f"{_nightly(new):.0f} expected HEAD trials; was {_nightly(old):.0f}"
        )
    return lines


def _reused(baseline: int, scenarios: int, rate: float) -> str:
    """Wrong-change chance given the baseline's own count, when it is reused night after night.

    Over the baseline counts that happen 90% of the time at ``rate`` (5% cut from each
    tail), the chance that a HEAD with the same true rate is called changed.
    """
    design = _design(scenarios)
    outcomes = design_outcomes(design, baseline)
    weights = binomial_pmf(baseline, rate)
    low = high = 0
    below = 0.0
    for count, weight in enumerate(weights):
        if below + weight > 0.05 and not low:
            low = count
        below += weight
        if below >= 0.95:
            high = count
            break
    errors = [
        sum(outcomes.given_baseline(count, rate)[code] for code in ("improved", "regressed"))
        for count in range(low, high + 1)
    ]
    unconditional = outcomes.chances(rate, rate)
    return (
        f"  reused baseline {baseline} trials at {rate:.0%}, {scenarios} scenario"
        f"{'s' if scenarios > 1 else ''}: wrong change {_pct(min(errors))}-{_pct(max(errors))} "
        f"given the baseline's count ({low}-{high} of {baseline}); "
        f"{_pct(unconditional['improved'] + unconditional['regressed'])} over fresh baselines"
    )


def main() -> None:
    """Print the grid, one block per baseline size and number of scenarios."""
    print(
        f"default design: alpha {ALPHA}, margin {MARGIN}, looks {LOOKS}, futility "
        f"{FUTILITY:.0%}; earlier design: Bonferroni over the {len(LOOKS)} looks"
    )
    for baseline in BASELINES:
        for scenarios in SCENARIOS:
            print("\n".join(_case(baseline, scenarios)))
    print("a baseline reused night after night (its count fixed by its luck):")
    for baseline in (20, 40):
        for scenarios in (1, 20):
            for rate in (0.5, 0.9):
                print(_reused(baseline, scenarios, rate))
