"""The run report: versioned pydantic models in the reference's JSON shape.

Field names and order follow the reference ``atlante eval`` report (``runId``,
``meta``, ``scenarios``; per scenario ``trials``, ``passRate``, ``meanDurationMs``,
``spread.durationP95Ms``; per trial ``i``, ``verdict``, ``durationMs``, ...).
Everything beyond the reference is *additive*: new keys, never renamed ones
(see docs/report.md). Absent optional values are omitted from the JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from .arm_models import ArmInfo, UpliftRecord
from .base import OutputModel
from .usage import GatewaySummary, TrialUsage

__all__ = [
    "REPORT_FILE",
    "REPORT_FORMAT_VERSION",
    "Activity",
    "AdaptiveDecision",
    "AdaptiveLook",
    "AdaptiveOverall",
    "AdaptiveRecord",
    "AdaptiveScenario",
    "AdaptiveStop",
    "CheckResult",
    "CheckVerdict",
    "DeniedAccess",
    "FinalStateRef",
    "HostSource",
    "LimitReached",
    "LimitsRecord",
    "Meta",
    "MetaConfig",
    "OriginInfo",
    "OutputModel",
    "RunReport",
    "ScenarioActivity",
    "ScenarioResult",
    "ScenarioStatistics",
    "ScenarioToolCalls",
    "ShardBalance",
    "ShardLoad",
    "Spread",
    "TamperEvidence",
    "TamperKind",
    "TamperedFile",
    "ToolCallCounts",
    "Totals",
    "TrialAttempt",
    "TrialRegrade",
    "TrialResult",
    "Verdict",
    "model_version_of",
    "utc_timestamp",
]

#: Name of the report file inside a run directory.
REPORT_FILE = "report.json"
#: Version of the additive report fields written by this engine.
REPORT_FORMAT_VERSION = 1

Verdict = Literal["pass", "fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"]
CheckVerdict = Literal["pass", "fail", "error"]
#: What made the engine believe a trial's host stream was written to by someone else
#: (docs/reliability.md, "Tampering evidence"; docs/gateway.md, "Cross-check").
TamperKind = Literal[
    "after-result",
    "glued-line",
    "malformed-line",
    "negative-usage",
    "unrequested-tool-call",
    "unrecorded-tool-call",
    "second-result",
    "usage-mismatch",
]


def utc_timestamp() -> str:
    """The current UTC time as the report writes it: ISO 8601, milliseconds, ``Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def model_version_of(model: str) -> str:
    """Return the part of ``provider/model#variant`` after the first ``/``, without ``#...``."""
    version = model.split("/", 1)[1] if "/" in model else model
    return version.split("#", 1)[0]


class CheckResult(OutputModel):
    """One check's outcome and its evidence."""

    index: int
    """Position of the check in the scenario document (0-based)."""
    type: str
    """Check type."""
    verdict: CheckVerdict
    """``pass``, ``fail`` (assertion false) or ``error`` (no verdict possible)."""
    evidence: dict[str, Any]
    """What the check saw (empty on pass for file checks)."""
    duration_ms: int | None = None
    """Time the check took (additive)."""


class TrialAttempt(OutputModel):
    """An earlier attempt of a trial that ended in ``infra-error`` and was retried."""

    verdict: Verdict
    """Verdict of that attempt (always ``infra-error``)."""
    duration_ms: int
    """Duration of that attempt."""
    error: str | None = None
    """Its error text."""


class ToolCallCounts(OutputModel):
    """How many tool calls a trial made, by host-neutral kind and by host-native name."""

    total: int = 0
    """All tool calls."""
    by_kind: dict[str, int] = Field(default_factory=dict)
    """Calls by host-neutral kind (``shell``, ``read``, ``write``, ``search``, ...)."""
    by_name: dict[str, int] = Field(default_factory=dict)
    """Calls by the host's own tool name."""


class Activity(OutputModel):
    """What the agent did in one trial, summarised from its transcript (additive)."""

    turns: int = 0
    """Model turns (the host's count when it gives one)."""
    tool_calls: ToolCallCounts = Field(default_factory=ToolCallCounts)
    """Tool calls."""
    skills: dict[str, int] = Field(default_factory=dict)
    """Skills loaded, with how often."""
    subagents: dict[str, int] = Field(default_factory=dict)
    """Subagents delegated to, with how often."""
    files_written: list[str] = Field(default_factory=list)
    """Files the agent's write tools wrote (relative to the sandbox when inside it)."""
    first_error: str | None = None
    """The first error the host reported."""


