"""``show --diff BASE HEAD SCENARIO[:I:J]``: two trials' timelines side by side, aligned.

Each trial's transcript becomes its steps (:func:`atlante_eval.deltas.trial_steps`:
every tool call, skill load and delegation, subagents' steps nested after them;
repeats are not folded here), and the two step lists are aligned by edit
distance, the first divergence marked. Without ``:I:J`` the trials are the first
examples of each side's typical path (the trial that behaves most like its
side); a side without transcripts contributes its first graded trial. All text
is as recorded (untrusted): the renderer escapes it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Literal

from .._util.paths import display_path
from ..deltas import TrialSet, align, first_divergence, read_entries, trial_steps
from ..deltas.paths import typical_path
from ..deltas.steps import fold
from ..diagnostics import DiagnosticError, error
from ..report import TRIALS_DIR, OutputModel, RunFiles, RunReport
from ..report.behaviour import AlignedStep, PathStep
from ..transcript import TRANSCRIPT_FILE
from .causes import trial_cause

__all__ = ["DiffSide", "TrialDiffView", "parse_diff_target", "pick_trial", "trial_diff_view"]


class DiffSide(OutputModel):
    """One of the two trials."""

    run_id: str
    """The run id."""
    report: str
    """Path of the report file."""
    i: int
    """Trial index."""
    verdict: str
    """Its verdict."""
    cause: str | None
    """Why it did not pass (one line)."""
    transcript: str | None
    """Its transcript, relative to the run directory (null when none could be read)."""
    steps: int
    """Steps in its timeline."""


class TrialDiffView(OutputModel):
    """Two trials of one scenario, their timelines aligned: ``show --diff``."""

    scenario: str
    """Scenario name."""
    chosen_by: Literal["given", "typical-path"]
    """``given`` (``SCENARIO:I:J``) or ``typical-path`` (each side's typical trial)."""
    base: DiffSide
    """The BASE trial."""
    head: DiffSide
    """The HEAD trial."""
    rows: list[AlignedStep]
    """The aligned steps (``same``, ``changed``, ``removed``: BASE only, ``added``: HEAD only)."""
    first_divergence: int | None
    """Index in ``rows`` of the first row that is not ``same`` (null: identical)."""
    distance: int
    """Edit distance between the two timelines."""


def _invalid(message: str, **fields: str) -> DiagnosticError:
    return DiagnosticError([error("invalid-option", message, **fields)])


def parse_diff_target(
    base: RunReport, head: RunReport, target: str
) -> tuple[str, int | None, int | None]:
    """Split ``SCENARIO`` or ``SCENARIO:I:J`` and check both runs have it.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) naming what exists.
    """
    name, first, second = target, None, None
    parts = target.rsplit(":", 2)
    if target not in base.scenarios and len(parts) == 3:
        if not all(p.isascii() and p.isdigit() for p in parts[1:]):
            raise _invalid(
                f"--diff wants SCENARIO or SCENARIO:I:J, got {target!r}",
                next="pass the scenario, or it and a trial index of each run: fix-bug:0:3",
            )
        name, first, second = parts[0], int(parts[1]), int(parts[2])
    for label, report, index in (("BASE", base, first), ("HEAD", head, second)):
        if name not in report.scenarios:
            names = ", ".join(sorted(report.scenarios)) or "(none)"
            raise _invalid(
                f"{label} run {report.run_id} has no scenario {name!r}",
                expected=f"one of {names}",
                next="pass a scenario both runs have",
            )
        trials = report.scenarios[name].trials
        if index is not None and not any(t.i == index for t in trials):
            raise _invalid(
                f"{label} run {report.run_id} has no trial {index} of {name!r}",
                expected=f"a trial index from 0 to {len(trials) - 1}" if trials else "no trials",
                next=f"list the trials with `atlante-eval show RUN {name}`",
            )
    return name, first, second


def pick_trial(report: RunReport, report_file: Path, scenario: str) -> int:
    """The trial that best stands for its side: the first example of its typical path."""
    side = TrialSet.from_run(report, scenario, report_file.parent)
    graded = side.graded()
    paths = [
        (t, fold(trial_steps(side.transcripts[t.i]))) for t in graded if t.i in side.transcripts
    ]
    if paths:
        return typical_path(paths).examples[0].i
    trials = graded or report.scenarios[scenario].trials
    return trials[0].i if trials else 0


def _side(
    report: RunReport, report_file: Path, scenario: str, index: int
) -> tuple[DiffSide, list[PathStep]]:
    trial = next(t for t in report.scenarios[scenario].trials if t.i == index)
    entries = None
    with contextlib.suppress(OSError):
        run = RunFiles.open_existing(report_file.parent)
        with contextlib.closing(run):
            entries = read_entries(run, scenario, index)
    steps = trial_steps(entries) if entries is not None else []
    side = DiffSide(
        run_id=report.run_id,
        report=display_path(report_file),
        i=index,
        verdict=trial.verdict,
        cause=trial_cause(trial, report.meta.config),
        transcript=f"{TRIALS_DIR}/{scenario}/{index}/{TRANSCRIPT_FILE}"
        if entries is not None
        else None,
        steps=len(steps),
    )
    return side, steps


def trial_diff_view(
    base: tuple[RunReport, Path],
    head: tuple[RunReport, Path],
    scenario: str,
    indices: tuple[int | None, int | None] = (None, None),
) -> TrialDiffView:
    """Trial ``indices`` (or each side's typical trial) of ``scenario``, aligned.

    Args:
        base: BASE's report and the report file it was read from.
        head: HEAD's report and its file.
        scenario: A scenario both reports have (see :func:`parse_diff_target`).
        indices: The trial of each side; ``None`` picks it with :func:`pick_trial`.
    """
    given = indices[0] is not None and indices[1] is not None
    first = indices[0] if indices[0] is not None else pick_trial(*base, scenario)
    second = indices[1] if indices[1] is not None else pick_trial(*head, scenario)
    old, old_steps = _side(*base, scenario, first)
    new, new_steps = _side(*head, scenario, second)
    rows = align(old_steps, new_steps)
    return TrialDiffView(
        scenario=scenario,
        chosen_by="given" if given else "typical-path",
        base=old,
        head=new,
        rows=rows,
        first_divergence=first_divergence(rows),
        distance=sum(1 for row in rows if row.op != "same"),
    )
