"""The normalizers: real host samples, nesting, and arbitrary event streams."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atlante_eval import TranscriptEntry
from atlante_eval.hosts.claude_transcript import ClaudeNormalizer
from atlante_eval.hosts.opencode_transcript import OpenCodeNormalizer
from atlante_eval.transcript import (
    ErrorEntry,
    Normalizer,
    RawEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    UsageEntry,
    parse_entry,
)

HERE = Path(__file__).parent / "data" / "hosts"


def _sample(name: str) -> list[dict[str, Any]]:
    path = HERE / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _run(normalizer: Normalizer, events: list[dict[str, Any]]) -> list[TranscriptEntry]:
    entries: list[TranscriptEntry] = []
    for t, event in enumerate(events):
        entries += normalizer.feed(event, t)
    return entries + normalizer.finish(len(events))


def _kinds(entries: Sequence[TranscriptEntry]) -> list[str]:
    return [e.kind for e in entries if not isinstance(e, UsageEntry)]


CLAUDE_INIT = {
    "type": "system",
    "subtype": "init",
    "model": "claude-x",
    "claude_code_version": "2.1.332",
    "tools": ["Bash", "Write", "Skill", "Task"],
    "agents": ["general-purpose", {"name": "reviewer"}],
    "skills": ["python-tests"],
}


def _assistant(
    *blocks: dict[str, Any], parent: str | None = None, mid: str = "m"
) -> dict[str, Any]:
    return {
        "type": "assistant",
        "parent_tool_use_id": parent,
        "message": {"id": mid, "content": list(blocks), "usage": {"input_tokens": 10}},
    }


def _result(
    call: str, content: Any, *, error: bool = False, parent: str | None = None
) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call, "content": content, "is_error": error}
    return {"type": "user", "parent_tool_use_id": parent, "message": {"content": [block]}}


def test_claude_sample_stream_becomes_entries() -> None:
    entries = _run(ClaudeNormalizer(), _sample("claude-stream.jsonl"))
    assert _kinds(entries) == ["session-start", "tool-call", "text", "result"]
    start, call = entries[0], next(e for e in entries if isinstance(e, ToolCallEntry))
    assert isinstance(start, SessionStartEntry)
    assert (start.host, start.version, start.model) == ("claude-code", "2.1.332", "claude-opus-5-5")
    assert "Write" in start.tools
    assert "general-purpose" in start.agents
    assert start.skills
    assert (call.name, call.tool_kind, call.status) == ("Write", "write", "ok")
    assert call.input == {"file_path": "/tmp/trial/work/hello.txt", "content": "hi"}
    assert call.output is not None
    assert call.output.startswith("File created successfully")
    result = entries[-1] if isinstance(entries[-1], ResultEntry) else entries[-2]
    assert isinstance(result, ResultEntry)
    assert (result.status, result.text, result.turns, result.tokens) == (
        "success",
        "done",
        2,
        24687,
    )


def test_claude_api_error_is_one_error_entry() -> None:
    entries = _run(ClaudeNormalizer(), _sample("claude-error-529.jsonl"))
    errors = [e for e in entries if isinstance(e, ErrorEntry)]
    assert len(errors) == 1
    assert errors[0].status == 529
    assert "mock overloaded" in errors[0].message
    assert [e.status for e in entries if isinstance(e, ResultEntry)] == ["error"]


def test_claude_skill_subagent_and_nested_calls() -> None:
    events = [
        CLAUDE_INIT,
        _assistant(
            {"type": "tool_use", "id": "s1", "name": "Skill", "input": {"skill": "python-tests"}}
        ),
        _result("s1", "Launching skill"),
        _assistant(
            {
                "type": "tool_use",
                "id": "t1",
                "name": "Task",
                "input": {"subagent_type": "reviewer", "prompt": "look"},
            },
            mid="m2",
        ),
        {"type": "user", "parent_tool_use_id": "t1", "message": {"content": "look"}},
        _assistant(
            {"type": "text", "text": "inside"},
            {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}},
            parent="t1",
            mid="m3",
        ),
        _result("b1", [{"type": "text", "text": "a.txt"}], parent="t1"),
        _result("t1", "review done"),
        _assistant(
            {"type": "tool_use", "id": "w1", "name": "Write", "input": {"file_path": "x"}}, mid="m4"
        ),
        _result(
            "w1",
            "Claude requested permissions to use Write, but you haven't granted it yet.",
            error=True,
        ),
        _assistant(
            {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "y"}}, mid="m5"
        ),
        {"type": "brand_new_event", "x": 1},
    ]
    entries = [e for e in _run(ClaudeNormalizer(), events) if not isinstance(e, UsageEntry)]
    assert _kinds(entries) == [
        "session-start",
        "skill",
        "tool-call",
        "subagent",
        "text",
        "tool-call",
        "tool-call",
        "tool-call",
        "raw",
        "tool-call",
    ]
    skill, subagent, text = entries[1], entries[3], entries[4]
    assert isinstance(skill, SkillEntry)
    assert skill.name == "python-tests"
    assert isinstance(subagent, SubagentEntry)
    assert (subagent.name, subagent.call_id) == ("reviewer", "t1")
    assert isinstance(text, TextEntry)
    assert (text.agent, text.parent) == ("reviewer", "t1")
    calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    assert [(c.id, c.tool_kind, c.status, c.parent) for c in calls] == [
        ("s1", "skill", "ok", None),
        ("b1", "shell", "ok", "t1"),
        ("t1", "subagent", "ok", None),
        ("w1", "write", "denied", None),
        ("r1", "read", "pending", None),
    ]
    assert calls[1].output == "a.txt"
    assert calls[3].error is not None
    assert calls[3].output is None
    raw = entries[8]
    assert isinstance(raw, RawEntry)
    assert raw.event == {"type": "brand_new_event", "x": 1}


def test_opencode_sample_streams_become_entries() -> None:
    entries = _run(OpenCodeNormalizer(version="1.18.33"), _sample("opencode-stream.jsonl"))
    assert _kinds(entries) == ["session-start", "tool-call", "text", "result"]
    call = entries[1]
    assert isinstance(call, ToolCallEntry)
    assert (call.name, call.tool_kind, call.output, call.duration_ms) == (
        "write",
        "write",
        "Wrote file successfully.",
        42,
    )
    assert call.ts is not None
    assert call.ts.endswith("Z")
    result = entries[-1]
    assert isinstance(result, ResultEntry)
    assert (result.status, result.turns, result.tokens) == ("success", 2, 14855)
    failed = _run(OpenCodeNormalizer(), _sample("opencode-error-400.jsonl"))
    [error] = [e for e in failed if isinstance(e, ErrorEntry)]
    assert error.status == 400
    assert "mock says no" in error.message


def test_opencode_v2_dialect_skill_task_and_errors() -> None:
    def tool(name: str, call: str, status: str, **state: Any) -> dict[str, Any]:
        return {
            "type": "tool-use",
            "sessionID": "main",
            "part": {"tool": name, "callID": call, "state": {"status": status, **state}},
        }

    events = [
        {"type": "step-start", "sessionID": "main", "part": {}},
        tool("skill", "c1", "completed", input={"name": "python-tests"}, output="loaded"),
        tool(
            "task",
            "c2",
            "completed",
            input={"subagent_type": "general", "prompt": "p"},
            output="ok",
            metadata={"sessionId": "child"},
        ),
        {"type": "text", "sessionID": "child", "part": {"text": "from the child"}},
        tool(
            "bash",
            "c3",
            "error",
            input={"command": "rm -rf /"},
            error="The user rejected permission",
        ),
        tool("grep", "c4", "error", input={"pattern": "x"}, error="boom"),
        {
            "type": "step-finish",
            "sessionID": "main",
            "part": {"reason": "stop", "tokens": {"total": 5}},
        },
        {"type": "who-knows", "sessionID": "main"},
    ]
    entries = [e for e in _run(OpenCodeNormalizer(), events) if not isinstance(e, UsageEntry)]
    assert _kinds(entries) == [
        "session-start",
        "skill",
        "tool-call",
        "subagent",
        "tool-call",
        "text",
        "tool-call",
        "tool-call",
        "raw",
        "result",
    ]
    calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    assert [(c.name, c.tool_kind, c.status) for c in calls] == [
        ("skill", "skill", "ok"),
        ("task", "subagent", "ok"),
        ("bash", "shell", "denied"),
        ("grep", "search", "error"),
    ]
    child = entries[5]
    assert isinstance(child, TextEntry)
    assert child.parent == "c2"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [
    "type",
    "subtype",
    "message",
    "content",
    "id",
    "name",
    "input",
    "tool_use_id",
    "is_error",
    "parent_tool_use_id",
    "part",
    "tool",
    "state",
    "status",
    "output",
    "error",
    "callID",
    "sessionID",
    "time",
    "start",
    "end",
    "tokens",
    "cost",
    "usage",
    "result",
    "num_turns",
    "tools",
    "agents",
    "skills",
    "text",
    "metadata",
    "sessionId",
    "timestamp",
    "data",
    "statusCode",
    "api_error_status",
    "is_api_error_message",
    "reason",
]
TYPES = [
    "system",
    "assistant",
    "user",
    "result",
    "stream_event",
    "init",
    "tool_use",
    "tool-use",
    "tool_result",
    "text",
    "step_start",
    "step_finish",
    "step-finish",
    "error",
    "Skill",
    "Task",
    "skill",
    "task",
    "completed",
    "permission_denied",
]
keyed = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from(TYPES)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6)
    ),
    max_leaves=30,
)
events = st.dictionaries(st.sampled_from(KEYS), keyed | json_values, max_size=8)


@settings(
    max_examples=int(os.environ.get("ATLANTE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(stream=st.lists(events, max_size=12), claude=st.booleans())
def test_normalizers_accept_any_event_stream(stream: list[dict[str, Any]], claude: bool) -> None:
    """Arbitrary events never raise, and every entry serialises and reads back."""
    normalizer: Normalizer = ClaudeNormalizer() if claude else OpenCodeNormalizer()
    for entry in _run(normalizer, stream):
        text = entry.model_dump_json(by_alias=True)
        assert parse_entry(json.loads(text)).kind == entry.kind