class ScenarioToolCalls(OutputModel):
    """Tool calls over a scenario's trials."""

    by_kind: dict[str, int] = Field(default_factory=dict)
    """Calls by kind, summed over trials."""


class ScenarioActivity(OutputModel):
    """What the agent did over a scenario's trials (additive)."""

    trials: int
    """Trials with a transcript."""
    skills: dict[str, int] = Field(default_factory=dict)
    """Skills, with how many trials used each."""
    subagents: dict[str, int] = Field(default_factory=dict)
    """Subagents, with how many trials used each."""
    tool_calls: ScenarioToolCalls = Field(default_factory=ScenarioToolCalls)
    """Tool calls by kind."""


class DeniedAccess(OutputModel):
    """Something a trial's OS isolation refused (``--isolation os``; additive)."""

    phase: Literal["session", "setup"]
    """Which process tree asked: the host session or the scenario's setup (checks have
    no network to ask for)."""
    kind: Literal["network"]
    """What was refused: ``network`` (a destination off the allow list)."""
    target: str
    """The refused ``host:port``."""
    count: int
    """How many times it was asked for."""


class LimitReached(OutputModel):
    """A per-trial resource limit a trial reached (``eval.limits``; additive)."""

    phase: Literal["session", "setup", "check"]
    """Which processes reached it: the host session, the scenario's setup, or a command check."""
    limit: Literal["memory", "pids", "tmp"]
    """``memory`` (the kernel killed a process at ``memoryMb``), ``pids`` (a fork was
    refused at ``pids``) or ``tmp`` (a private tmpfs of ``tmpMb`` filled up)."""
    value: int
    """The limit: megabytes for ``memory`` and ``tmp``, processes for ``pids``."""

    @property
    def message(self) -> str:
        """``memory limit 512 MB reached``."""
        unit = " MB" if self.limit in ("memory", "tmp") else ""
        return f"{self.limit} limit {self.value}{unit} reached"

    @property
    def cause(self) -> str:
        """``memory limit 512 MB reached (session)``: the message and where."""
        where = "checks" if self.phase == "check" else self.phase
        return f"{self.message} ({where})"


class TamperEvidence(OutputModel):
    """One sign that the host's event stream was forged or tampered with (additive)."""

    kind: TamperKind
    """What was seen: ``after-result`` (an event after the session's final result),
    ``glued-line`` (a host event found behind foreign bytes on its line),
    ``malformed-line`` (a line that looks like an event but is not one JSON object),
    ``negative-usage`` (a negative token or cost figure); with the gateway,
    ``unrequested-tool-call`` (a transcript tool call the model never asked for),
    ``unrecorded-tool-call`` (a tool call the model asked for that the transcript
    lacks), ``second-result`` (more ``result`` events than the session can print),
    ``usage-mismatch`` (the host's token total above the gateway's beyond the tolerance)."""
    detail: str
    """What exactly, in words (capped, secrets redacted)."""
    line: int | None = None
    """The 1-based stdout line it was seen on, when it is a line."""


class FinalStateRef(OutputModel):
    """Where a trial's final state is stored, and whether it is whole (additive).

    ``regrade`` rebuilds the trial's sandbox from it (docs/regrade.md).
    """

    path: str
    """The trial's final-state manifest, relative to the run directory."""
    digest: str
    """SHA-256 of the manifest file: a manifest changed since is refused."""
    complete: bool
    """Every change was stored: the trial can be regraded."""
    files: int
    """File contents the state refers to (the agent's, setup's and the sandbox's ``.git``)."""
    bytes: int
    """Their total size, uncompressed."""
    stored_bytes: int
    """Compressed bytes this trial added to the run's store (contents already there are
    shared)."""
    omitted: int | None = None
    """Entries left out (over the cap, unreadable, special files); absent: none."""
    reason: str | None = None
    """Why the state is not whole (the first omission)."""


