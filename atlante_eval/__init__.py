"""atlante-eval: evaluate coding-agent harnesses with deterministic checks.

The public API. Names load lazily on first use, so ``import atlante_eval`` (and
the CLI's start-up) stays fast.

:data:`_EXPORTS` is the one list of public names, by the module that defines
each: ``__all__`` and the lazy loader are derived from it. The ``TYPE_CHECKING``
imports below repeat it for type checkers, which cannot run code;
``tests/test_public_api.py`` fails when the two (or ``docs/python-api.md``) differ.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

#: Every public name, by the module (under ``atlante_eval``) that defines it.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "deltas.core": ("behaviour_deltas", "compare_trial_sets"),
    "deltas.trials": ("TrialSet",),
    "diagnostics": ("Diagnostic", "DiagnosticError"),
    "history.location": ("parse_history_url",),
    "history.store": ("HistoryStore", "open_store"),
    "hosts": ("Host", "HostError", "SessionEnd", "SessionUsage", "TrialContext"),
    "hosts.cache": ("CachedHost",),
    "hosts.managed": ("cached_host", "install_host", "list_hosts", "remove_host"),
    "project.suite": ("Suite", "load_suite"),
    "report.arms": ("arm_view",),
    "report.behaviour": ("BehaviourDeltas", "ScenarioBehaviour"),
    "report.compare": ("CompareResult", "compare_reports"),
    "report.events": (
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
    "report.loading": ("load_report",),
    "report.merge": ("merge_reports",),
    "report.models": ("CheckResult", "Meta", "RunReport", "ScenarioResult", "TrialResult"),
    "run.options": ("RunOptions",),
    "run.prepare": ("NothingToRerun",),
    "run.regrade": ("RegradeOutcome", "regrade_run"),
    "run.runner": ("EvalRunError", "run_eval"),
    "selftest.core": ("run_selftest",),
    "transcript.model_calls": ("ModelCall", "load_model_calls"),
    "transcript.models": ("TranscriptEntry", "load_transcript"),
    "views.junit": ("junit_xml",),
}

if TYPE_CHECKING:
    from .deltas.core import behaviour_deltas as behaviour_deltas
    from .deltas.core import compare_trial_sets as compare_trial_sets
    from .deltas.trials import TrialSet as TrialSet
    from .diagnostics import Diagnostic as Diagnostic
    from .diagnostics import DiagnosticError as DiagnosticError
    from .history.location import parse_history_url as parse_history_url
    from .history.store import HistoryStore as HistoryStore
    from .history.store import open_store as open_store
    from .hosts import Host as Host
    from .hosts import HostError as HostError
    from .hosts import SessionEnd as SessionEnd
    from .hosts import SessionUsage as SessionUsage
    from .hosts import TrialContext as TrialContext
    from .hosts.cache import CachedHost as CachedHost
    from .hosts.managed import cached_host as cached_host
    from .hosts.managed import install_host as install_host
    from .hosts.managed import list_hosts as list_hosts
    from .hosts.managed import remove_host as remove_host
    from .project.suite import Suite as Suite
    from .project.suite import load_suite as load_suite
    from .report.arms import arm_view as arm_view
    from .report.behaviour import BehaviourDeltas as BehaviourDeltas
    from .report.behaviour import ScenarioBehaviour as ScenarioBehaviour
    from .report.compare import CompareResult as CompareResult
    from .report.compare import compare_reports as compare_reports
    from .report.events import DiagnosticNotice as DiagnosticNotice
    from .report.events import HostInstallProgress as HostInstallProgress
    from .report.events import ProgressEvent as ProgressEvent
    from .report.events import RunFinished as RunFinished
    from .report.events import RunStarted as RunStarted
    from .report.events import ScenarioFinished as ScenarioFinished
    from .report.events import ScenarioLooked as ScenarioLooked
    from .report.events import ScenarioStarted as ScenarioStarted
    from .report.events import TrialFinished as TrialFinished
    from .report.events import TrialStarted as TrialStarted
    from .report.loading import load_report as load_report
    from .report.merge import merge_reports as merge_reports
    from .report.models import CheckResult as CheckResult
    from .report.models import Meta as Meta
    from .report.models import RunReport as RunReport
    from .report.models import ScenarioResult as ScenarioResult
    from .report.models import TrialResult as TrialResult
    from .run.options import RunOptions as RunOptions
    from .run.prepare import NothingToRerun as NothingToRerun
    from .run.regrade import RegradeOutcome as RegradeOutcome
    from .run.regrade import regrade_run as regrade_run
    from .run.runner import EvalRunError as EvalRunError
    from .run.runner import run_eval as run_eval
    from .selftest.core import run_selftest as run_selftest
    from .transcript.model_calls import ModelCall as ModelCall
    from .transcript.model_calls import load_model_calls as load_model_calls
    from .transcript.models import TranscriptEntry as TranscriptEntry
    from .transcript.models import load_transcript as load_transcript
    from .views.junit import junit_xml as junit_xml

_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(["__version__", *_HOME])


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'atlante_eval' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
