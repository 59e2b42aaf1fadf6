"""Progress events a run emits, in the order things happen.

With parallel trials, events of different trials interleave; each event names its
scenario and trial. Callbacks receive them through ``run_eval(on_event=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..diagnostics import Diagnostic
from .models import AdaptiveLook, AdaptiveStop, MetaConfig, ScenarioResult, TrialResult

__all__ = [
    "DiagnosticNotice",
    "HostInstallProgress",
    "InstallStage",
    "ProgressEvent",
    "RunFinished",
    "RunStarted",
    "ScenarioFinished",
    "ScenarioLooked",
    "ScenarioStarted",
    "TrialFinished",
    "TrialStarted",
]


@dataclass(frozen=True, slots=True)
class DiagnosticNotice:
    """A warning found while preparing the run (e.g. a pack scenario not included)."""

    diagnostic: Diagnostic


#: The steps of readying a pinned host version (:class:`HostInstallProgress`).
InstallStage = Literal["waiting", "installing", "installed"]


@dataclass(frozen=True, slots=True)
class HostInstallProgress:
    """A pinned host version is being readied in the managed host cache (docs/hosts.md).

    Sent before the run starts: ``waiting`` while another process installs the same
    version, ``installing`` before npm runs (the packages are hundreds of MB), and
    ``installed`` once the copy is in place.
    """

    host: str
    version: str
    stage: InstallStage
    directory: str
    """The version's directory in the cache."""
    command: str | None = None
    """``installing``: the npm command line that installs it."""
    reason: str | None = None
    """``installing``: why a cached copy is replaced (it failed its integrity check)."""
    size_bytes: int | None = None
    """``installed``: the copy's size on disk."""
    integrity: str | None = None
    """``installed``: the package's npm integrity (``sha512-...``)."""
    elapsed_ms: int | None = None
    """``installed``: how long the install took."""


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The plan is ready; ``total`` trials will be accounted for."""

    run_id: str
    total: int
    jobs: int
    host: str
    config: MetaConfig | None = None
    """The resolved run budget (names the limits in cause lines)."""


@dataclass(frozen=True, slots=True)
class ScenarioStarted:
    """The first trial of a scenario is starting."""

    scenario: str


@dataclass(frozen=True, slots=True)
class TrialStarted:
    """A trial's sandbox is being assembled (again, for a ``--retry-infra`` retry)."""

    scenario: str
    trial: int
    attempt: int = 1
    """Which attempt this is (1 = the first; ``--retry-infra`` retries an infra-error)."""
    attempts: int = 1
    """Most attempts the trial may take (1 + ``--retry-infra``)."""
    previous: str | None = None
    """On a retry: why the attempt before ended ``infra-error`` (its error, untrusted)."""
    variant: str | None = None
    """A run with arms: the trial's arm (``eval.variants``)."""

    @property
    def retry(self) -> bool:
        """This start is a retry of an infra-error."""
        return self.attempt > 1


@dataclass(frozen=True, slots=True)
class TrialFinished:
    """A trial has a verdict (skipped trials emit only this event)."""

    scenario: str
    trial: int
    result: TrialResult
    variant: str | None = None
    """A run with arms: the trial's arm (``eval.variants``)."""


@dataclass(frozen=True, slots=True)
class ScenarioFinished:
    """Every trial of a scenario has a verdict."""

    scenario: str
    result: ScenarioResult


@dataclass(frozen=True, slots=True)
class ScenarioLooked:
    """An adaptive run judged a scenario against its baseline after a wave."""

    scenario: str
    look: AdaptiveLook
    """The statistic at this look."""
    base_rate: float
    """BASE pass rate."""
    stopped: AdaptiveStop | None
    """Why the scenario gets no more trials, or None when it continues."""
    max_trials: int | None = None
    """The run's ``--max-trials`` (for ``undecidable within N trials``)."""
    control: str | None = None
    """With arms: the control arm this arm (``scenario`` is ``name@arm``) is judged against."""


@dataclass(frozen=True, slots=True)
class RunFinished:
    """Every trial is accounted for (or the run was interrupted)."""

    run_id: str
    interrupted: bool


ProgressEvent = (
    DiagnosticNotice
    | HostInstallProgress
    | RunStarted
    | ScenarioStarted
    | TrialStarted
    | TrialFinished
    | ScenarioFinished
    | ScenarioLooked
    | RunFinished
)
