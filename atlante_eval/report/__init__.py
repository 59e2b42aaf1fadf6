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

from typing import TYPE_CHECKING, Any

from .._util.lazy import export_homes, load_export

#: Every re-exported name, by the module that defines it (loaded on first use).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".arm_models": ("ArmInfo", "ArmTotals", "UpliftRecord"),
    ".arms": (
        "arm_names",
        "arm_of",
        "arm_pair",
        "arm_scenarios",
        "arm_view",
        "arms_as_scenarios",
        "control_arm",
        "trial_key",
    ),
    ".consistency": ("check_consistent",),
    ".events": (
        "DiagnosticNotice",
        "HostInstallProgress",
        "ProgressEvent",
        "RunFinished",
        "RunStarted",
        "ScenarioFinished",
        "ScenarioLooked",
        "ScenarioStarted",
        "TrialFinished",
        "TrialStarted",
    ),
    ".loading": ("load_report", "report_path"),
    ".models": (
        "REPORT_FILE",
        "Activity",
        "AdaptiveDecision",
        "AdaptiveLook",
        "AdaptiveOverall",
        "AdaptiveRecord",
        "AdaptiveScenario",
        "AdaptiveStop",
        "CheckResult",
        "CheckVerdict",
        "CleanupFailure",
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
        "ScenarioResult",
        "ShardBalance",
        "ShardLoad",
        "TamperedFile",
        "TamperEvidence",
        "TamperKind",
        "ToolCallCounts",
        "TrialAttempt",
        "TrialRegrade",
        "TrialResult",
        "Verdict",
        "model_version_of",
        "utc_timestamp",
    ),
    ".outputs": ("check_output_paths",),
    ".publish": (
        "PublishError",
        "ReportDir",
        "atomic_write",
        "check_unchanged",
        "new_run_id",
        "publish_error",
        "report_base",
        "report_failed",
        "reserve_report_dir",
        "tampering_warning",
    ),
    ".results": ("finalize", "statistics_of", "summarize"),
    ".run_files": ("TRIALS_DIR", "RunFiles", "TrialFiles"),
    ".usage": ("CostSource", "GatewaySummary", "TrialUsage", "UsageSource"),
}

if TYPE_CHECKING:
    from .arm_models import ArmInfo as ArmInfo
    from .arm_models import ArmTotals as ArmTotals
    from .arm_models import UpliftRecord as UpliftRecord
    from .arms import arm_names as arm_names
    from .arms import arm_of as arm_of
    from .arms import arm_pair as arm_pair
    from .arms import arm_scenarios as arm_scenarios
    from .arms import arm_view as arm_view
    from .arms import arms_as_scenarios as arms_as_scenarios
    from .arms import control_arm as control_arm
    from .arms import trial_key as trial_key
    from .consistency import check_consistent as check_consistent
    from .events import DiagnosticNotice as DiagnosticNotice
    from .events import HostInstallProgress as HostInstallProgress
    from .events import ProgressEvent as ProgressEvent
    from .events import RunFinished as RunFinished
    from .events import RunStarted as RunStarted
    from .events import ScenarioFinished as ScenarioFinished
    from .events import ScenarioLooked as ScenarioLooked
    from .events import ScenarioStarted as ScenarioStarted
    from .events import TrialFinished as TrialFinished
    from .events import TrialStarted as TrialStarted
    from .loading import load_report as load_report
    from .loading import report_path as report_path
    from .models import REPORT_FILE as REPORT_FILE
    from .models import Activity as Activity
    from .models import AdaptiveDecision as AdaptiveDecision
    from .models import AdaptiveLook as AdaptiveLook
    from .models import AdaptiveOverall as AdaptiveOverall
    from .models import AdaptiveRecord as AdaptiveRecord
    from .models import AdaptiveScenario as AdaptiveScenario
    from .models import AdaptiveStop as AdaptiveStop
    from .models import CheckResult as CheckResult
    from .models import CheckVerdict as CheckVerdict
    from .models import CleanupFailure as CleanupFailure
    from .models import DeniedAccess as DeniedAccess
    from .models import FinalStateRef as FinalStateRef
    from .models import HostSource as HostSource
    from .models import LimitReached as LimitReached
    from .models import LimitsRecord as LimitsRecord
    from .models import Meta as Meta
    from .models import MetaConfig as MetaConfig
    from .models import OriginInfo as OriginInfo
    from .models import OutputModel as OutputModel
    from .models import RunReport as RunReport
    from .models import ScenarioResult as ScenarioResult
    from .models import ShardBalance as ShardBalance
    from .models import ShardLoad as ShardLoad
    from .models import TamperedFile as TamperedFile
    from .models import TamperEvidence as TamperEvidence
    from .models import TamperKind as TamperKind
    from .models import ToolCallCounts as ToolCallCounts
    from .models import TrialAttempt as TrialAttempt
    from .models import TrialRegrade as TrialRegrade
    from .models import TrialResult as TrialResult
    from .models import Verdict as Verdict
    from .models import model_version_of as model_version_of
    from .models import utc_timestamp as utc_timestamp
    from .outputs import check_output_paths as check_output_paths
    from .publish import PublishError as PublishError
    from .publish import ReportDir as ReportDir
    from .publish import atomic_write as atomic_write
    from .publish import check_unchanged as check_unchanged
    from .publish import new_run_id as new_run_id
    from .publish import publish_error as publish_error
    from .publish import report_base as report_base
    from .publish import report_failed as report_failed
    from .publish import reserve_report_dir as reserve_report_dir
    from .publish import tampering_warning as tampering_warning
    from .results import finalize as finalize
    from .results import statistics_of as statistics_of
    from .results import summarize as summarize
    from .run_files import TRIALS_DIR as TRIALS_DIR
    from .run_files import RunFiles as RunFiles
    from .run_files import TrialFiles as TrialFiles
    from .usage import CostSource as CostSource
    from .usage import GatewaySummary as GatewaySummary
    from .usage import TrialUsage as TrialUsage
    from .usage import UsageSource as UsageSource

_HOMES = export_homes(_EXPORTS)

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _HOMES, name)