class TrialRegrade(OutputModel):
    """What ``regrade`` did with this trial (additive; docs/regrade.md)."""

    status: Literal["regraded", "kept", "unavailable"]
    """``regraded``: the current checks ran on its rebuilt sandbox; ``kept``: it never
    reached grading, its verdict stands; ``unavailable``: its final state could not be
    rebuilt (verdict ``infra-error``, ``reason`` says why)."""
    previous_verdict: Verdict
    """The verdict in the report that was regraded."""
    reason: str | None = None
    """Why the trial could not be regraded."""


class TrialResult(OutputModel):
    """One trial of one scenario."""

    i: int
    """0-based trial index."""
    verdict: Verdict
    """The trial's verdict."""
    duration_ms: int
    """Host-session wall time (assembly time for an assembly failure; 0 when skipped)."""
    tokens: int | None = None
    """Cumulative tokens: the gateway's count when ``usage.source`` is ``gateway``,
    else what the host reported."""
    cost: float | None = None
    """Cost in USD (``usage.costSource`` says from where; the host's figure without a
    gateway)."""
    budget_unmonitored: Literal[True] | None = None
    """Set when the host emitted no usage, so ``maxTokens`` could not be enforced."""
    error: str | None = None
    """Infrastructure, timeout or budget detail."""
    checks: list[CheckResult] | None = None
    """Check outcomes (only when the host session completed)."""
    diff: str | None = None
    """Diff against the baseline, capped at 20,000 characters."""
    model: str | None = None
    """Model the host reported for this trial (additive)."""
    model_version: str | None = None
    """Model version the host reported, or derived from ``model`` (additive)."""
    changed_files: list[str] | None = None
    """Paths the agent changed, sorted; at most 1,000, graded ones first (additive)."""
    changed_files_omitted: int | None = None
    """How many changed paths ``changedFiles`` leaves out; absent: none (additive)."""
    host_evidence: dict[str, Any] | None = None
    """Host facts worth keeping, e.g. permission denials (additive)."""
    sandbox: str | None = None
    """Where the trial's sandbox was kept (``--keep``; additive)."""
    started_at: str | None = None
    """UTC start time (additive)."""
    attempts: list[TrialAttempt] | None = None
    """Earlier infra-error attempts, with ``--retry-infra`` (additive)."""
    reused: bool | None = None
    """Reused from an earlier run with ``--resume`` (additive)."""
    not_started: Literal[True] | None = None
    """The run was interrupted before this trial started: it counts in no statistic (additive)."""
    timeout_ms: int | None = None
    """The session timeout the trial hit, on a ``timeout`` verdict (additive)."""
    transcript: str | None = None
    """The trial's transcript, relative to the run directory (additive; docs/transcripts.md)."""
    activity: Activity | None = None
    """What the agent did, from its transcript (additive)."""
    denied: list[DeniedAccess] | None = None
    """What OS isolation refused during this trial (``--isolation os``; additive)."""
    limits_reached: list[LimitReached] | None = None
    """The resource limits this trial reached, by phase (``eval.limits``; additive)."""
    denied_omitted: int | None = None
    """How many more refused destinations ``denied`` leaves out; absent: none (additive)."""
    usage: TrialUsage | None = None
    """Where ``tokens``, ``cost`` and ``model`` come from, with the gateway on (additive;
    absent with ``--gateway off``; docs/gateway.md)."""
    model_calls: str | None = None
    """The trial's model-call record, relative to the run directory (additive;
    docs/gateway.md)."""
    tampered: list[TamperEvidence] | None = None
    """Evidence that the host's event stream was tampered with; absent: none (additive).
    Behaviour checks on a tampered transcript give ``error``."""
    tampered_omitted: int | None = None
    """How many more pieces of evidence ``tampered`` leaves out; absent: none (additive)."""
    variant: str | None = None
    """The arm this trial ran (``eval.variants``; absent in a run without arms)."""
    final_state: FinalStateRef | None = None
    """The stored final state ``regrade`` rebuilds the trial from (additive)."""
    regrade: TrialRegrade | None = None
    """How ``regrade`` treated the trial, in a regraded report (additive)."""


class Spread(OutputModel):
    """Spread of trial durations."""

    duration_p95_ms: int
    """Nearest-rank 95th percentile of executed trials' durations."""


