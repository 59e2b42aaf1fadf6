"""The run report: its models, how it is summarised, read, published, merged and compared.

:mod:`.models` is the ``report.json`` format (pydantic, the reference's field
names); :mod:`.events` the progress events a run emits; :mod:`.results` summarises
trials into scenario results; :mod:`.loading` reads a report back;
:mod:`.publish` writes files atomically into a reserved run directory;
:mod:`.run_files` is the run directory's layout, opened without following links;
:mod:`.outputs` checks output paths up front; :mod:`.consistency` refuses a report
whose stored figures contradict its trials; :mod:`.final_state` is a trial's
stored final state (the file ``regrade`` rebuilds it from), :mod:`.blobstore` the
run's content store and :mod:`.state_files` reads and carries final states.
:mod:`.merge`, :mod:`.compare` and :mod:`.regrade_delta` (imported by their module
path, off the launch path) merge shards, compare two runs, and list the trials a
regrade changed. :mod:`.arm_models` and :mod:`.arms` are a run with arms
(``eval.variants``): its models and each arm's view; :mod:`.uplift` (by its module
path) compares every arm with the control.
"""

from __future__ import annotations

from .arm_models import ArmInfo, ArmTotals, UpliftRecord
from .arms import (
    arm_names,
    arm_of,
    arm_pair,
    arm_scenarios,
    arm_view,
    arms_as_scenarios,
    control_arm,
    trial_key,
)
from .consistency import check_consistent
from .events import (
    DiagnosticNotice,
    HostInstallProgress,
    ProgressEvent,
    RunFinished,
    RunStarted,
    ScenarioFinished,
    ScenarioLooked,
    ScenarioStarted,
    TrialFinished,
    TrialStarted,
)
from .loading import load_report, report_path
from .models import (
    REPORT_FILE,
    Activity,
    AdaptiveDecision,
    AdaptiveLook,
    AdaptiveOverall,
    AdaptiveRecord,
    AdaptiveScenario,
    AdaptiveStop,
    CheckResult,
    CheckVerdict,
    CleanupFailure,
    DeniedAccess,
    FinalStateRef,
    HostSource,
    LimitReached,
    LimitsRecord,
    Meta,
    MetaConfig,
    OriginInfo,
    OutputModel,
    RunReport,
    ScenarioResult,
    ShardBalance,
    ShardLoad,
    TamperedFile,
    TamperEvidence,
    TamperKind,
    ToolCallCounts,
    TrialAttempt,
    TrialRegrade,
    TrialResult,
    Verdict,
    model_version_of,
    utc_timestamp,
)
from .outputs import check_output_paths
from .publish import (
    PublishError,
    ReportDir,
    atomic_write,
    check_unchanged,
    new_run_id,
    publish_error,
    report_base,
    report_failed,
    reserve_report_dir,
    tampering_warning,
)
from .results import finalize, statistics_of, summarize
from .run_files import TRIALS_DIR, RunFiles, TrialFiles
from .usage import CostSource, GatewaySummary, TrialUsage, UsageSource

__all__ = [
    "REPORT_FILE",
    "TRIALS_DIR",
    "Activity",
    "AdaptiveDecision",
    "AdaptiveLook",
    "AdaptiveOverall",
    "AdaptiveRecord",
    "AdaptiveScenario",
    "AdaptiveStop",
    "ArmInfo",
    "ArmTotals",
    "CheckResult",
    "CheckVerdict",
    "CleanupFailure",
    "CostSource",
    "DeniedAccess",
    "DiagnosticNotice",
    "FinalStateRef",
    "GatewaySummary",
    "HostInstallProgress",
    "HostSource",
    "LimitReached",
    "LimitsRecord",
    "Meta",
    "MetaConfig",
    "OriginInfo",
    "OutputModel",
    "ProgressEvent",
    "PublishError",
    "ReportDir",
    "RunFiles",
    "RunFinished",
    "RunReport",
    "RunStarted",
    "ScenarioFinished",
    "ScenarioLooked",
    "ScenarioResult",
    "ScenarioStarted",
    "ShardBalance",
    "ShardLoad",
    "TamperEvidence",
    "TamperKind",
    "TamperedFile",
    "ToolCallCounts",
    "TrialAttempt",
    "TrialFiles",
    "TrialFinished",
    "TrialRegrade",
    "TrialResult",
    "TrialStarted",
    "TrialUsage",
    "UpliftRecord",
    "UsageSource",
    "Verdict",
    "arm_names",
    "arm_of",
    "arm_pair",
    "arm_scenarios",
    "arm_view",
    "arms_as_scenarios",
    "atomic_write",
    "check_consistent",
    "check_output_paths",
    "check_unchanged",
    "control_arm",
    "finalize",
    "load_report",
    "model_version_of",
    "new_run_id",
    "publish_error",
    "report_base",
    "report_failed",
    "report_path",
    "reserve_report_dir",
    "statistics_of",
    "summarize",
    "tampering_warning",
    "trial_key",
    "utc_timestamp",
]
