"""Hostile input: property-based tests over every parser of untrusted text.

Configuration, scenario documents and native-output manifests are written from
arbitrary bytes and from structured mutations of valid documents; loading them
must either succeed or raise the documented error (``DiagnosticError``, or
``NativeOutputsError`` for ``read_native_outputs``). Host streams are fed
arbitrary JSON-ish events and arbitrary bytes through the real process pipeline;
the parsers must never raise, and whatever they observe must make a valid,
serialisable report.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario, write_native
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reports import meta

from atlante_eval import RunReport, SessionUsage, TrialResult, load_suite
from atlante_eval.choices import TOKEN_CEILING
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts.base import COST_CEILING, run_json_stream
from atlante_eval.hosts.streams import ERROR_LIMIT, ClaudeStream, OpenCodeStream, close_session
from atlante_eval.project.config import load_project
from atlante_eval.project.native import NativeOutputsError, read_native_outputs
from atlante_eval.report import finalize, summarize

FUZZ = settings(
    max_examples=int(os.environ.get("ATLANTE_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

#: Keys the parsers look for, so generated documents reach deep code paths.
KEYS = [
    "$schema", "version", "name", "task", "fixture", "prompt", "setup", "agent", "checks",
    "type", "path", "pattern", "regex", "run", "expectExit", "outputMatches", "timeoutMs",
    "allow", "budget", "trials", "maxSessions", "maxTokens", "eval", "host", "hosts",
    "scenarios", "include", "model", "description", "format", "files", "kind", "id", "sha256",
    "part", "tokens", "total", "input", "output", "reasoning", "cache", "read", "write", "cost",
    "message", "usage", "input_tokens", "output_tokens", "cache_read_input_tokens", "result",
    "subtype", "is_error", "error", "data", "statusCode", "api_error_status", "providerID",
    "modelID", "modelInfo", "modelRef", "permission_denials", "tool_name", "tool_input",
    "event", "api_message_id", "total_cost_usd", "state", "step_finish", "errors",
]  # fmt: skip
STRINGS = [
    "opencode", "claude-code", "0.1", "step_finish", "step-finish", "assistant", "result",
    "success", "error", "error_max_turns", "message_start", "message_delta", "stream_event",
    "agent", "skill", "command", "file-exists", "file-absent", "file-contains",
    "file-unchanged", "diff-allowlist", "eval/fixtures/app", "eval/scenarios/*.eval.json*",
    "https://atlante.sh/schema/v0.1/schema.json", "https://atlante.sh/schema/v0.2/schema.json",
    "https://atlante.sh/schema/v0.1/eval-scenario.json", "atlante-opencode-native",
    "acme/model-x", "../etc", "/abs", ".git", "a\0b", "(", "\ud800", "",
]  # fmt: skip

leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**320)
    | st.floats()
    | st.sampled_from(STRINGS)
    | st.text(max_size=12)
)
keys = st.sampled_from(KEYS) | st.text(max_size=8)
json_values = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
events = st.dictionaries(keys, json_values, max_size=6)


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with a few random edits: values replaced, keys removed or added."""
    value = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, 4))):
        value = _mutate_once(draw, value)
    return value


def _mutate_once(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["descend", "replace", "delete", "add"]))
        if action == "descend":
            value[key] = _mutate_once(draw, value[key])
        elif action == "replace":
            value[key] = draw(json_values)
        elif action == "delete":
            del value[key]
        else:
            value[draw(keys)] = draw(json_values)
        return value
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        value[index] = _mutate_once(draw, value[index])
        return value
    return draw(json_values)


def _encode(value: Any) -> bytes:
    """Write a mutated document as JSON (non-ASCII escaped, so lone surrogates survive)."""
    return json.dumps(value, indent=2).encode()


# -- configuration ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A valid project whose files the tests overwrite."""
    return make_project(tmp_path / "project")


#: The configuration ``make_project`` writes, before any test overwrites it.
VALID_CONFIG: dict[str, Any] = {
    "$schema": "https://atlante.sh/schema/v0.1/schema.json",
    "hosts": ["opencode"],
    "agents": {"reviewer": "@atlante/pack/agent"},
    "eval": {
        "host": "opencode",
        "scenarios": "eval/scenarios/*.eval.json*",
        "model": "acme/model-x",
        "budget": {"trials": 2, "timeoutMs": 1000, "maxSessions": 3, "maxTokens": 10},
    },
}


def _load_project_or_diagnose(project: Path) -> None:
    try:
        load_project(project)
    except DiagnosticError as exc:
        refused = exc
    else:
        return
    assert refused.diagnostics
    assert refused.exit_code == 2


