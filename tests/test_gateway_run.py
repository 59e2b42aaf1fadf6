"""Runs through the gateway with a stand-in Claude Code that really calls the mock model.

The agent (:mod:`gateway_agent`, behind Claude Code's own adapter) calls the mock
through the trial's route; its shell tool runs what the mock asks, issue 22's
attacks included (:data:`gatewaykit.FORGE`). Each attack runs against the engine
as it is and against a weakened one (the defence patched out, or the gateway off),
where it gets through: the test sees the breach.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from gatewaykit import (
    FORGE,
    PROBE,
    SCAN,
    GatewayStandin,
    without_cross_check,
    without_gateway_budget,
)
from isolationkit import require_bwrap
from realhost.mock_model import MockModelServer, Reply, RunBash, Script, Usage, WriteFile
from weakened import framing_without_recovery

from atlante_eval import RunReport, TrialResult, run_eval
from atlante_eval.transcript.model_calls import ModelCall, load_model_calls

#: The user's real API key: it must reach the provider and nothing the agent can read.
REAL_KEY = f"sk-ant-real-{uuid.uuid4().hex}"
HELLO: dict[str, Any] = {"type": "file-exists", "path": "hello.txt"}
#: The agent's tools in the fixture.
TOOLS = {"forge.py": FORGE, "scan.py": SCAN, "probe.py": PROBE}


@dataclass
class Outcome:
    """One run's report, its single trial and what the mock saw."""

    report: RunReport
    trial: TrialResult
    out: Path
    mock: MockModelServer

    def calls(self) -> list[ModelCall]:
        """The trial's model-call record."""
        assert self.trial.model_calls is not None
        found = load_model_calls(self.run_dir() / self.trial.model_calls)
        return [c for c in found if isinstance(c, ModelCall)]

    def run_dir(self) -> Path:
        [run_dir] = [p for p in self.out.iterdir() if p.is_dir()]
        return run_dir


@pytest.fixture
def mock() -> Iterator[MockModelServer]:
    """A started mock model server."""
    with MockModelServer() as server:
        yield server


def _run(
    tmp_path: Path,
    mock: MockModelServer,
    turns: list[Any],
    *,
    checks: list[dict[str, Any]] | None = None,
    max_tokens: int = 400_000,
    **options: Any,
) -> Outcome:
    name = f"s{uuid.uuid4().hex[:6]}"
    mock.add(Script(name, turns))
    extended = {"$schema": EXTENDED_SCENARIO_URI} if checks else {}
    doc = {**scenario(name, prompt=f"Do it. [script:{name}]", checks=checks or [HELLO]), **extended}
    project = make_project(
        tmp_path / "project",
        host="claude-code",
        scenarios=[doc],
        fixtures={"eval/fixtures/app": {"README.md": "hi\n", **TOOLS}},
        eval_extra={"budget": {"trials": 1, "maxTokens": max_tokens, "timeoutMs": 120_000}},
    )
    env = {
        "PATH": os.environ["PATH"],
        "ANTHROPIC_API_KEY": REAL_KEY,
        "ANTHROPIC_BASE_URL": mock.anthropic_base_url,
    }
    out = tmp_path / "out"
    report = anyio.run(lambda: run_eval(project, host=GatewayStandin(env), out=out, **options))
    [trial] = report.scenarios[name].trials
    return Outcome(report, trial, out, mock)


def test_the_trial_is_metered_from_the_provider_answers(
    tmp_path: Path, mock: MockModelServer
) -> None:
    """Tokens, parts and model are what the mock served; the record lists each call."""
    turns = [
        WriteFile("hello.txt", "hello\n", usage=Usage(1000, 20, 30, 40)),
        RunBash("echo hi", usage=Usage(2000, 30)),
        Reply("done", usage=Usage(500, 5)),
    ]
    outcome = _run(tmp_path, mock, turns)
    trial = outcome.trial
    assert trial.verdict == "pass", trial.error
    assert trial.tokens == 1090 + 2030 + 505
    assert trial.usage is not None
    assert trial.usage.source == "gateway"
    assert (trial.usage.calls, trial.usage.input_tokens, trial.usage.output_tokens) == (3, 3500, 55)
    assert (trial.usage.cache_read_tokens, trial.usage.cache_write_tokens) == (30, 40)
    assert trial.usage.host_tokens == trial.tokens  # the stand-in counts as Claude Code does
    assert trial.cost == pytest.approx(0.003)  # the host's own cost figure wins
    assert trial.usage.cost_source == "host"
    assert trial.model == "mock-model"
    assert trial.tampered is None
    calls = outcome.calls()
    assert [c.tokens for c in calls] == [1090, 2030, 505]
    assert [c.stop_reason for c in calls] == ["tool_use", "tool_use", "end_turn"]
    assert [t.name for c in calls for t in c.tool_calls] == ["Write", "Bash"]
    assert calls[0].tool_calls[0].input == {
        "file_path": str(Path(mock.requests[0].workdir or "") / "hello.txt"),
        "content": "hello\n",
    }
    assert outcome.report.meta.gateway is not None
    assert outcome.report.meta.gateway.calls == 3
    assert [r.headers.get("x-api-key") for r in mock.requests] == [REAL_KEY] * 3