class ScenarioStatistics(OutputModel):
    """Statistics of one scenario's trials (additive; see docs/statistics.md)."""

    executed: int
    """Trials that ran (all but ``skipped-budget``)."""
    graded: int
    """Executed trials minus infra-errors: the denominator of ``passRateGraded``."""
    passed: int
    """Trials with verdict ``pass``."""
    infra_errors: int
    """Trials with verdict ``infra-error``."""
    skipped: int
    """Trials with verdict ``skipped-budget``."""
    pass_rate_graded: float
    """``passed / graded`` (0 when nothing was graded)."""
    wilson95: tuple[float, float]
    """95% Wilson score interval of ``passRateGraded``."""
    pass_at_k: dict[str, float]
    """Unbiased pass@k for k = 1..graded."""
    pass_hat_k: dict[str, float]
    """pass^k (all k trials pass) for k = 1..graded."""
    stability: Literal["stable-pass", "stable-fail", "flaky"] | None = None
    """Stability class over graded trials (``None`` when none was graded)."""
    tokens_mean: float | None = None
    """Mean tokens over trials that reported usage."""
    tokens_p95: float | None = None
    """Nearest-rank p95 of tokens over trials that reported usage."""
    cost_mean: float | None = None
    """Mean cost over trials that reported cost."""
    cost_p95: float | None = None
    """Nearest-rank p95 of cost over trials that reported cost."""
    cost_per_pass: float | None = None
    """Total cost divided by passing trials (``None`` when none passed or no cost)."""


class OriginInfo(OutputModel):
    """Where a scenario came from."""

    kind: Literal["project", "package"]
    """``project`` or ``package``."""
    package_name: str | None = None
    """Pack package name."""
    package_version: str | None = None
    """Pack package version."""


class ScenarioResult(OutputModel):
    """One scenario's trials and statistics."""

    trials: list[TrialResult]
    """Trials in index order."""
    pass_rate: float
    """``pass`` trials / executed trials (0 when none executed)."""
    mean_duration_ms: int
    """Rounded mean duration of executed trials."""
    spread: Spread
    """Duration spread."""
    source: str | None = None
    """Scenario document path (additive)."""
    origin: OriginInfo | None = None
    """Scenario origin (additive)."""
    fingerprint: str | None = None
    """Digest of everything that decides a trial's outcome: the scenario definition,
    harness, host and version, model and budget (``--resume`` reuses trials whose
    fingerprint matches; additive)."""
    definition: str | None = None
    """Digest of the scenario document and fixture alone (``compare`` warns when it
    differs between two runs; additive)."""
    stats: ScenarioStatistics | None = None
    """Statistics (additive)."""
    tokens: int | None = None
    """Total tokens over all trials (additive)."""
    cost: float | None = None
    """Total cost over all trials (additive)."""
    description: str | None = None
    """The scenario's description."""
    activity: ScenarioActivity | None = None
    """What the agent did over the trials with a transcript (additive)."""
    prompt: str | None = None
    """The prompt every trial's agent received: the scenario's ``task.prompt`` (additive)."""
    arms: dict[str, ScenarioResult] | None = None
    """The other arms' results for this scenario, by arm name, each in this shape; the
    fields above are the control arm's (additive; docs/variants.md)."""


class MetaConfig(OutputModel):
    """The resolved run budget."""

    trials: int
    """Trials per scenario."""
    timeout_ms: int
    """Host-session timeout per trial."""
    max_sessions: int
    """Host sessions per run."""
    max_tokens: int
    """Token threshold per trial."""
    setup_timeout_ms: int
    """Fixed setup timeout."""
    check_timeout_default_ms: int
    """Default command-check timeout."""


class Totals(OutputModel):
    """Run-wide totals (additive)."""

    trials: int
    """Trials in the report."""
    verdicts: dict[str, int]
    """Count of trials per verdict."""
    tokens: int
    """Sum of reported tokens."""
    cost: float
    """Sum of reported cost."""


class CleanupFailure(OutputModel):
    """A sandbox (or the run root) that could not be removed after the run."""

    path: str
    """The first path left behind."""
    reason: str
    """Why it could not be removed."""
    count: int = 1
    """How many entries could not be removed."""


#: A scenario's decision in an adaptive run: ``compare``'s verdicts, or ``new`` (not in BASE).
AdaptiveDecision = Literal["improved", "regressed", "unchanged", "inconclusive", "new"]
#: Why an adaptive run stopped adding trials to a scenario.
AdaptiveStop = Literal[
    "decided",
    "undecidable",
    "max-trials",
    "max-sessions",
    "max-cost",
    "fixed-count",
    "interrupted",
]


