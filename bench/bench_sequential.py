"""Operating characteristics of adaptive runs (``run --until-decided``), by simulation.

Replays the stopping rule of :mod:`atlante_eval.stats.sequential` over many seeded
simulated runs (a baseline of ``BASE_TRIALS`` trials, then HEAD look by look up
to 50 trials) and prints, per case: how often each decision was reached, the
mean HEAD trials used, and for a true change the smallest fixed trial count
whose one-look ``compare`` has the same power (exact binomial sums). The
figures in docs/statistics.md ("Adaptive runs") come from this session:
``python -m bench sequential``.
"""

from __future__ import annotations

from atlante_eval.stats.sequential import SequentialDesign, look_schedule
from atlante_eval.stats.simulation import Simulation, fixed_trials_for_power, simulate

#: Simulated runs per case.
RUNS = 4000
#: Trials of the simulated baseline.
BASE_TRIALS = 20
ALPHA = 0.05
MARGIN = 0.1
#: (label, BASE rate, HEAD rate, first look, family size)
CASES = (
    ("no change 50%", 0.5, 0.5, 4, 1),
    ("no change 90%", 0.9, 0.9, 4, 1),
    ("no change 50%, family of 5", 0.5, 0.5, 4, 5),
    ("flip 100% -> 0%", 1.0, 0.0, 4, 1),
    ("90% -> 30%", 0.9, 0.3, 4, 1),
    ("90% -> 50%", 0.9, 0.5, 4, 1),
    ("80% -> 50%", 0.8, 0.5, 4, 1),
)


def _row(label: str, result: Simulation, naive: Simulation, fixed: int | None) -> str:
    wrong = result.rate("improved", "regressed")
    return (
        f"{label:28} improved {result.rate('improved'):6.3f} regressed "
        f"{result.rate('regressed'):6.3f} unchanged {result.rate('unchanged'):6.3f} "
        f"mean trials {result.mean_trials:5.1f} fixed same power {fixed!s:>4} "
        f"| changes {wrong:6.3f} naive {naive.rate('improved', 'regressed'):6.3f}"
    )


def main() -> None:
    """Print one line per case."""
    print(
        f"{RUNS} runs per case, baseline {BASE_TRIALS} trials, alpha {ALPHA}, margin {MARGIN}, "
        f"looks {look_schedule(4, 50)}"
    )
    for seed, (label, base, head, first, family) in enumerate(CASES):
        design = SequentialDesign(
            alpha=ALPHA, margin=MARGIN, looks=look_schedule(first, 50), family=family
        )
        common = {"base_rate": base, "head_rate": head, "base_trials": BASE_TRIALS}
        result = simulate(design, **common, runs=RUNS, seed=seed)
        naive = simulate(design, **common, runs=RUNS, seed=seed, naive=True)
        fixed = None
        if base != head:
            target = "regressed" if head < base else "improved"
            fixed = fixed_trials_for_power(
                result.rate(target),
                **common,
                target=target,
                alpha=ALPHA,
                margin=MARGIN,
                family=family,
            )
        print(_row(label, result, naive, fixed))