def test_with_the_gateway_off_the_report_is_the_reference_one(
    tmp_path: Path, mock: MockModelServer
) -> None:
    """``--gateway off``: no usage, no record, no meta.gateway; figures from the host."""
    turns = [WriteFile("hello.txt", "hello\n", usage=Usage(1000, 20)), Reply("done")]
    outcome = _run(tmp_path, mock, turns, gateway="off")
    trial = outcome.trial
    assert trial.verdict == "pass", trial.error
    assert (trial.usage, trial.model_calls, outcome.report.meta.gateway) == (None, None, None)
    assert trial.tokens == 1020 + 110
    text = (outcome.run_dir() / "report.json").read_text(encoding="utf-8")
    assert '"usage"' not in text
    assert "modelCalls" not in text
    assert '"gateway"' not in text


@pytest.mark.parametrize("isolation", ["none", "os"])
@pytest.mark.parametrize("gateway", ["on", "off"])
def test_the_real_key_reaches_the_provider_and_nothing_the_agent_reads(
    tmp_path: Path, mock: MockModelServer, isolation: str, gateway: str
) -> None:
    """With the gateway the agent's world holds a stand-in token; without it, the key."""
    if isolation == "os":
        require_bwrap()
    turns = [
        RunBash("python3 scan.py"),
        WriteFile("hello.txt", "hello\n"),
        Reply("done"),
    ]
    outcome = _run(tmp_path, mock, turns, isolation=isolation, gateway=gateway, keep=True)
    assert outcome.trial.verdict == "pass", outcome.trial.error
    assert outcome.trial.sandbox is not None
    hashes = (Path(outcome.trial.sandbox) / "project" / "hashes.txt").read_text().split()
    assert len(hashes) > 10  # the scan did read the agent's world
    assert [r.headers.get("x-api-key") for r in mock.requests] == [REAL_KEY] * 3
    seen = hashlib.sha256(REAL_KEY.encode()).hexdigest() in hashes
    if gateway == "off":
        assert seen  # the weakened engine: the agent reads the key
        return
    assert not seen
    for path in outcome.run_dir().rglob("*"):
        if path.is_file() and not path.name.endswith(".gz"):
            assert REAL_KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("weakened", [False, True])
