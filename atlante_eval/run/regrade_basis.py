"""What ``regrade`` checks before it publishes anything, and what each trial reads.

:func:`select_scenarios` pairs the run's scenarios with the project's;
:func:`load_states` reads each graded trial's final state (a damaged or missing
one makes that trial ``unavailable``, not the regrade fail); :func:`check_tasks`
refuses a scenario whose task changed since the run (``regrade-task-changed``):
its fixture, native outputs, prompt, agent or setup. Only the checks may differ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._util.paths import display_path
from ..checks import NO_TRANSCRIPT, read_transcript
from ..diagnostics import Diagnostic, DiagnosticError, error
from ..hosts.base import secret_values
from ..project import BEHAVIOUR_CHECK_TAGS, Scenario, Suite
from ..project.fingerprint import fixture_digest
from ..report import RunFiles, RunReport
from ..report.final_state import FinalState, ManifestError, TaskBasis
from ..report.state_files import read_final_state
from ..transcript import LOG_CHARS, Redactor, TranscriptEntry, cap_text
from ..trial.finalstate import task_basis
from .regrade_sides import Side

__all__ = [
    "Loaded",
    "OutputKeeper",
    "check_tasks",
    "load_states",
    "no_state_error",
    "scenario_digests",
    "select_scenarios",
    "selftest_refusal",
    "trial_outputs",
]

#: A trial's final state, or why it cannot be read.
Loaded = FinalState | str

_PARTS = {
    "fixture": "its fixture's files",
    "native": "the native outputs (the harness build)",
    "prompt": "its prompt",
    "agent": "its task.agent",
    "setup": "its task.setup",
}


def select_scenarios(
    original: RunReport, suite: Suite, where: Path, *, filtered: bool
) -> list[Scenario]:
    """The project's scenarios to regrade: those of the run that ``suite`` selected.

    Without a ``--scenario`` filter every scenario of the run must be in the project.

    Raises:
        DiagnosticError: ``regrade-scenario-missing`` (exit 2) when a scenario of the
            run is not in the project, or when nothing is left to regrade.
    """
    by_name = {scenario.name: scenario for scenario in suite.scenarios}
    missing = [] if filtered else [name for name in original.scenarios if name not in by_name]
    chosen = [by_name[name] for name in original.scenarios if name in by_name]
    if missing or not chosen:
        message = (
            f"run {original.run_id} has scenario(s) the project does not run: " + ", ".join(missing)
            if missing
            else f"run {original.run_id} has none of the selected scenarios "
            f"({', '.join(by_name) or 'none'})"
        )
        raise DiagnosticError(
            [
                error(
                    "regrade-scenario-missing",
                    message,
                    source=display_path(where),
                    next="restore the scenario documents, or choose the others with --scenario",
                )
            ]
        )
    return chosen


def load_states(
    run: RunFiles, original: RunReport, selected: Sequence[Scenario], sides: Sequence[Side]
) -> dict[tuple[str, int], Loaded]:
    """Each graded trial's final state, or why it cannot be used, by ``(key, index)``."""
    states: dict[tuple[str, int], Loaded] = {}
    for scenario in selected:
        for side in sides:
            key = side.key(scenario.name)
            for trial in side.trials(original, scenario.name):
                ref = trial.final_state
                if trial.checks is None:
                    continue
                if ref is None:
                    states[(key, trial.i)] = "no final state was stored for this trial"
                    continue
                if not ref.complete:
                    states[(key, trial.i)] = (
                        f"its final state was not stored whole ({ref.reason or 'entries omitted'})"
                    )
                    continue
                try:
                    states[(key, trial.i)] = read_final_state(run, ref)
                except ManifestError as exc:
                    states[(key, trial.i)] = str(exc)
    return states


def selftest_refusal(original: RunReport, where: Path) -> DiagnosticError:
    """``regrade-selftest-run``: a selftest run is judged again by running selftest again."""
    return DiagnosticError(
        [
            error(
                "regrade-selftest-run",
                f"run {original.run_id} is a selftest run: its mutants and counter-solutions "
                "follow the checks, so it is not regraded",
                source=display_path(where),
                next="run `atlante-eval selftest` again: it needs no model",
            )
        ]
    )


