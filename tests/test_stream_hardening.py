"""What an agent can write into its host's stream changes no figure and grows no table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from atlante_eval.hosts.base import TAMPER_LIMIT, SessionUsage
from atlante_eval.hosts.claude_transcript import ClaudeNormalizer
from atlante_eval.hosts.credentials import stored_secret_values
from atlante_eval.hosts.opencode_transcript import OpenCodeNormalizer
from atlante_eval.hosts.streams import MESSAGES_LIMIT, ClaudeStream, OpenCodeStream
from atlante_eval.isolation.proxy import DENIED_LIMIT, FilterProxy
from atlante_eval.report import TrialResult
from atlante_eval.run.redaction import redact_trial
from atlante_eval.transcript import Redactor, ToolCallEntry
from atlante_eval.transcript.activity import MAX_NAMES, ActivityCounter
from atlante_eval.transcript.normalize import (
    NAME_CHARS,
    OPEN_LIMIT,
    PENDING_INPUT_CHARS,
    Bounded,
)


def test_usage_only_grows_and_negative_figures_are_evidence() -> None:
    """A lower cumulative figure is ignored; a negative one is ignored and kept as evidence."""
    usage = SessionUsage(max_tokens=100)
    usage.observe_tokens(50)
    usage.observe_tokens(20)
    usage.observe_tokens(-999_999_999)
    usage.observe_cost(0.5)
    usage.observe_cost(0.1)
    usage.observe_cost(-1234.5)
    assert (usage.tokens, usage.cost) == (50, 0.5)
    assert [e.kind for e in usage.tampered] == ["negative-usage", "negative-usage"]
    usage.observe_tokens(101)
    assert usage.exceeded


def test_tampering_evidence_is_capped_and_counted() -> None:
    """Past TAMPER_LIMIT pieces, evidence is only counted; details are cut."""
    usage = SessionUsage(max_tokens=10)
    for _ in range(TAMPER_LIMIT + 7):
        usage.tamper("malformed-line", "x" * 10_000, 3)
    assert len(usage.tampered) == TAMPER_LIMIT
    assert usage.tampered_omitted == 7
    assert len(usage.tampered[0].detail) < 400


def _assistant(message_id: str, **usage: int) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": message_id, "usage": usage}}


def test_claude_counts_on_after_a_result_and_flags_what_follows_the_last() -> None:
    """Messages after a result add to it; events after the final result are evidence."""
    usage = SessionUsage(max_tokens=10**9)
    stream = ClaudeStream(usage)
    stream.feed(_assistant("m1", input_tokens=100))
    stream.feed({"type": "result", "usage": {"input_tokens": 10}, "modelUsage": {}})
    assert usage.tokens == 100  # a smaller result lowers nothing
    stream.feed(_assistant("m2", input_tokens=30))
    assert usage.tokens == 130
    stream.feed(_assistant("m2", input_tokens=5))  # a smaller snapshot of the same message
    assert usage.tokens == 130
    stream.feed({"type": "result", "usage": {"input_tokens": 30}})
    stream.finish()
    assert usage.tampered == []
    stream.feed({"type": "system", "subtype": "x"})
    stream.finish()
    assert [e.kind for e in usage.tampered] == ["after-result"]


def test_claude_message_table_is_bounded_and_the_sum_exact() -> None:
    """Millions of forged message ids keep at most MESSAGES_LIMIT open; the sum stays exact."""
    usage = SessionUsage(max_tokens=10**12)
    stream = ClaudeStream(usage)
    for i in range(MESSAGES_LIMIT * 40):
        stream.feed(_assistant(f"forged-{i}", input_tokens=1))
    assert len(stream._messages) == MESSAGES_LIMIT
    assert usage.tokens == MESSAGES_LIMIT * 40


def test_opencode_negative_steps_do_not_count() -> None:
    """A forged negative step is evidence, not a subtraction."""
    usage = SessionUsage(max_tokens=10**9)
    stream = OpenCodeStream(usage)
    for tokens in (300, -1_000_000, 200):
        stream.feed({"type": "step_finish", "part": {"tokens": {"total": tokens}, "cost": 0.1}})
    assert usage.tokens == 500
    assert [e.kind for e in usage.tampered] == ["negative-usage"]


def _tool_use(call: str, size: int = 10, name: str = "Bash") -> dict[str, Any]:
    block = {"type": "tool_use", "id": call, "name": name, "input": {"command": "x" * size}}
    return {"type": "assistant", "message": {"id": f"m-{call}", "content": [block]}}


def test_claude_pending_calls_are_bounded_and_written_as_pending() -> None:
    """Past OPEN_LIMIT open calls the oldest is written at once as pending, inputs capped."""
    normalizer = ClaudeNormalizer()
    entries = []
    for i in range(OPEN_LIMIT + 5):
        entries += normalizer.feed(_tool_use(f"c{i}", size=100_000), i)
    written = [e for e in entries if isinstance(e, ToolCallEntry)]
    assert [e.id for e in written] == [f"c{i}" for i in range(5)]
    assert all(e.status == "pending" for e in written)
    assert len(json.dumps(written[0].input)) <= PENDING_INPUT_CHARS
    rest = [e for e in normalizer.finish(10_000) if isinstance(e, ToolCallEntry)]
    assert len(rest) == OPEN_LIMIT


def test_claude_turns_are_never_negative_and_names_are_cut() -> None:
    """A forged num_turns of -1,000,000 counts no turn; a huge tool name is cut."""
    normalizer = ClaudeNormalizer()
    counter = ActivityCounter()
    for entry in normalizer.feed({"type": "result", "num_turns": -1_000_000}, 1):
        counter.add(entry)
    for entry in normalizer.feed(_tool_use("c1", name="N" * 100_000), 2):
        counter.add(entry)
    for entry in normalizer.finish(3):
        counter.add(entry)
    activity = counter.activity()
    assert activity.turns == 0
    assert [len(name) for name in activity.tool_calls.by_name] == [NAME_CHARS]


def test_activity_counts_at_most_max_names_by_name() -> None:
    """Forged tool names beyond MAX_NAMES count in the total, not by name."""
    counter = ActivityCounter()
    for i in range(MAX_NAMES + 50):
        counter.add(ToolCallEntry(t=i, id=str(i), name=f"tool-{i}", tool_kind="other", status="ok"))
    activity = counter.activity()
    assert activity.tool_calls.total == MAX_NAMES + 50
    assert len(activity.tool_calls.by_name) == MAX_NAMES


def test_opencode_child_sessions_are_bounded() -> None:
    """Forged subagent sessions keep at most OPEN_LIMIT child entries."""
    normalizer = OpenCodeNormalizer()
    for i in range(OPEN_LIMIT + 10):
        part = {"tool": "task", "callID": f"c{i}", "state": {"metadata": {"sessionId": f"s{i}"}}}
        normalizer.feed({"type": "tool_use", "part": part}, i)
    assert len(normalizer._children) == OPEN_LIMIT
    assert normalizer._children.overflow == 10


def test_bounded_table_pushes_out_the_oldest() -> None:
    """put returns what it pushed out; a re-put key becomes the newest."""
    table: Bounded[str, int] = Bounded(2)
    assert table.put("a", 1) is None
    assert table.put("b", 2) is None
    assert table.put("a", 3) is None
    assert table.put("c", 4) == ("b", 2)
    assert table.drain() == [("a", 3), ("c", 4)]
    assert table.overflow == 1


def test_the_proxy_remembers_at_most_denied_limit_destinations() -> None:
    """A flood of distinct refused destinations is counted, not stored."""
    proxy = FilterProxy(())
    for i in range(DENIED_LIMIT + 30):
        proxy._deny(f"host-{i}.example:443")
    proxy._deny("host-0.example:443")
    assert len(proxy.denied) == DENIED_LIMIT
    assert proxy.denied["host-0.example:443"] == 2
    assert proxy.denied_omitted == 30


def test_redact_trial_reaches_every_string_keys_included() -> None:
    """A secret in any field of a trial, keys included, is replaced; the rest is kept."""
    secret = "sk-secret-value-123456"
    trial = TrialResult.model_validate(
        {
            "i": 0,
            "verdict": "fail",
            "durationMs": 5,
            "error": f"boom {secret}",
            "diff": f"+KEY={secret}\n",
            "changedFiles": [f"{secret}.txt"],
            "hostEvidence": {secret: [{"input": secret}]},
        }
    )
    cleaned = redact_trial(trial, Redactor([secret]))
    assert secret not in cleaned.model_dump_json()
    assert cleaned.changed_files == ["[redacted].txt"]
    assert cleaned.host_evidence == {"[redacted]": [{"input": "[redacted]"}]}
    assert redact_trial(trial, Redactor()) is trial


def test_stored_credentials_are_secrets(tmp_path: Path) -> None:
    """The tokens of a stored credentials file are redacted values; descriptions are not."""
    path = tmp_path / ".credentials.json"
    document = {
        "claudeAiOauth": {
            "accessToken": "sk-ant-oat01-abc",
            "refreshToken": "sk-ant-ort01-def",
            "expiresAt": 1,
            "scopes": ["user:inference"],
            "subscriptionType": "max",
        }
    }
    path.write_text(json.dumps(document))
    assert sorted(stored_secret_values(path)) == ["sk-ant-oat01-abc", "sk-ant-ort01-def"]
    assert stored_secret_values(tmp_path / "missing.json") == []