class AdaptiveLook(OutputModel):
    """The statistic at one look of an adaptive run (additive)."""

    trials: int
    """HEAD trials run when the look was taken (a planned look)."""
    passed: int
    """HEAD passes so far."""
    graded: int
    """HEAD graded trials so far (the denominator)."""
    difference: float
    """HEAD pass rate minus BASE pass rate."""
    interval: tuple[float, float]
    """Newcombe interval of the difference at the look confidence (``lookConfidence``)."""
    p_value: float
    """Two-sided Fisher exact p-value of this look."""
    adjusted_p: float
    """``pValue`` scaled to alpha: ``pValue * alpha / criticalP`` (``exact-pocock``) or
    ``pValue`` times the planned looks and the family size (``bonferroni-looks``), capped
    at 1; a change needs it at most alpha."""
    verdict: Literal["improved", "regressed", "unchanged", "inconclusive"]
    """The verdict rule at this look."""
    decidable: float | None = None
    """Chance of a decision at a later look, when this look decided nothing (futility)."""


class AdaptiveScenario(OutputModel):
    """One scenario of an adaptive run: its baseline, looks and decision (additive)."""

    baseline_passed: int | None = None
    """BASE passes (null for a ``new`` scenario)."""
    baseline_graded: int | None = None
    """BASE graded trials (null for a ``new`` scenario)."""
    changed: bool | None = None
    """Set when the scenario's definition digest differs from BASE's."""
    looks: list[AdaptiveLook]
    """Every look taken, in order."""
    decision: AdaptiveDecision
    """The decision when the scenario stopped."""
    stopped: AdaptiveStop
    """Why no more trials were added."""
    trials: int
    """HEAD trials that ran (skipped-budget ones excluded)."""
    fixed_trials: int | None = None
    """Trials a fixed-count run would need for the same decision (``compare``'s planning)."""
    compare_verdict: Literal["improved", "regressed", "unchanged", "inconclusive"] | None = None
    """``compare``'s one-look verdict on the final counts (null for ``new``)."""
    critical_p: float | None = None
    """The design's critical Fisher p-value for this baseline size (null for ``new``)."""
    look_confidence: float | None = None
    """Confidence of this scenario's look intervals (the unchanged rule; null for ``new``)."""
    scenario: str | None = None
    """With arms: the scenario (the record's key is ``scenario@arm``)."""
    variant: str | None = None
    """With arms: the arm decided against the control; ``baseline*`` are the control's
    counts at its last look."""


class AdaptiveOverall(OutputModel):
    """The stratified overall row of an adaptive run: ``compare``'s, on the final counts."""

    base_rate: float
    """BASE's pass rate, weighted over the scenarios (Mantel-Haenszel weights)."""
    head_rate: float
    """HEAD's pass rate with the same weights."""
    difference: float
    """``headRate - baseRate``."""
    interval: tuple[float, float]
    """Interval of the difference at ``1 - alpha`` (MOVER over the scenarios' Wilson intervals)."""
    p_value: float
    """Exact stratified (conditional) test of no difference in any scenario."""
    adjusted_p: float
    """``pValue`` adjusted as ``compare`` adjusts it (Holm over the family)."""
    verdict: Literal["improved", "regressed", "unchanged", "inconclusive"]
    """``compare``'s verdict of the overall row."""
    scenarios: int
    """Scenarios in the row (common to both runs, graded on both sides)."""


