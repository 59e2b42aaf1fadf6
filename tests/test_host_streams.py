"""The hosts' event-stream parsers, on real captured streams and on edge cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atlante_eval import SessionUsage
from atlante_eval.hosts.streams import (
    ClaudeStream,
    OpenCodeStream,
    bounded,
    close_session,
    find_model,
    normalize_claude_usage,
    normalize_tokens,
    status_reason,
)
from atlante_eval.trial import ProcessResult

DATA = Path(__file__).with_name("data") / "hosts"


def events(name: str) -> list[dict[str, Any]]:
    """Return the JSON objects of a captured stream in tests/data/hosts."""
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def feed(parser: OpenCodeStream | ClaudeStream, stream: list[dict[str, Any]]) -> None:
    """Feed every event of ``stream`` to ``parser``."""
    for event in stream:
        parser.feed(event)


def process(
    returncode: int | None, stderr: str = "", spawn_error: str | None = None
) -> ProcessResult:
    """Return a finished-process result for close_session."""
    return ProcessResult(
        returncode=returncode,
        timed_out=False,
        aborted=False,
        stdout="",
        stderr=stderr,
        spawn_error=spawn_error,
        duration_ms=1,
    )


# -- normalisation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (42, 42),
        (41.6, 42),
        ({"total": 7}, 7),
        ({"input": 3, "output": 4, "reasoning": 1, "cache": {"read": 10, "write": 2}}, 20),
        ({"input": 5}, 5),
        ({"cache": {"read": 2}}, 2),
        ({}, None),
        ({"total": "12"}, None),
        ("12", None),
        (True, None),
        (float("nan"), None),
        (None, None),
    ],
)
def test_normalize_tokens_shapes(value: object, expected: int | None) -> None:
    """OpenCode token shapes: number, total, or the sum of its parts; else None."""
    assert normalize_tokens(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"input_tokens": 100, "output_tokens": 10}, 110),
        (
            {
                "input_tokens": 1,
                "output_tokens": 2,
                "cache_creation_input_tokens": 3,
                "cache_read_input_tokens": 4,
                "server_tool_use": {"web_search_requests": 9},
            },
            10,
        ),
        ({"total": 5, "input_tokens": 100}, 5),
        ({"input": 2, "output": 3}, 5),
        ({"service_tier": "standard"}, None),
        (7, 7),
    ],
)
def test_normalize_claude_usage_shapes(value: object, expected: int | None) -> None:
    """Anthropic usage sums the four token fields; other shapes fall back to OpenCode's."""
    assert normalize_claude_usage(value) == expected


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (400, "bad request"),
        (401, "authentication failed"),
        (403, "permission denied"),
        (404, "not found"),
        (408, "request timed out"),
        (429, "rate limited"),
        (500, "host service error"),
        (502, "host service error"),
        (503, "host service unavailable"),
        (504, "host service timed out"),
        (529, "host request failed"),
    ],
)
def test_status_reasons(status: int, reason: str) -> None:
    """Each HTTP status maps to the reference's readable reason."""
    assert status_reason(status) == reason


def test_bounded_marks_truncation() -> None:
    """Long texts are cut to the limit and marked; short ones are unchanged."""
    assert bounded("abc", 5) == "abc"
    assert bounded("abcdefgh", 5) == "abcde… truncated"


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"model": {"providerID": "acme", "modelID": "model-x"}}, ("acme", "model-x")),
        ({"part": {"providerId": "p", "modelId": "m"}}, ("p", "m")),
        ({"info": {"providerID": "acme", "model": "acme/m2"}}, ("acme", "m2")),
        ({"info": {"providerID": "acme", "model": "m3"}}, ("acme", "m3")),
        ({"modelInfo": {"providerID": "acme", "id": "m4"}}, ("acme", "m4")),
        ({"modelRef": "acme-v2/model-z"}, ("acme-v2", "model-z")),
        ({"text": "see acme/model"}, None),
        ({"modelRef": "no slash"}, None),
        ({"part": {"providerID": "acme", "id": "not-under-a-model-key"}}, None),
    ],
)
def test_find_model_shapes(event: dict[str, Any], expected: tuple[str, str] | None) -> None:
    """The model search accepts the reference's shapes and nothing looser."""
    assert find_model(event) == expected