@FUZZ
@given(content=st.binary(max_size=400))
def test_config_from_arbitrary_bytes_loads_or_diagnoses(project: Path, content: bytes) -> None:
    """An atlante.jsonc of arbitrary bytes loads or raises DiagnosticError, nothing else."""
    (project / "atlante.jsonc").write_bytes(content)
    _load_project_or_diagnose(project)


@FUZZ
@given(data=st.data())
def test_mutated_config_loads_or_diagnoses(project: Path, data: st.DataObject) -> None:
    """A valid configuration with random edits loads or raises DiagnosticError."""
    document = data.draw(mutated(VALID_CONFIG))
    (project / "atlante.jsonc").write_bytes(_encode(document))
    _load_project_or_diagnose(project)
    _suite_or_diagnose(project)


# -- scenarios and discovery ----------------------------------------------------------------


def _suite_or_diagnose(project: Path) -> None:
    try:
        suite = load_suite(project)
    except DiagnosticError as exc:
        refused = exc
    else:
        assert suite.scenarios
        return
    assert refused.diagnostics
    assert refused.exit_code == 2


@FUZZ
@given(content=st.binary(max_size=400), jsonc=st.booleans())
def test_scenario_from_arbitrary_bytes_loads_or_diagnoses(
    project: Path, content: bytes, jsonc: bool
) -> None:
    """A scenario document of arbitrary bytes is discovered or diagnosed, nothing else."""
    directory = project / "eval" / "scenarios"
    for old in directory.iterdir():
        old.unlink()
    (directory / f"fuzz.eval.{'jsonc' if jsonc else 'json'}").write_bytes(content)
    _suite_or_diagnose(project)


VALID_SCENARIO = scenario(
    "fuzzed",
    setup=["python3", "-c", "pass"],
    agent="reviewer",
    description="A scenario to mutate.",
    budget={"timeoutMs": 1000},
    checks=[
        {
            "type": "command",
            "run": ["true"],
            "expectExit": 0,
            "outputMatches": "x+",
            "timeoutMs": 5,
        },
        {"type": "file-exists", "path": "README.md"},
        {"type": "file-absent", "path": "gone.txt"},
        {"type": "file-contains", "path": "README.md", "pattern": "h.llo", "regex": True},
        {"type": "file-unchanged", "path": "README.md"},
        {"type": "diff-allowlist", "allow": ["README.md", "src/a.ts"]},
    ],
)


@FUZZ
@given(data=st.data())
def test_mutated_scenario_loads_or_diagnoses(project: Path, data: st.DataObject) -> None:
    """A valid scenario with random edits is discovered or raises DiagnosticError."""
    document = data.draw(mutated(VALID_SCENARIO))
    directory = project / "eval" / "scenarios"
    for old in directory.iterdir():
        old.unlink()
    (directory / "fuzzed.eval.json").write_bytes(_encode(document))
    _suite_or_diagnose(project)


# -- native-output manifests -----------------------------------------------------------------


def _read_native_or_refuse(project: Path) -> None:
    try:
        native = read_native_outputs(project, "opencode")
    except NativeOutputsError as exc:
        refused = exc
    else:
        assert all(len(item.sha256) == 64 for item in native.files)
        return
    assert str(refused).startswith("native output verification failed")


@FUZZ
@given(content=st.binary(max_size=400))
def test_manifest_from_arbitrary_bytes_verifies_or_refuses(project: Path, content: bytes) -> None:
    """A manifest of arbitrary bytes verifies or raises NativeOutputsError, nothing else."""
    (project / ".atlante" / "opencode-native.json").write_bytes(content)
    _read_native_or_refuse(project)


@FUZZ
@given(data=st.data())
def test_mutated_manifest_verifies_or_refuses(project: Path, data: st.DataObject) -> None:
    """A valid manifest with random edits verifies or raises NativeOutputsError."""
    write_native(project, skills={"review": "Review well."})
    manifest = project / ".atlante" / "opencode-native.json"
    document = data.draw(mutated(json.loads(manifest.read_text())))
    manifest.write_bytes(_encode(document))
    _read_native_or_refuse(project)


# -- host streams -----------------------------------------------------------------------------


