"""atlante-eval: evaluate coding-agent harnesses with deterministic checks.

The public API. Names load lazily on first use, so ``import atlante_eval`` (and
the CLI's start-up) stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .compare import CompareResult, compare_reports
    from .diagnostics import Diagnostic, DiagnosticError
    from .events import (
        DiagnosticNotice,
        ProgressEvent,
        RunFinished,
        RunStarted,
        ScenarioFinished,
        ScenarioLooked,
        ScenarioStarted,
        TrialFinished,
        TrialStarted,
    )
    from .hosts import Host, HostError, SessionEnd, SessionUsage, TrialContext
    from .junit import junit_xml
    from .merge import merge_reports
    from .options import RunOptions
    from .report import CheckResult, Meta, RunReport, ScenarioResult, TrialResult
    from .reports_io import load_report
    from .runner import EvalRunError, run_eval
    from .selftest import run_selftest
    from .suite import Suite, load_suite
    from .transcript import TranscriptEntry, load_transcript

__all__ = [
    "CheckResult",
    "CompareResult",
    "Diagnostic",
    "DiagnosticError",
    "DiagnosticNotice",
    "EvalRunError",
    "Host",
    "HostError",
    "Meta",
    "ProgressEvent",
    "RunFinished",
    "RunOptions",
    "RunReport",
    "RunStarted",
    "ScenarioFinished",
    "ScenarioLooked",
    "ScenarioResult",
    "ScenarioStarted",
    "SessionEnd",
    "SessionUsage",
    "Suite",
    "TranscriptEntry",
    "TrialContext",
    "TrialFinished",
    "TrialResult",
    "TrialStarted",
    "__version__",
    "compare_reports",
    "junit_xml",
    "load_report",
    "load_suite",
    "load_transcript",
    "merge_reports",
    "run_eval",
    "run_selftest",
]

_HOME: dict[str, str] = {
    "CheckResult": "report",
    "CompareResult": "compare",
    "Diagnostic": "diagnostics",
    "DiagnosticError": "diagnostics",
    "DiagnosticNotice": "events",
    "EvalRunError": "runner",
    "Host": "hosts",
    "HostError": "hosts",
    "Meta": "report",
    "ProgressEvent": "events",
    "RunFinished": "events",
    "RunOptions": "options",
    "RunReport": "report",
    "RunStarted": "events",
    "ScenarioFinished": "events",
    "ScenarioLooked": "events",
    "ScenarioResult": "report",
    "ScenarioStarted": "events",
    "SessionEnd": "hosts",
    "SessionUsage": "hosts",
    "Suite": "suite",
    "TrialContext": "hosts",
    "TrialFinished": "events",
    "TrialResult": "report",
    "TrialStarted": "events",
    "TranscriptEntry": "transcript",
    "compare_reports": "compare",
    "junit_xml": "junit",
    "load_report": "reports_io",
    "load_suite": "suite",
    "load_transcript": "transcript",
    "merge_reports": "merge",
    "run_eval": "runner",
    "run_selftest": "selftest",
}


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
