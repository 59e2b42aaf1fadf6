"""The trial plan: every selected scenario times its trial count, in a fixed order.

The order is the reference's sequential order: scenarios sorted by name, then
trial index. Whatever order trials finish in, the report lists them in plan order.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..diagnostics import DiagnosticError, error
from ..report import MetaConfig
from .config import MAX_TRIALS, Budget
from .scenarios import CHECK_TIMEOUT_DEFAULT_MS, SETUP_TIMEOUT_MS, Scenario
from .variants import Arm, arm_key

__all__ = [
    "Plan",
    "PlannedTrial",
    "budget_skips",
    "make_plan",
    "parse_trials",
    "resolve_budget",
]


@dataclass(frozen=True, slots=True)
class PlannedTrial:
    """One trial of the plan."""

    position: int
    """Index in the whole plan (0-based)."""
    scenario: Scenario
    index: int
    """Trial index within the scenario (0-based)."""
    timeout_ms: int
    """Host-session timeout for this trial."""
    variant: str | None = None
    """The arm this trial runs (``None``: the run has no arms)."""
    control: bool = True
    """Whether the arm is the control (a run without arms is its own control)."""

    @property
    def key(self) -> str:
        """The key of this scenario's trials of this arm (journal, run files, fingerprints):
        the scenario name for the control arm, ``scenario@arm`` for the others."""
        return arm_key(self.scenario.name, self.variant, control=self.control)


@dataclass(frozen=True, slots=True)
class Plan:
    """The ordered trials of a run and the resolved budget."""

    trials: tuple[PlannedTrial, ...]
    config: MetaConfig
    scenarios: tuple[Scenario, ...]
    arms: tuple[Arm, ...] = ()
    """The run's arms (empty: one harness)."""
    seed: int | None = None
    """The seed of the arms' order within each block (``None``: no arms)."""


def parse_trials(raw: str | int | None) -> int | None:
    """Validate a ``--trials`` value: a plain decimal integer from 1 to 50.

    Raises:
        DiagnosticError: ``invalid-trials`` (exit 2).
    """
    if raw is None:
        return None
    text = str(raw)
    value = None if isinstance(raw, bool) or not text.isascii() or not text.isdigit() else int(text)
    if value is None or not 1 <= value <= MAX_TRIALS:
        raise DiagnosticError(
            [
                error(
                    "invalid-trials",
                    f"--trials must be an integer from 1 to {MAX_TRIALS}, got {text}",
                    expected=f"an integer from 1 to {MAX_TRIALS}",
                )
            ]
        )
    return value


def resolve_budget(budget: Budget, *, trials: int | None = None) -> MetaConfig:
    """Resolve the run budget: the override, else the configured value, else the default."""
    return MetaConfig(
        trials=trials if trials is not None else budget.trials,
        timeout_ms=budget.timeout_ms,
        max_sessions=budget.max_sessions,
        max_tokens=budget.max_tokens,
        setup_timeout_ms=SETUP_TIMEOUT_MS,
        check_timeout_default_ms=CHECK_TIMEOUT_DEFAULT_MS,
    )


def make_plan(
    scenarios: tuple[Scenario, ...],
    config: MetaConfig,
    *,
    arms: Sequence[Arm] = (),
    seed: int | None = None,
) -> Plan:
    """Return the plan for ``scenarios`` (sorted by name) under ``config``.

    With ``arms``, each scenario's trials come in randomized blocks: block *i* holds
    trial *i* of every arm, in an order shuffled by ``seed`` (so time-varying
    provider behaviour hits every arm alike).
    """
    ordered = tuple(sorted(scenarios, key=lambda s: s.name))
    trials: list[PlannedTrial] = []
    for scenario in ordered:
        budget = scenario.document.budget
        timeout_ms = budget.timeout_ms if budget is not None else config.timeout_ms
        for index in range(config.trials):
            for arm in _block(arms, seed, scenario.name, index):
                trials.append(
                    PlannedTrial(
                        position=len(trials),
                        scenario=scenario,
                        index=index,
                        timeout_ms=timeout_ms,
                        variant=arm.name if arm is not None else None,
                        control=arm.control if arm is not None else True,
                    )
                )
    return Plan(
        trials=tuple(trials),
        config=config,
        scenarios=ordered,
        arms=tuple(arms),
        seed=seed if arms else None,
    )


def _block(arms: Sequence[Arm], seed: int | None, scenario: str, index: int) -> list[Arm | None]:
    """The arms of one block in their shuffled order (``[None]`` for a run without arms)."""
    if not arms:
        return [None]
    block: list[Arm | None] = list(arms)
    random.Random(f"{seed}:{scenario}:{index}").shuffle(block)  # noqa: S311 - an order, not a secret
    return block


def budget_skips(plan: Plan, positions: Sequence[int], decided: Collection[int] = ()) -> int:
    """How many trials at ``positions`` ``maxSessions`` will skip if every trial starts a session.

    Trial *k* of the plan is skipped when the trials before it took ``maxSessions``
    sessions; trials in ``decided`` (reused by ``--resume``) are never skipped. A
    trial whose sandbox cannot be assembled takes no session, so the real count
    can only be lower.
    """
    limit = plan.config.max_sessions
    return sum(1 for p in positions if p not in decided and p >= limit)