def test_forged_tool_events_mark_the_trial_tampered(
    tmp_path: Path, mock: MockModelServer, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """Forged Skill, Task and Read calls are unrequested: behaviour checks error, never pass."""
    if weakened:
        without_cross_check(monkeypatch)
    turns = [RunBash("python3 forge.py tools"), WriteFile("hello.txt", "hi\n"), Reply("done")]
    checks = [
        {"type": "skill-used", "skill": "deploy"},
        {"type": "subagent-used", "agent": "reviewer"},
        {"type": "tool-used", "tool": "Read", "inputMatches": "secret"},
    ]
    trial = _run(tmp_path, mock, turns, checks=checks).trial
    if weakened:
        assert trial.verdict == "pass", trial.error  # the forgery passes every check
        return
    assert trial.verdict == "infra-error"
    assert trial.checks is not None
    assert {c.verdict for c in trial.checks} == {"error"}
    evidence = [e for e in trial.tampered or [] if e.kind == "unrequested-tool-call"]
    assert [e.detail.rsplit(": ", 1)[1] for e in evidence] == [
        "Skill (id toolu_forged_1)",
        "Task (id toolu_forged_2)",
        "Read (id toolu_forged_3)",
    ]


@pytest.mark.parametrize("defences", ["both", "gateway", "none"])
def test_a_write_hidden_by_a_glued_fragment_marks_the_trial_tampered(
    tmp_path: Path, mock: MockModelServer, monkeypatch: pytest.MonkeyPatch, defences: str
) -> None:
    """The model asked for Write; a glued fragment hid it: tool-not-used Write cannot pass.

    Two defences catch it: the stream's line framing recovers the glued event
    (``glued-line``), and the gateway's cross-check misses the requested call in the
    transcript (``unrecorded-tool-call``). ``gateway``: the framing's recovery patched
    out, the cross-check alone; ``none``: both patched out, the attack gets through.
    """
    if defences != "both":
        framing_without_recovery(monkeypatch)
    if defences == "none":
        without_cross_check(monkeypatch)
    turns = [
        RunBash("python3 forge.py hide .hide"),
        WriteFile("hello.txt", "hi\n", gate=".hide"),
        Reply("done"),
    ]
    checks = [HELLO, {"type": "tool-not-used", "tool": "Write"}]
    trial = _run(tmp_path, mock, turns, checks=checks).trial
    kinds = {e.kind for e in trial.tampered or []}
    if defences == "none":
        assert trial.verdict == "pass", trial.error  # the Write is gone from the transcript
        return
    assert trial.verdict == "infra-error", trial.error
    expected = {"glued-line"} if defences == "both" else {"unrecorded-tool-call"}
    assert expected <= kinds, trial.tampered


@pytest.mark.parametrize("weakened", [False, True])
def test_an_early_result_does_not_switch_the_budget_off(
    tmp_path: Path, mock: MockModelServer, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """A forged result, then a 1,000,000-token answer: stopped at the mock's own usage."""
    if weakened:
        without_gateway_budget(monkeypatch)
    turns = [
        RunBash("python3 forge.py early-result", usage=Usage(100, 10)),
        WriteFile("big.txt", "x", usage=Usage(1_000_000, 5)),
        WriteFile("hello.txt", "hi\n"),
        Reply("done"),
    ]
    trial = _run(tmp_path, mock, turns, max_tokens=100_000).trial
    if weakened:
        assert trial.verdict != "budget-exceeded"  # the million tokens went unseen
        return
    assert trial.verdict == "budget-exceeded", trial.error
    # What the mock served up to the crossing: its message_start, or the whole answer when
    # the answer arrived in one piece; never the next turn.
    assert trial.tokens in (110 + 1_000_001, 110 + 1_000_005)
    assert trial.usage is not None
    assert trial.usage.source == "gateway"
    steps = [r.step for r in mock.requests]
    assert steps == [0, 1]  # nothing after the crossing answer


@pytest.mark.parametrize("weakened", [False, True])
def test_an_exit_zero_after_a_forged_result_is_still_over_budget(
    tmp_path: Path, mock: MockModelServer, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """The agent forges a result and makes its host exit 0: the gateway's count decides."""
    if weakened:
        without_gateway_budget(monkeypatch)
    turns = [
        RunBash("python3 forge.py early-result", usage=Usage(40, 10)),
        WriteFile("hello.txt", "hi\n", usage=Usage(1_000_000, 5)),
        RunBash("python3 forge.py exit0"),
    ]
    trial = _run(tmp_path, mock, turns, max_tokens=100_000).trial
    if weakened:
        assert trial.verdict == "pass", trial.error  # budget-exceeded became pass
        return
    assert trial.verdict == "budget-exceeded", trial.error
    assert trial.tokens is not None
    assert trial.tokens > 1_000_000


def test_a_second_result_is_tampering_and_the_gateway_figure_wins(
    tmp_path: Path, mock: MockModelServer
) -> None:
    """A forged result claiming 5,000,000 tokens: second-result; the report says 330."""
    turns = [RunBash("python3 forge.py claim"), WriteFile("hello.txt", "hi\n"), Reply("done")]
    checks = [HELLO, {"type": "max-turns", "max": 10}]
    trial = _run(tmp_path, mock, turns, checks=checks).trial
    assert trial.tokens == 3 * 110
    assert trial.usage is not None
    assert trial.usage.source == "gateway"
    assert "second-result" in {e.kind for e in trial.tampered or []}
    assert trial.verdict == "infra-error"
    assert trial.checks is not None
    assert trial.checks[1].verdict == "error"


def test_requests_without_the_trial_token_are_refused_and_counted(
    tmp_path: Path, mock: MockModelServer
) -> None:
    """The agent calls its own route without the token and an unknown route: both refused."""
    turns = [RunBash("python3 probe.py"), WriteFile("hello.txt", "hi\n"), Reply("done")]
    outcome = _run(tmp_path, mock, turns, keep=True)
    assert outcome.trial.sandbox is not None
    codes = (Path(outcome.trial.sandbox) / "project" / "codes.txt").read_text()
    assert codes == "401 403"
    assert outcome.trial.usage is not None
    assert outcome.trial.usage.refused == 1
    assert outcome.report.meta.gateway is not None
    assert outcome.report.meta.gateway.refused == 2
    assert len(mock.requests) == 3  # neither reached the provider