def _report_from(usage: SessionUsage) -> None:
    """What a stream observed must make a valid report that serialises and reloads."""
    trial = TrialResult(
        i=0,
        verdict="pass",
        duration_ms=1,
        tokens=usage.tokens,
        cost=usage.cost,
        model=usage.model,
        model_version=usage.model_version,
        host_evidence=usage.evidence or None,
    )
    report = finalize(
        RunReport(
            run_id="2026-01-01T00-00-00-0000",
            meta=meta(),
            scenarios={"fuzz": summarize([trial, trial.model_copy(update={"i": 1})])},
        )
    )
    assert RunReport.model_validate_json(report.to_json()) is not None


def _check_usage(usage: SessionUsage) -> None:
    assert usage.tokens is None or isinstance(usage.tokens, int)
    assert usage.cost is None or math.isfinite(usage.cost)
    assert usage.model is None or isinstance(usage.model, str)


@FUZZ
@given(stream=st.lists(events, max_size=12), max_tokens=st.integers(0, 10**6))
def test_stream_parsers_accept_any_events(stream: list[dict[str, Any]], max_tokens: int) -> None:
    """Both parsers take any JSON objects without raising; what they saw makes a valid report."""
    for parser in (OpenCodeStream, ClaudeStream):
        usage = SessionUsage(max_tokens)
        reader = parser(usage)
        for event in stream:
            reader.feed(event)
        _check_usage(usage)
        assert reader.error is None or len(reader.error) <= ERROR_LIMIT + len("… truncated")
        _report_from(usage)


_ECHO = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"


def _echo_through_pipeline(payload: bytes, parser: type[OpenCodeStream | ClaudeStream]) -> None:
    usage = SessionUsage(10**9)
    reader = parser(usage)

    async def main() -> None:
        result = await run_json_stream(
            [sys.executable, "-c", _ECHO],
            cwd=Path.cwd(),
            env={},
            on_event=reader.feed,
            stdin=payload,
        )
        assert result.returncode == 0
        end = close_session("fuzz", result, host_error=reader.error)
        assert end.error is None or isinstance(end.error, str)

    anyio.run(main)
    _check_usage(usage)
    _report_from(usage)


json_lines = st.lists(
    events.map(lambda e: json.dumps(e).encode()) | st.binary(max_size=60), max_size=8
).map(lambda lines: b"\n".join(lines))


@settings(max_examples=40, deadline=None)
@given(payload=st.binary(max_size=2000) | json_lines, claude=st.booleans())
def test_arbitrary_bytes_through_the_process_pipeline(payload: bytes, claude: bool) -> None:
    """Arbitrary stdout bytes, split into lines and decoded as a host's are, never raise."""
    _echo_through_pipeline(payload, ClaudeStream if claude else OpenCodeStream)


#: Stands for an integer of 401 digits (beyond float range) in the lines below.
HUGE = "1" + "0" * 400
STEP = '{"type": "step_finish", "part": {"tokens": NUMBER, "cost": NUMBER}}'
MESSAGE = '{"type": "assistant", "message": {"id": "ID", "usage": {"input_tokens": 1e308}}}'


@pytest.mark.parametrize(
    "lines",
    [
        ['{"type": "step_finish", "part": {"tokens": {"total": HUGE}}}'],
        ['{"type": "step_finish", "part": {"tokens": 1e999, "cost": -1e999}}'],
        ['{"type": "assistant", "message": {"id": "m", "usage": {"input_tokens": HUGE}}}'],
        ['{"type": "result", "usage": {"input_tokens": 1e308, "output_tokens": 1e308}}'],
        ['{"type": "result", "total_cost_usd": HUGE}'],
        ['{"type": "error", "error": {"name": "X", "statusCode": HUGE}}'],
        [STEP.replace("NUMBER", v) for v in ("1e308", "1e308", "-1e308", "-1e308", "-1e308")],
        [MESSAGE.replace("ID", i) for i in "abc"],
    ],
    ids=[
        "huge-int-tokens",
        "infinite",
        "huge-claude-usage",
        "overflowing-sum",
        "huge-cost",
        "huge-status",
        "steps-summing-past-float-range",
        "messages-summing-past-float-range",
    ],
)
def test_extreme_numbers_do_not_break_parsers_or_reports(lines: list[str]) -> None:
    """Numbers beyond float range or summing past it are ignored or capped, never raise."""
    for parser in (OpenCodeStream, ClaudeStream):
        usage = SessionUsage(10)
        reader = parser(usage)
        for line in lines:
            reader.feed(json.loads(line.replace("HUGE", HUGE)))
        _check_usage(usage)
        assert usage.tokens is None or abs(usage.tokens) <= TOKEN_CEILING
        assert usage.cost is None or abs(usage.cost) <= COST_CEILING
        _report_from(usage)
