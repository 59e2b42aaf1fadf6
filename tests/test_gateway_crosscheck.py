"""The cross-check pairs transcript tool calls with model requests; settle() decides figures."""

from __future__ import annotations

import json
from typing import Any

from atlante_eval.gateway.crosscheck import LEDGER_LIMIT, TranscriptLedger, cross_check
from atlante_eval.gateway.exchange import opening_text
from atlante_eval.gateway.metering import CallFigures
from atlante_eval.gateway.routes import TrialRoute
from atlante_eval.hosts import SessionUsage
from atlante_eval.run.metering import MISMATCH_TOKENS, TrialMeter, settle
from atlante_eval.transcript import ResultEntry, ToolCallEntry


def _route(*calls: tuple[str | None, str, dict[str, Any]], stop: str = "tool_use") -> TrialRoute:
    """A bound route whose one answer asked for ``calls``."""
    route = TrialRoute("http://127.0.0.1:1", max_tokens=10**6)
    route.bind("http://provider")
    figures = CallFigures(model="m", input_tokens=100, output_tokens=10, stop_reason=stop)
    for call_id, name, arguments in calls:
        tool = figures.tool(call_id, name)
        assert tool is not None
        tool.parsed = arguments
    route.observe(110)
    route.end(
        route.begin("anthropic-messages", "/v1/messages"),
        figures,
        status=200,
        streamed=True,
        readable=True,
        ended=None,
    )
    return route


def _ledger(*calls: tuple[str, str, dict[str, Any]], results: int = 1) -> TranscriptLedger:
    ledger = TranscriptLedger()
    for call_id, name, arguments in calls:
        ledger.observe(ToolCallEntry(id=call_id, name=name, input=arguments))
    for _ in range(results):
        ledger.observe(ResultEntry(status="success"))
    return ledger


def test_a_transcript_that_matches_the_requests_is_clean() -> None:
    """Each call paired by id and name: no evidence."""
    route = _route(("t1", "Write", {"a": 1}), ("t2", "Bash", {"command": "ls"}))
    ledger = _ledger(("t2", "Bash", {"command": "ls"}), ("t1", "Write", {"a": 1}))
    assert cross_check(route, ledger, completed=True) == []


def test_a_forged_call_and_a_reused_id_are_unrequested() -> None:
    """A call the model never asked for, and a forged copy reusing a real call's id."""
    route = _route(("t1", "Write", {"a": 1}))
    ledger = _ledger(("t1", "Write", {"a": 1}), ("t9", "Skill", {}), ("t1", "Write", {"a": 1}))
    found = cross_check(route, ledger, completed=True)
    assert [f.kind for f in found] == ["unrequested-tool-call", "unrequested-tool-call"]
    assert "Skill (id t9)" in found[0].detail


def test_a_call_the_transcript_renamed_or_lost_is_unrecorded() -> None:
    """The Write's line glued away: its result shows as ``unknown``, the Write is missing."""
    route = _route(("t1", "Write", {"a": 1}))
    ledger = _ledger(("t1", "unknown", {}))
    kinds = [f.kind for f in cross_check(route, ledger, completed=True)]
    assert kinds == ["unrequested-tool-call", "unrecorded-tool-call"]


def test_missing_calls_count_only_when_the_session_ended_normally() -> None:
    """A session cut short (timeout, budget, error) may not have run every requested call."""
    route = _route(("t1", "Write", {"a": 1}))
    assert cross_check(route, _ledger(), completed=False) == []
    assert [f.kind for f in cross_check(route, _ledger(), completed=True)] == [
        "unrecorded-tool-call"
    ]


def test_calls_of_a_cut_off_answer_are_not_required() -> None:
    """An answer stopped at max_tokens may leave a half-written call the host drops."""
    route = _route(("t1", "Write", {"a": 1}), stop="max_tokens")
    assert cross_check(route, _ledger(), completed=True) == []


def test_without_provider_ids_calls_pair_by_name_and_input() -> None:
    """A provider that gives no call ids: same name and same input pair."""
    route = _route((None, "bash", {"command": "ls"}))
    assert cross_check(route, _ledger(("c1", "bash", {"command": "ls"})), completed=True) == []
    found = cross_check(route, _ledger(("c1", "bash", {"command": "rm"})), completed=True)
    assert [f.kind for f in found] == ["unrequested-tool-call", "unrecorded-tool-call"]


def test_a_second_result_needs_a_subagent_call() -> None:
    """Two results: tampering, unless the model started a subagent (which may run in the
    background, asked to or not: Claude Code 2.1.332 backgrounds subagents on its own)."""
    plain = _route(("t1", "Bash", {"command": "ls"}))
    ledger = _ledger(("t1", "Bash", {"command": "ls"}), results=2)
    assert [f.kind for f in cross_check(plain, ledger, completed=True)] == ["second-result"]
    for tool in ("Task", "Agent"):
        subagent = _route(("t1", tool, {"prompt": "x"}))
        ledger = _ledger(("t1", tool, {"prompt": "x"}), results=2)
        assert cross_check(subagent, ledger, completed=True) == []
        ledger = _ledger(("t1", tool, {"prompt": "x"}), results=3)
        found = cross_check(subagent, ledger, completed=True)
        assert [f.kind for f in found] == ["second-result"]