def test_find_model_ignores_tool_content() -> None:
    """A model named inside a tool's input or output is not the session's model."""
    event = {
        "type": "tool_use",
        "part": {
            "tool": "write",
            "state": {"input": {"content": {"model": {"providerID": "x", "modelID": "y"}}}},
        },
    }
    assert find_model(event) is None
    assert find_model({"part": {"text": {"modelRef": "a/b"}}}) is None


def test_find_model_prefers_model_keys() -> None:
    """A pair under a model key wins over one elsewhere in the event."""
    event = {
        "a": {"providerID": "other", "modelID": "x"},
        "model": {"providerID": "acme", "modelID": "y"},
    }
    assert find_model(event) == ("acme", "y")


# -- OpenCode -----------------------------------------------------------------------------


def test_opencode_sample_sums_step_finish_tokens() -> None:
    """The captured OpenCode stream: two steps of 7410 and 7445 tokens make 14855."""
    usage = SessionUsage(max_tokens=10**9)
    parser = OpenCodeStream(usage)
    feed(parser, events("opencode-stream.jsonl"))
    assert usage.tokens == 7410 + 7445
    assert usage.cost == 0.0
    assert usage.model is None
    assert parser.error is None


def test_opencode_steps_tokens_cost_and_model() -> None:
    """Two step events of 350 and 130 tokens cost 0.01 and 0.02: 480 tokens, 0.03 USD."""
    usage = SessionUsage(max_tokens=10**9)
    parser = OpenCodeStream(usage)
    model = {"providerID": "acme", "modelID": "model-x"}
    feed(
        parser,
        [
            {"type": "step_start", "part": {"model": model}},
            {"type": "step_finish", "part": {"tokens": {"total": 350}, "cost": 0.01}},
            {"type": "step-finish", "part": {"tokens": {"input": 100, "output": 30}, "cost": 0.02}},
        ],
    )
    assert usage.tokens == 480
    assert usage.cost == pytest.approx(0.03)
    assert (usage.model, usage.model_version) == ("acme/model-x", "model-x")


def test_opencode_non_step_usage_counts_only_before_steps() -> None:
    """A cumulative figure on other events counts until the first step usage arrives.

    The recorded figure never goes down: the step sum takes over once it passes it.
    """
    usage = SessionUsage(max_tokens=10**9)
    parser = OpenCodeStream(usage)
    parser.feed({"type": "message", "tokens": 900})
    assert usage.tokens == 900
    parser.feed({"type": "step_finish", "part": {"tokens": 100}})
    parser.feed({"type": "message", "tokens": 5000})
    assert usage.tokens == 900
    parser.feed({"type": "step_finish", "part": {"tokens": 850}})
    assert usage.tokens == 950


def test_opencode_budget_binds_mid_stream() -> None:
    """The budget callback fires on the first step that takes the sum over maxTokens."""
    fired: list[int] = []
    usage = SessionUsage(max_tokens=1000, on_exceeded=lambda: fired.append(1))
    parser = OpenCodeStream(usage)
    parser.feed({"type": "step_finish", "part": {"tokens": {"total": 600}}})
    assert not fired
    parser.feed({"type": "step_finish", "part": {"tokens": {"total": 600}}})
    assert fired == [1]
    assert usage.exceeded


def test_opencode_error_event_sample() -> None:
    """The captured 400 becomes a readable summary with name, reason, status and message."""
    usage = SessionUsage(max_tokens=10)
    parser = OpenCodeStream(usage)
    feed(parser, events("opencode-error-400.jsonl"))
    assert parser.error == "APIError: bad request: status 400: mock says no"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"name": "APIError", "statusCode": 429}, "APIError: rate limited: status 429"),
        (
            {"name": "weird name!", "data": {"statusCode": 503}},
            "host error: host service unavailable: status 503",
        ),
        ({"name": "UnknownError", "data": {"message": "boom"}}, "UnknownError: boom"),
        ({"data": {"statusCode": 99}}, "host error"),
        ({"name": "APIError", "data": {"statusCode": True}}, "APIError"),
    ],
)
def test_opencode_error_summaries(error: dict[str, Any], expected: str) -> None:
    """Error names are kept only when they look like identifiers; bad statuses are dropped."""
    parser = OpenCodeStream(SessionUsage(max_tokens=10))
    parser.feed({"type": "error", "error": error})
    assert parser.error == expected


