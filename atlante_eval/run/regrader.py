"""Rebuild one trial from its final state and grade it: the work ``regrade`` does per trial.

:class:`TrialRegrader` holds what every trial of a run needs (the run root for the
sandboxes, the native outputs, the content store, the run directory for
transcripts and long outputs, the isolation settings) and grades one trial at a
time through the engine's grading path (:func:`~.grading.grade_sandbox`), with
the host's runtime artefacts the trial recorded. ``regrade`` and ``selftest``
(which proves its reference trial regrades to the same verdict) share it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..isolation.limits import LimitSettings, with_limits
from ..isolation.trial import IsolationSettings, TrialIsolation, open_trial_isolation
from ..project import NativeOutputs, Scenario
from ..report import LimitReached, RunFiles, TamperEvidence, TrialResult
from ..report.blobstore import BlobStore
from ..report.final_state import FinalState
from ..trial import trial_dirs
from ..trial.rebuild import rebuilt_sandbox
from .grading import Graded, Grading, grade_sandbox
from .redaction import untrusted_transcript
from .regrade_basis import trial_outputs

__all__ = ["Regraded", "TrialRegrader"]


@dataclass(frozen=True, slots=True)
class Regraded:
    """One trial graded again: the grading, and the limits its command checks reached."""

    graded: Graded
    """The checks, verdict and change evidence of the rebuilt sandbox."""
    reached: tuple[LimitReached, ...] = ()
    """The per-trial limits the checks reached (phase ``check``), as the engine records them."""

    def applied_to(self, trial: TrialResult) -> TrialResult:
        """``trial`` with the new grading, and its limits as the run would record them.

        The session's and setup's limits stay (the session is the run's); the
        checks' are this grading's. A limit leads the error of a trial that did not
        pass, as in the run (:func:`~atlante_eval.isolation.limits.with_limits`).
        """
        kept = [r for r in trial.limits_reached or [] if r.phase != "check"]
        graded = trial.model_copy(update={**self.graded.fields(), "limits_reached": None})
        return with_limits(graded, [*kept, *self.reached])


@dataclass(frozen=True, slots=True)
class TrialRegrader:
    """Grades trials of one run again from their final states, with current checks."""

    run_root: Path
    """Where the rebuilt sandboxes go (removed after each trial)."""
    native: NativeOutputs
    """The verified native outputs (they must be the trial's: the baseline is checked)."""
    store: BlobStore
    """The content store the final states refer to."""
    files: RunFiles
    """The run directory: transcripts are read and long outputs written there."""
    isolation: IsolationSettings | None = None
    """Confine command checks (``--isolation os``), as the trial's run did."""
    skeleton: Path | None = None
    """An empty repository copied for each baseline instead of ``git init``."""
    limits: LimitSettings | None = None
    """The per-trial resource limits command checks run under, as the run's did."""

    @contextlib.asynccontextmanager
    async def _confinement(self) -> AsyncIterator[TrialIsolation | None]:
        async with open_trial_isolation(self.isolation, self.limits, self.run_root) as isolation:
            yield isolation

    async def grade(
        self,
        scenario: Scenario,
        index: int,
        state: FinalState,
        *,
        tampered: Sequence[TamperEvidence] | None = None,
        key: str | None = None,
        native: NativeOutputs | None = None,
    ) -> Regraded:
        """Rebuild trial ``index`` of ``scenario`` from ``state``; run its current checks.

        ``tampered`` is the trial's stream-tampering evidence: behaviour checks then get
        no transcript (``error``), as in the run. ``key`` names the trial's directory
        (an arm's trial: ``scenario@arm``) and ``native`` the native outputs its sandbox
        was assembled with (an arm's; default :attr:`native`).

        Raises:
            RebuildError: the sandbox cannot be rebuilt as the trial left it.
        """
        transcript, transcript_error, keeper = trial_outputs(self.files, scenario, index, key)
        if tampered and transcript is not None:
            transcript, transcript_error = None, untrusted_transcript(tampered)
        async with (
            trial_dirs(keep=False) as owned,
            self._confinement() as isolation,
            rebuilt_sandbox(
                self.run_root,
                scenario,
                state,
                native=native or self.native,
                store=self.store,
                owner=owned,
                skeleton=self.skeleton,
            ) as sandbox,
        ):
            graded = await grade_sandbox(
                scenario.document.checks,
                sandbox,
                Grading(
                    ignored=state.ignored,
                    transcript=transcript,
                    transcript_error=transcript_error,
                    redact=keeper.redact,
                    keep_output=keeper,
                    wrap=isolation.wrapper("check", sandbox.root, sandbox.state_dir)
                    if isolation is not None
                    else None,
                ),
            )
            limits = isolation.limits if isolation is not None else None
            return Regraded(graded, tuple(limits.reached()) if limits is not None else ())
