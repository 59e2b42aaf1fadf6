"""Loading published reports: run directories, bad input, reports of the reference tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from reports import counts, report, write

from atlante_eval import load_report
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.report import statistics_of

# A report as the reference TypeScript tool writes it: no additive field at all.
REFERENCE_REPORT: dict[str, Any] = {
    "runId": "2026-09-02T10-32-11-a3f2",
    "meta": {
        "atlante": "0.9.0",
        "host": "opencode",
        "model": "anthropic/claude-sonnet-4",
        "modelVersion": "claude-sonnet-4",
        "config": {
            "trials": 3,
            "timeoutMs": 600000,
            "maxSessions": 15,
            "maxTokens": 400000,
            "setupTimeoutMs": 300000,
            "checkTimeoutDefaultMs": 120000,
        },
    },
    "scenarios": {
        "review": {
            "trials": [
                {
                    "i": 0,
                    "verdict": "pass",
                    "durationMs": 98500,
                    "tokens": 9860,
                    "cost": 0.0123,
                    "checks": [
                        {"index": 0, "type": "file-exists", "verdict": "pass", "evidence": {}}
                    ],
                    "diff": "",
                },
                {"i": 1, "verdict": "infra-error", "durationMs": 20, "error": "spawn failed"},
                {"i": 2, "verdict": "skipped-budget", "durationMs": 0},
            ],
            "passRate": 0.5,
            "meanDurationMs": 49260,
            "spread": {"durationP95Ms": 98500},
            "description": "Review the billing API",
        }
    },
}


def _write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(DiagnosticError) as caught:
        load_report(path)
    assert caught.value.exit_code == 2
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "report-unreadable"
    assert diagnostic.next
    return diagnostic.message


def test_loads_a_run_directory_or_its_report_file(tmp_path: Path) -> None:
    """A run directory and its report.json load to the same report."""
    run = write(tmp_path / "run", report({"s": counts(2, 1)}))
    assert load_report(run) == load_report(run / "report.json") == report({"s": counts(2, 1)})


def test_reference_tool_report_loads_and_gets_statistics(tmp_path: Path) -> None:
    """A report without additive fields loads; statistics are recomputed from its trials."""
    loaded = load_report(_write_json(tmp_path / "report.json", REFERENCE_REPORT))
    result = loaded.scenarios["review"]
    assert result.stats is None
    stats = statistics_of(result)
    assert (stats.passed, stats.graded, stats.infra_errors, stats.skipped) == (1, 1, 1, 1)
    assert stats.stability == "stable-pass"


def test_reference_tool_history_quirks_are_accepted(tmp_path: Path) -> None:
    """The old checkTimeoutMs name and fractional millisecond durations still load."""
    old = json.loads(json.dumps(REFERENCE_REPORT))
    config = old["meta"]["config"]
    config["checkTimeoutMs"] = config.pop("checkTimeoutDefaultMs")
    old["scenarios"]["review"]["trials"][0]["durationMs"] = 98500.5
    loaded = load_report(_write_json(tmp_path / "report.json", old))
    assert loaded.meta.config.check_timeout_default_ms == 120000
    assert loaded.scenarios["review"].trials[0].duration_ms == 98501


def test_missing_report_is_unreadable(tmp_path: Path) -> None:
    """A path that does not exist, or a directory without report.json, is refused."""
    assert _refusal(tmp_path / "nope") == f"no report at {tmp_path / 'nope'}"
    (tmp_path / "empty").mkdir()
    assert _refusal(tmp_path / "empty") == f"no report at {tmp_path / 'empty' / 'report.json'}"


def test_invalid_json_and_bytes_are_unreadable(tmp_path: Path) -> None:
    """Truncated JSON and non-UTF-8 bytes are refused with what went wrong."""
    truncated = tmp_path / "t.json"
    truncated.write_text('{"runId": "x", "meta": {', encoding="utf-8")
    assert _refusal(truncated).endswith("is not valid JSON")
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe{}")
    assert _refusal(binary).endswith("is not valid UTF-8 (byte offset 0)")


def test_wrong_shape_points_at_the_first_problem(tmp_path: Path) -> None:
    """A document that is not a report names the first invalid values and their pointer."""
    bad = json.loads(json.dumps(REFERENCE_REPORT))
    bad["scenarios"]["review"]["trials"][1]["verdict"] = "exploded"
    path = _write_json(tmp_path / "report.json", bad)
    with pytest.raises(DiagnosticError) as caught:
        load_report(path)
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.pointer == "/scenarios/review/trials/1/verdict"
    assert "is not a valid run report: /scenarios/review/trials/1/verdict: Input should be" in (
        diagnostic.message
    )


def test_newer_format_version_suggests_an_upgrade(tmp_path: Path) -> None:
    """A report from a newer engine with unknown fields says to upgrade atlante-eval."""
    newer = json.loads(json.dumps(REFERENCE_REPORT))
    newer["meta"]["formatVersion"] = 99
    newer["meta"]["somethingNew"] = True
    path = _write_json(tmp_path / "report.json", newer)
    with pytest.raises(DiagnosticError) as caught:
        load_report(path)
    assert caught.value.diagnostics[0].next == (
        "the report uses format version 99; upgrade atlante-eval to read it"
    )