def test_opencode_first_error_is_kept() -> None:
    """Only the first error event is the session's error."""
    parser = OpenCodeStream(SessionUsage(max_tokens=10))
    parser.feed({"type": "error", "error": {"name": "APIError", "statusCode": 401}})
    parser.feed({"type": "error", "error": {"name": "APIError", "statusCode": 500}})
    assert parser.error == "APIError: authentication failed: status 401"


# -- Claude Code --------------------------------------------------------------------------


def test_claude_sample_result_sets_final_figures() -> None:
    """The captured Claude stream: result usage 24638+49, its cost, the init model."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    feed(parser, events("claude-stream.jsonl"))
    assert usage.tokens == 24638 + 49
    assert usage.cost == pytest.approx(0.099532)
    assert usage.model == "claude-opus-5-5"
    assert parser.error is None
    assert usage.evidence == {}


def test_claude_older_sample_parses_alike() -> None:
    """The 2.1.197 stream (no timestamps, other tools) parses the same way."""
    usage = SessionUsage(max_tokens=10**9)
    feed(ClaudeStream(usage), events("claude-2.1.197-stream.jsonl"))
    assert usage.tokens == 38091 + 47
    assert usage.model == "claude-opus-4-8[1m]"


def test_claude_in_flight_total_counts_each_message_once() -> None:
    """Before the result, assistant usages add up per message id; repeats replace."""
    seen: list[int | None] = []
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    stream = events("claude-stream.jsonl")[:-1]
    first = stream[1]
    for event in [*stream[:2], first, *stream[2:]]:
        parser.feed(event)
        seen.append(usage.tokens)
    assert seen[-1] == (12267 + 1) + (12371 + 1)
    assert seen[1] == seen[2] == 12268


def test_claude_budget_binds_before_the_result() -> None:
    """maxTokens is enforced on assistant messages, not only on the final result."""
    fired: list[int] = []
    usage = SessionUsage(max_tokens=20000, on_exceeded=lambda: fired.append(1))
    parser = ClaudeStream(usage)
    stream = events("claude-stream.jsonl")
    feed(parser, stream[:2])
    assert not fired
    feed(parser, stream[2:4])
    assert fired == [1]
    assert usage.tokens == 24640


def test_claude_partial_stream_uses_the_latest_snapshot_per_message() -> None:
    """With partial messages, message_delta usage replaces message_start's for that id."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    stream = events("claude-stream-partial.jsonl")
    before_result = [e for e in stream if e.get("type") != "result"]
    feed(parser, before_result)
    assert usage.tokens == (11955 + 38) + (12053 + 8)
    feed(parser, [e for e in stream if e.get("type") == "result"])
    assert usage.tokens == 24008 + 46


def test_claude_results_count_subagents_and_later_results() -> None:
    """A background subagent makes a second result: modelUsage (cumulative) sets the figure,
    and without it the results' per-result usage adds up."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    per_model = {"m": {"inputTokens": 800, "outputTokens": 80, "cacheReadInputTokens": 0}}
    parser.feed(
        {
            "type": "result",
            "subtype": "success",
            "usage": {"input_tokens": 500, "output_tokens": 50},
            "modelUsage": per_model,
        }
    )
    assert usage.tokens == 880
    parser.feed(
        {
            "type": "result",
            "subtype": "success",
            "usage": {"input_tokens": 100, "output_tokens": 10},
            "modelUsage": per_model,
        }
    )
    assert usage.tokens == 880
    bare = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(bare)
    for tokens in (550, 110):
        parser.feed({"type": "result", "subtype": "success", "usage": {"input_tokens": tokens}})
    assert bare.tokens == 660


def test_claude_result_never_lowers_the_figure_nor_stops_counting() -> None:
    """A result lower than the streamed usage keeps it (350, not 340); later messages add."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    parser.feed(
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "model": "fable-1",
                "usage": {"input_tokens": 300, "output_tokens": 50},
            },
        }
    )
    parser.feed(
        {
            "type": "result",
            "subtype": "success",
            "usage": {"input_tokens": 300, "output_tokens": 40},
            "total_cost_usd": 0.03,
        }
    )
    assert usage.tokens == 350
    assert usage.cost == 0.03
    assert "fable" in (usage.model or "")
    parser.feed({"type": "assistant", "message": {"id": "m2", "usage": {"input_tokens": 999}}})
    assert usage.tokens == 350 + 999


