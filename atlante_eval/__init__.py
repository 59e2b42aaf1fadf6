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
    "compare": ("CompareResult", "compare_reports"),
    "diagnostics": ("Diagnostic", "DiagnosticError"),
    "events": (
        "DiagnosticNotice",
        "ProgressEvent",
        "RunFinished",
        "RunStarted",
        "ScenarioFinished",
        "ScenarioLooked",
        "ScenarioStarted",
        "TrialFinished",
        "TrialStarted",
    ),
    "hosts": ("Host", "HostError", "SessionEnd", "SessionUsage", "TrialContext"),
    "junit": ("junit_xml",),
    "merge": ("merge_reports",),
    "options": ("RunOptions",),
    "report": ("CheckResult", "Meta", "RunReport", "ScenarioResult", "TrialResult"),
    "reports_io": ("load_report",),
    "runner": ("EvalRunError", "run_eval"),
    "selftest": ("run_selftest",),
    "suite": ("Suite", "load_suite"),
    "transcript": ("TranscriptEntry", "load_transcript"),
}

if TYPE_CHECKING:
    from .compare import CompareResult as CompareResult
    from .compare import compare_reports as compare_reports
    from .diagnostics import Diagnostic as Diagnostic
    from .diagnostics import DiagnosticError as DiagnosticError
    from .events import DiagnosticNotice as DiagnosticNotice
    from .events import ProgressEvent as ProgressEvent
    from .events import RunFinished as RunFinished
    from .events import RunStarted as RunStarted
    from .events import ScenarioFinished as ScenarioFinished
    from .events import ScenarioLooked as ScenarioLooked
    from .events import ScenarioStarted as ScenarioStarted
    from .events import TrialFinished as TrialFinished
    from .events import TrialStarted as TrialStarted
    from .hosts import Host as Host
    from .hosts import HostError as HostError
    from .hosts import SessionEnd as SessionEnd
    from .hosts import SessionUsage as SessionUsage
    from .hosts import TrialContext as TrialContext
    from .junit import junit_xml as junit_xml
    from .merge import merge_reports as merge_reports
    from .options import RunOptions as RunOptions
    from .report import CheckResult as CheckResult
    from .report import Meta as Meta
    from .report import RunReport as RunReport
    from .report import ScenarioResult as ScenarioResult
    from .report import TrialResult as TrialResult
    from .reports_io import load_report as load_report
    from .runner import EvalRunError as EvalRunError
    from .runner import run_eval as run_eval
    from .selftest import run_selftest as run_selftest
    from .suite import Suite as Suite
    from .suite import load_suite as load_suite
    from .transcript import TranscriptEntry as TranscriptEntry
    from .transcript import load_transcript as load_transcript

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
