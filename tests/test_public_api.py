"""The public surface of ``atlante_eval`` is curated and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import atlante_eval

EXPECTED = {
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
    "TrialContext",
    "TrialFinished",
    "TrialResult",
    "TrialStarted",
    "TranscriptEntry",
    "__version__",
    "compare_reports",
    "junit_xml",
    "load_report",
    "load_suite",
    "load_transcript",
    "merge_reports",
    "run_eval",
    "run_selftest",
}


def test_public_names_are_exactly_the_curated_list() -> None:
    """``__all__`` lists exactly the documented public names; a drift fails here."""
    assert set(atlante_eval.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    """Each public name imports from its module on first access."""
    for name in atlante_eval.__all__:
        assert getattr(atlante_eval, name) is not None


def test_import_is_light() -> None:
    """Importing the package does not import the engine, pydantic models or anyio."""
    code = (
        "import sys, atlante_eval\n"
        "heavy = [m for m in ('atlante_eval.engine', 'anyio', 'pydantic') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