def test_findings_and_the_ledger_are_bounded() -> None:
    """Thousands of forged calls: ten findings kept (the last counts the rest); a capped ledger."""
    route = _route()
    ledger = TranscriptLedger()
    for n in range(LEDGER_LIMIT + 3):
        ledger.observe(ToolCallEntry(id=f"f{n}", name="Read", input={}))
    assert len(ledger.calls) == LEDGER_LIMIT
    assert ledger.omitted == 3
    found = cross_check(route, ledger, completed=True)
    assert len(found) == 10
    assert found[-1].detail.endswith(f"(and {LEDGER_LIMIT - 10} more)")


def _meter(route: TrialRoute) -> TrialMeter:
    meter = TrialMeter(route, None)
    meter.transcribed = True
    return meter


def test_the_gateway_figures_win_and_a_higher_host_total_is_evidence() -> None:
    """Host 5,000,000 tokens, provider 110: the report says 110, with usage-mismatch."""
    host = SessionUsage(10**9)
    host.observe_tokens(5_000_000)
    host.observe_cost(0.5)
    settled = settle(_meter(_route()), host, None, completed=True)
    assert (settled.tokens, settled.cost, settled.model) == (110, 0.5, "m")
    assert settled.usage is not None
    assert (settled.usage.source, settled.usage.host_tokens, settled.usage.cost_source) == (
        "gateway",
        5_000_000,
        "host",
    )
    assert [e.kind for e in settled.tampered] == ["usage-mismatch"]


def test_without_a_transcript_nothing_is_cross_checked() -> None:
    """No transcript was written (no run directory): no call can be missing from it."""
    meter = TrialMeter(_route(("t1", "Write", {})), None)
    settled = settle(meter, SessionUsage(10**9), None, completed=True)
    assert settled.tampered == ()
    assert settled.usage is not None
    assert settled.usage.source == "gateway"


def test_a_host_total_within_the_tolerance_or_below_is_no_evidence() -> None:
    """The host may count less (side calls it ignores) or slightly more, within tolerance."""
    for reported in (0, 110, 110 + MISMATCH_TOKENS):
        host = SessionUsage(10**9)
        host.observe_tokens(reported)
        assert settle(_meter(_route()), host, None, completed=True).tampered == ()


def test_an_unbound_or_unused_route_falls_back_to_the_host() -> None:
    """Declined, unused, unreadable: the host's figures, and why."""
    host = SessionUsage(10**9)
    host.observe_tokens(42)
    declined = TrialRoute("http://127.0.0.1:1", max_tokens=100)
    declined.decline("an OAuth login the host refreshes itself")
    unused = TrialRoute("http://127.0.0.1:1", max_tokens=100)
    unused.bind("http://provider")
    for route, why in ((declined, "OAuth"), (unused, "no model call")):
        settled = settle(_meter(route), host, None, completed=True)
        assert settled.tokens == 42
        assert settled.usage is not None
        assert settled.usage.source == "host"
        assert why in (settled.usage.fallback or "")


def _answer(route: TrialRoute, opening: str, *calls: tuple[str, str, dict[str, Any]]) -> None:
    """One more answer on ``route``, in a conversation opening with ``opening``."""
    figures = CallFigures(model="m", input_tokens=10, output_tokens=1, stop_reason="tool_use")
    for call_id, name, arguments in calls:
        tool = figures.tool(call_id, name)
        assert tool is not None
        tool.parsed = arguments
    start = route.begin("openai-chat", "/v1/chat/completions", opening=opening)
    route.end(start, figures, status=200, streamed=False, readable=True, ended=None)


def test_a_subagents_own_calls_need_not_be_in_the_stream() -> None:
    """OpenCode prints only the main session's calls: a call its subagent's conversation
    asked for is not unrecorded; the same call in the main conversation is."""
    task = ("c1", "task", {"description": "Check", "prompt": "Check hello.txt.", "x": 1})
    route = _route(task)
    _answer(route, "<system-reminder>ctx</system-reminder>\nCheck hello.txt.", ("c2", "bash", {}))
    ledger = _ledger(task)  # the subagent's bash is not in the host's stream
    assert cross_check(route, ledger, completed=True) == []
    _answer(route, "Do it. [script:main]", ("c3", "bash", {"command": "rm"}))
    found = cross_check(route, ledger, completed=True)
    assert [f.kind for f in found] == ["unrecorded-tool-call"]
    assert "bash (id c3)" in found[0].detail


def test_the_opening_text_of_each_api() -> None:
    """The first user text of Anthropic Messages, OpenAI Chat and Responses bodies."""
    anthropic = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    chat = {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "yo"}]}
    responses = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "r"}]}]}
    assert opening_text(json.dumps(anthropic).encode()) == "hi"
    assert opening_text(json.dumps(chat).encode()) == "yo"
    assert opening_text(json.dumps(responses).encode()) == "r"
    assert opening_text(json.dumps({"input": "plain"}).encode()) == "plain"
    assert opening_text(b"not json") is None
    assert opening_text(b"[1]") is None
    assert opening_text(json.dumps({"messages": [{"role": "assistant"}]}).encode()) is None