def no_state_error(
    original: RunReport, where: Path, selected: Sequence[Scenario]
) -> DiagnosticError:
    """``regrade-no-final-state``: the run stored nothing a regrade could rebuild."""
    graded = sum(
        1 for s in selected for t in original.scenarios[s.name].trials if t.checks is not None
    )
    reason = (
        "none of its trials reached grading"
        if not graded
        else "no graded trial has a usable final state (the run used --no-final-state, "
        "an earlier atlante-eval, or its states were incomplete or damaged)"
    )
    step = "run the scenarios again (`atlante-eval run`); final states are stored by default"
    return DiagnosticError(
        [
            error(
                "regrade-no-final-state",
                f"run {original.run_id} cannot be regraded: {reason}",
                source=display_path(where),
                next=step,
            )
        ]
    )


def scenario_digests(selected: Sequence[Scenario]) -> dict[str, str]:
    """Each selected scenario's current fixture digest."""
    return {scenario.name: fixture_digest(scenario.fixture_path) for scenario in selected}


def _differences(stored: TaskBasis, current: TaskBasis) -> list[str]:
    return [
        part
        for part in _PARTS
        if getattr(stored, part) is not None or part in ("agent", "setup")
        if getattr(stored, part) != getattr(current, part)
    ]


def check_tasks(
    original: RunReport,
    selected: Sequence[Scenario],
    sides: Sequence[Side],
    states: Mapping[tuple[str, int], Loaded],
    digests: Mapping[str, str],
) -> None:
    """Refuse scenarios whose task changed since the run (the checks may differ).

    Each side's trials are compared with the task as that side assembles it (its
    arm's native outputs).

    Raises:
        DiagnosticError: ``regrade-task-changed`` (exit 2), one per changed scenario.
    """
    problems: list[Diagnostic] = []
    for scenario in selected:
        changed: set[str] = set()
        for side in sides:
            current = task_basis(
                scenario, fixture=digests.get(scenario.name), native=side.native.digest
            )
            for trial in side.trials(original, scenario.name):
                state = states.get((side.key(scenario.name), trial.i))
                if isinstance(state, FinalState):
                    changed.update(_differences(state.task, current))
        recorded = original.meta.manifest_digest
        if (
            not changed
            and not original.meta.variants
            and recorded
            not in (
                None,
                sides[0].native.digest,
            )
        ):
            changed.add("native")
        if changed:
            what = ", ".join(_PARTS[part] for part in _PARTS if part in changed)
            problems.append(
                error(
                    "regrade-task-changed",
                    f"scenario {scenario.name} changed since run {original.run_id} beyond its "
                    f"checks: {what}; its stored work answers another task",
                    source=scenario.source,
                    next=f"restore what changed to regrade it, or run it again "
                    f"(`atlante-eval run --scenario {scenario.name}`); only checks may change "
                    "between a run and its regrade",
                )
            )
    if problems:
        raise DiagnosticError(problems)


class OutputKeeper:
    """Keeps a command check's long output beside the regraded trial's transcript."""

    def __init__(self, run: RunFiles, scenario: str, index: int) -> None:
        self.run = run
        self.scenario = scenario
        self.index = index
        self.redact = Redactor(secret_values(os.environ))

    def __call__(self, name: str, text: str) -> str | None:
        """Write ``text`` as ``name`` in the trial's folder; return its run-relative path."""
        files = self.run.trial(self.scenario, self.index)
        if files is None:
            return None
        with files:
            try:
                with files.create(name) as handle:
                    handle.write(cap_text(self.redact(text), LOG_CHARS).encode("utf-8"))
            except OSError:
                return None
            return files.path_of(name)


def trial_outputs(
    run: RunFiles, scenario: Scenario, index: int, key: str | None = None
) -> tuple[list[TranscriptEntry] | None, str | None, OutputKeeper]:
    """The trial's transcript for behaviour checks (or why none), and where outputs go.

    ``key`` names the trial's directory (``scenario@arm`` for an arm's trial; default
    the scenario's name).
    """
    where = key or scenario.name
    keeper = OutputKeeper(run, where, index)
    if not any(c.type in BEHAVIOUR_CHECK_TAGS for c in scenario.document.checks):
        return None, None, keeper
    files = run.trial(where, index, create=False)
    if files is None:
        return None, f"{NO_TRANSCRIPT}: none was recorded", keeper
    with files:
        transcript, reason = read_transcript(files)
    return transcript, reason, keeper