class AdaptiveRecord(OutputModel):
    """The decision record of ``run --until-decided`` (additive; see docs/report.md)."""

    method: Literal["exact-pocock", "exact-pocock-arms", "bonferroni-looks"]
    """``exact-pocock``: the same critical values at every look, calibrated exactly to
    alpha (docs/statistics.md); ``exact-pocock-arms``: the same, calibrated for a control
    arm that grows with the arms (docs/variants.md); ``bonferroni-looks``: alpha spent
    evenly over the planned looks (reports of earlier versions)."""
    baseline: str
    """The BASE report that was read (with arms: ``control arm NAME``)."""
    baseline_run_id: str
    """BASE's run id (with arms: this run's)."""
    control: str | None = None
    """With arms: the control arm every other arm was decided against."""
    alpha: float
    """Error rate over all looks (changes: over the family too)."""
    margin: float
    """Largest change (0-1 scale) counted as unchanged."""
    family_size: int
    """Tests sharing alpha for changes (as ``compare`` counts them)."""
    looks: list[int]
    """Planned looks: HEAD trial counts, first to ``maxTrials``."""
    look_confidence: float
    """Confidence of the look intervals: the lowest over the scenarios (``exact-pocock``), or
    ``1 - alpha / len(looks)`` (``bonferroni-looks``)."""
    futility: float | None = None
    """A scenario stops ``undecidable`` when the chance of any later decision is below this."""
    min_trials: int
    """Trials at the first look."""
    max_trials: int
    """Most trials per scenario."""
    new_trials: int
    """Trials of each scenario not in BASE (``new``): the configured count."""
    max_cost: float | None = None
    """``--max-cost`` in USD, when given."""
    cost: float
    """Host-reported cost of the run's trials (USD)."""
    scenarios: dict[str, AdaptiveScenario]
    """Per scenario, by name."""
    trials_used: int
    """HEAD trials that ran, over every scenario."""
    fixed_per_scenario: int
    """``--trials`` of the fixed-count run reaching the same decisions: the most that any
    scenario's decision needs (its ``fixedTrials``)."""
    fixed_trials: int
    """Trials of that fixed-count run: ``fixedPerScenario`` times the scenarios."""
    saving: int
    """``fixedTrials - trialsUsed``."""
    compare_agrees: bool
    """Whether ``compare`` on the final counts makes every decision the run made."""
    overall: AdaptiveOverall | None = None
    """The stratified overall row on the final counts (null with fewer than two scenarios)."""


class ShardLoad(OutputModel):
    """One shard of a balanced split: its trials and how long it was expected to take."""

    shard: str
    """``I/N``."""
    trials: int
    """Trials of the plan assigned to it."""
    expected_ms: int
    """Expected makespan: its trials' expected session durations run ``jobs`` at a time."""
    actual_ms: int | None = None
    """The shard's wall time (``meta.wallTimeMs`` of its report), once known."""


class ShardBalance(OutputModel):
    """How ``--balance duration`` split the plan into shards (additive; docs/scaling.md)."""

    by: Literal["duration"]
    """What the shards were balanced by."""
    from_run_id: str
    """Run id of the report whose trial durations were the estimates (``--balance-from``)."""
    jobs: int
    """Trials at once assumed for every shard (this run's ``--jobs``)."""
    expected_makespan_ms: int
    """The longest shard's expected makespan."""
    round_robin_makespan_ms: int
    """The longest shard's expected makespan had the plan been split round robin."""
    actual_makespan_ms: int | None = None
    """The longest ``actualMs`` once every shard's is known (a merged report)."""
    estimated: list[str] | None = None
    """Scenarios with no duration in that report, estimated as the mean of the others."""
    shards: list[ShardLoad]
    """Every shard, 1 to N."""


class TamperedFile(OutputModel):
    """A file or directory in the run directory the engine did not create (additive)."""

    path: str
    """Its name in the run directory."""
    moved_to: str
    """Where it was moved, relative to the run directory (kept, never deleted)."""


class HostSource(OutputModel):
    """Where the host CLI of a run came from (additive; docs/hosts.md).

    ``managed``: a pinned version run from the managed host cache, with the npm
    integrity of its package; ``path``: the executable found on ``PATH``.
    """

    kind: Literal["managed", "path"]
    """``managed`` (``eval.hostVersion`` / ``--host-version``) or ``path`` (no pin)."""
    executable: str | None = None
    """The executable the run started (absent in a merged report whose shards differ)."""
    package: str | None = None
    """``managed``: the npm package and version, e.g. ``@anthropic-ai/claude-code@2.1.332``."""
    integrity: str | None = None
    """``managed``: the package's npm integrity (``sha512-...``), checked on every use."""


class LimitsRecord(OutputModel):
    """The per-trial resource limits a run enforced (additive; absent values: not limited)."""

    memory_mb: int | None = None
    """``memoryMb``: memory of each trial's processes together."""
    pids: int | None = None
    """``pids``: processes and threads of each trial at once."""
    cpus: float | None = None
    """``cpus``: CPU time per scheduling period, in CPUs."""
    tmp_mb: int | None = None
    """``tmpMb``: size of each private tmpfs under ``os`` isolation."""
    cgroup: Literal["v2", "v1"] | None = None
    """The control-group hierarchy that enforced them (absent when none was needed)."""