def test_claude_api_error_sample_is_an_error() -> None:
    """A result with is_error (subtype success) becomes 'claude run failed' with its status."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    feed(parser, events("claude-error-529.jsonl"))
    assert parser.error is not None
    assert parser.error.startswith(
        "claude run failed: host request failed: status 529: API Error: 529"
    )
    assert usage.model == "claude-opus-5-5"
    assert usage.tokens == 0


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ({"subtype": "error_max_turns"}, "claude run error_max_turns"),
        (
            {"subtype": "error_during_execution", "errors": ["a", "b"]},
            "claude run error_during_execution: a; b",
        ),
        ({"subtype": "error_x", "error": "boom", "result": "r"}, "claude run error_x: boom"),
        (
            {"subtype": "success", "is_error": True, "api_error_status": 401, "result": "no key"},
            "claude run failed: authentication failed: status 401: no key",
        ),
        ({"subtype": "success", "is_error": True}, "claude run failed"),
        ({"subtype": "success", "is_error": False}, None),
    ],
)
def test_claude_result_errors(result: dict[str, Any], expected: str | None) -> None:
    """Non-success subtypes and is_error results become readable infra-error texts."""
    parser = ClaudeStream(SessionUsage(max_tokens=10))
    parser.feed({"type": "result", **result})
    assert parser.error == expected


def test_claude_permission_denials_become_evidence() -> None:
    """A result's permission_denials are kept (bounded) as the trial's host evidence."""
    usage = SessionUsage(max_tokens=10**9)
    parser = ClaudeStream(usage)
    denial = {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": "rm -rf sub"}}
    parser.feed({"type": "result", "subtype": "success", "permission_denials": [denial] * 25})
    assert usage.evidence["permissionDenials"][0] == {
        "tool": "Bash",
        "input": '{"command": "rm -rf sub"}',
    }
    assert len(usage.evidence["permissionDenials"]) == 20
    assert usage.evidence["permissionDenialsOmitted"] == 5
    assert parser.error is None


def test_claude_synthetic_model_is_not_an_identity() -> None:
    """The '<synthetic>' model of an API-error message is never recorded."""
    usage = SessionUsage(max_tokens=10)
    ClaudeStream(usage).feed({"type": "assistant", "message": {"id": "x", "model": "<synthetic>"}})
    assert usage.model is None


# -- closing a session --------------------------------------------------------------------


def test_close_session_outcomes() -> None:
    """Exit codes, signals, spawn errors and stream errors map to the reference texts."""
    assert close_session("opencode", process(0), host_error=None).error is None
    assert close_session("opencode", process(3, "boom\n"), host_error=None).error == (
        "opencode run exited 3: boom"
    )
    assert close_session("claude", process(1), host_error=None).error == (
        "claude run exited 1: no stderr output"
    )
    assert close_session("claude", process(1, "x"), host_error="claude run failed").error == (
        "claude run exited 1: claude run failed"
    )
    assert close_session("opencode", process(-9), host_error=None).error == (
        "opencode run exited SIGKILL: no stderr output"
    )
    assert close_session(
        "opencode", process(None, spawn_error="No such file"), host_error=None
    ).error == ("could not run the opencode host: No such file")


def test_error_event_with_exit_zero_is_still_an_error() -> None:
    """Unlike the reference, an error event is an infra-error even when the host exits 0."""
    end = close_session("opencode", process(0), host_error="APIError: rate limited: status 429")
    assert end.error == "APIError: rate limited: status 429"


def test_stderr_tail_is_bounded() -> None:
    """Only the last 2000 characters of stderr reach the error text."""
    end = close_session("opencode", process(1, "x" * 5000 + "END"), host_error=None)
    assert end.error is not None
    assert end.error.endswith("END")
    assert len(end.error) == len("opencode run exited 1: ") + 2000
