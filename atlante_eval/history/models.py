"""What the history commands print: runs, a scenario's nights, flaky scenarios, baselines.

Pydantic models with camelCase JSON keys, like the report; ``--json`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..report import OutputModel

__all__ = [
    "Blessing",
    "FlakyScenario",
    "HistoryRun",
    "IngestResult",
    "NightOutcome",
    "Quarantine",
    "ScenarioHistory",
    "ScenarioNight",
    "WindowStats",
]

#: A scenario's result in one run: every graded trial passed, none did, some did,
#: or nothing was graded.
NightOutcome = Literal["pass", "fail", "flaky", "none"]


class HistoryRun(OutputModel):
    """One recorded run."""

    run_id: str
    """The run id (of the report that supersedes any shards it merged)."""
    started_at: str | None
    """UTC start time, when recorded."""
    host: str
    """Host name."""
    host_version: str | None
    """Host CLI version."""
    model: str
    """Model."""
    arm: str | None
    """The arm (variant) the run measured; null for a run of one harness."""
    harness: str | None
    """Manifest digest: the harness revision."""
    scenarios: int
    """Scenarios in the run."""
    trials: int
    """Trials in the run."""
    passed: int
    """Trials that passed."""
    tokens: int | None
    """Reported tokens."""
    cost: float | None
    """Reported cost (USD)."""
    shard: str | None
    """``I/N`` when only a shard of the run is recorded."""
    interrupted: bool
    """The run stopped part-way (a partial report)."""
    resumed_from: str | None
    """The run directory it resumed."""
    adaptive: bool
    """An adaptive run (``--until-decided``)."""
    absorbed: list[str]
    """Run ids of the shards or interrupted runs this run superseded."""
    blessed: list[str]
    """Names of the baselines that are this run."""
    report_path: str | None
    """The report it was recorded from."""


class ScenarioNight(OutputModel):
    """A scenario in one run."""

    run_id: str
    """The run."""
    started_at: str | None
    """The run's start."""
    passed: int
    """Passing trials."""
    graded: int
    """Graded trials (executed minus infra-errors)."""
    executed: int
    """Executed trials."""
    infra_errors: int
    """Infra-error trials."""
    skipped: int
    """Skipped-budget trials."""
    pass_rate: float | None
    """``passed / graded`` (null when nothing was graded)."""
    interval: tuple[float, float] | None
    """95% Wilson interval of the pass rate."""
    outcome: NightOutcome
    """``pass``, ``fail``, ``flaky`` (some graded trials passed) or ``none``."""
    partial: bool
    """The run was interrupted or is one shard."""
    resumed: bool
    """The run resumed an earlier one."""
    adaptive: bool
    """The run was adaptive."""


class WindowStats(OutputModel):
    """Pooled trials of a scenario over the runs shown."""

    passed: int
    """Passing trials."""
    graded: int
    """Graded trials."""
    pass_rate: float | None
    """Pooled pass rate (null when nothing was graded)."""
    interval: tuple[float, float] | None
    """95% Wilson interval of the pooled pass rate."""


class Quarantine(OutputModel):
    """A quarantined scenario: still run and reported, ignored by ``--fail-on`` gates."""

    scenario: str
    """Scenario name."""
    reason: str
    """Why."""
    owner: str | None
    """Who is fixing it."""
    until: str | None
    """Last day of the quarantine (``YYYY-MM-DD``, UTC); null: until removed."""
    added_by: str
    """Who quarantined it."""
    added_at: str
    """When."""
    removed_by: str | None = None
    """Who ended it (``quarantine remove``)."""
    removed_at: str | None = None
    """When it was removed."""
    active: bool
    """In force today (not removed, not expired)."""


class ScenarioHistory(OutputModel):
    """``history show SCENARIO``: a scenario over the last runs."""

    scenario: str
    """Scenario name."""
    nights: list[ScenarioNight]
    """The runs that ran it, oldest first."""
    window: WindowStats
    """Trials pooled over those runs."""
    flips: int
    """Times the outcome changed between consecutive graded runs (pass ↔ not pass)."""
    flip_rate: float | None
    """``flips`` over the pairs of consecutive graded runs."""
    flaky_runs: int
    """Runs in which some graded trials passed and some did not."""
    first_failing: str | None
    """The first run of the current streak of runs that did not fully pass (null when the
    latest graded run passed)."""
    last_passing: str | None
    """The latest run in which every graded trial passed."""
    quarantine: Quarantine | None
    """The quarantine in force, if any."""


class FlakyScenario(OutputModel):
    """``history flaky``: a scenario whose outcome flips across runs."""

    scenario: str
    """Scenario name."""
    runs: int
    """Graded runs considered."""
    flips: int
    """Outcome changes between consecutive graded runs."""
    flip_rate: float
    """``flips / (runs - 1)``."""
    flaky_runs: int
    """Runs with both passing and failing graded trials."""
    window: WindowStats
    """Trials pooled over the runs."""
    outcomes: list[NightOutcome]
    """Outcome per run, oldest first."""
    quarantined: bool
    """A quarantine is in force."""


class Blessing(OutputModel):
    """A blessed baseline: the accepted run for its host, model and arm."""

    name: str
    """Baseline name (``default`` unless ``--name``)."""
    run_id: str
    """The blessed run."""
    host: str
    """Its host."""
    model: str
    """Its model."""
    arm: str | None
    """Its arm."""
    blessed_by: str
    """Who blessed it."""
    blessed_at: str
    """When."""
    reason: str | None
    """Why."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What recording one report did."""

    run_id: str
    """The run id the store holds the trials under."""
    status: Literal["recorded", "unchanged", "replaced"]
    """``recorded`` (new), ``unchanged`` (already there) or ``replaced`` (superseded runs)."""
    trials: int
    """Trials in the report."""
    absorbed: list[str] = field(default_factory=list)
    """Run ids of the stored runs this report superseded."""