class Meta(OutputModel):
    """Run metadata."""

    atlante: str
    """Version of the engine that wrote the report."""
    host: str
    """Host name."""
    model: str
    """Model (``unknown`` when neither configured nor reported)."""
    model_version: str
    """Model version (``unknown`` unless reported)."""
    config: MetaConfig
    """Resolved budget."""
    engine: str = "atlante-eval"
    """The engine that wrote the report (additive)."""
    format_version: int = REPORT_FORMAT_VERSION
    """Version of the additive fields (additive)."""
    host_version: str | None = None
    """Host CLI version (additive)."""
    host_source: HostSource | None = None
    """Where the host CLI came from: a managed pinned install or PATH (additive)."""
    started_at: str | None = None
    """UTC start time, ISO 8601 (additive)."""
    ended_at: str | None = None
    """UTC end time, ISO 8601 (additive)."""
    wall_time_ms: int | None = None
    """Total wall time of the run (additive)."""
    jobs: int | None = None
    """Trials run concurrently (additive)."""
    manifest_digest: str | None = None
    """SHA-256 of the native-output manifest: the harness revision (additive)."""
    plan_digest: str | None = None
    """Digest of the trial plan, used to check shards and resumes (additive)."""
    shard: str | None = None
    """``I/N`` when this report is one shard of a plan (additive)."""
    shard_balance: ShardBalance | None = None
    """How the plan was split when the shards were balanced by duration (additive)."""
    resumed_from: str | None = None
    """The run directory whose trials were reused (``--resume``; additive)."""
    totals: Totals | None = None
    """Run totals (additive)."""
    run_root: str | None = None
    """Kept run root with ``--keep`` (additive)."""
    isolation: Literal["os"] | None = None
    """``os`` when trials ran under OS isolation; absent means ``none`` (additive)."""
    limits: LimitsRecord | None = None
    """The per-trial resource limits, when any (``eval.limits``, ``--limit``; additive)."""
    gateway: GatewaySummary | None = None
    """The model gateway's run-wide figures when it was on; absent means ``off``
    (additive; docs/gateway.md)."""
    interrupted: bool | None = None
    """Set when the run was interrupted or failed part-way (additive)."""
    cleanup_failures: list[CleanupFailure] | None = None
    """Sandboxes or the run root left behind because they could not be removed (additive)."""
    tampered: list[TamperedFile] | None = None
    """Foreign entries found in the run directory and moved aside (additive)."""
    project_modified: list[str] | None = None
    """Project files the run's trials use that changed during the run (additive)."""
    variants: list[ArmInfo] | None = None
    """The run's arms, the control first (``eval.variants``; additive; docs/variants.md).
    ``host``, ``model``, ``hostVersion`` and ``manifestDigest`` above are the control's."""
    variant_seed: int | None = None
    """The seed that shuffled the arms' order within each block of trials (additive)."""
    regraded_from: str | None = None
    """The run id of the report this one regraded: same trials, current checks (additive)."""


class RunReport(OutputModel):
    """A run report (``report.json``)."""

    run_id: str
    """``YYYY-MM-DDTHH-MM-SS-xxxx``."""
    meta: Meta
    """Run metadata."""
    scenarios: dict[str, ScenarioResult] = Field(default_factory=dict)
    """Per-scenario results, keyed by name in sorted order."""
    adaptive: AdaptiveRecord | None = None
    """The decision record of an adaptive run (``--until-decided``; additive)."""
    uplift: UpliftRecord | None = None
    """Every arm against the control arm (``eval.variants``; additive; docs/variants.md)."""

    def to_json(self) -> str:
        """Serialise as the report file: 2-space JSON with a trailing newline."""
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=2) + "\n"

    def all_trials(self) -> list[TrialResult]:
        """Every trial, scenario by scenario."""
        return [trial for result in self.scenarios.values() for trial in result.trials]

    def exit_code(self) -> int:
        """0 when every trial passed (vacuously for none), else 1."""
        return 0 if all(t.verdict == "pass" for t in self.all_trials()) else 1
