"""The sides of a run ``regrade`` rebuilds: the run itself, or each of its arms.

A run without arms has one side: the project's native outputs. A run with arms
(``meta.variants``) has one side per arm, each with the native outputs its trials
were assembled with (the project's, none, or another root's verified build),
found again from ``eval.variants`` by the arm's name; an arm whose build changed
since the run (its manifest digest differs) or that is no longer configured is
refused as ``regrade-task-changed``, because its stored work answers another task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._util.paths import display_path
from ..diagnostics import Diagnostic, DiagnosticError, error
from ..project import NativeOutputs, Suite
from ..project.variants import arm_key, arm_native, select_arms
from ..report import ArmInfo, RunReport, TrialResult

__all__ = ["Side", "regrade_sides"]


@dataclass(frozen=True, slots=True)
class Side:
    """One arm's trials of the run (or the run's own, without arms)."""

    arm: str | None
    """The arm's name (None: the run has no arms)."""
    control: bool
    native: NativeOutputs
    """The native outputs its trials were assembled with."""
    info: ArmInfo | None = None
    """The arm as the run recorded it."""

    def key(self, scenario: str) -> str:
        """How this side's trials of ``scenario`` are named in the run directory."""
        return arm_key(scenario, self.arm, control=self.control)

    def trials(self, report: RunReport, scenario: str) -> list[TrialResult]:
        """This side's trials of ``scenario`` in ``report``."""
        result = report.scenarios.get(scenario)
        if result is None:
            return []
        if self.control:
            return list(result.trials)
        arm = (result.arms or {}).get(self.arm or "")
        return list(arm.trials) if arm is not None else []


def regrade_sides(original: RunReport, suite: Suite, where: Path) -> list[Side]:
    """The run's sides, the control first, each with its trials' native outputs.

    Raises:
        DiagnosticError: ``regrade-task-changed`` for an arm no longer configured or
            whose harness build changed, ``variant-harness-not-verified`` for a path
            arm whose root is not a verified build (exit 2).
    """
    assert suite.native is not None
    recorded = original.meta.variants or []
    if not recorded:
        return [Side(arm=None, control=True, native=suite.native)]
    config = suite.project.eval
    configured = {v.name for v in config.variants or []}
    problems = [_gone(original, info, where) for info in recorded if info.name not in configured]
    if problems:
        raise DiagnosticError(problems)
    arms, _notes = select_arms(
        config.variants,
        tuple(info.name for info in recorded),
        project_root=suite.project.root,
        model=config.model,
        host_version=None,
    )
    by_name = {arm.name: arm for arm in arms}
    sides = []
    for info in sorted(recorded, key=lambda i: not i.control):
        native = arm_native(by_name[info.name], suite.native, config.host)
        if info.manifest_digest is not None and native.digest != info.manifest_digest:
            problems.append(_rebuilt(original, info, where))
        sides.append(Side(arm=info.name, control=info.control, native=native, info=info))
    if problems:
        raise DiagnosticError(problems)
    return sides


def _gone(original: RunReport, info: ArmInfo, where: Path) -> Diagnostic:
    return error(
        "regrade-task-changed",
        f'arm "{info.name}" of run {original.run_id} is no longer in eval.variants: '
        "regrade cannot tell which harness its trials were built with",
        source=display_path(where),
        next=f'restore the arm "{info.name}" in eval.variants (harness {info.harness!r})',
    )


def _rebuilt(original: RunReport, info: ArmInfo, where: Path) -> Diagnostic:
    return error(
        "regrade-task-changed",
        f'arm "{info.name}" changed since run {original.run_id} beyond its checks: '
        f"the native outputs of its harness ({info.harness}) are another build; its "
        "stored work answers another task",
        source=display_path(where),
        next="restore that build to regrade the run, or run the arms again (`atlante-eval run`)",
    )
