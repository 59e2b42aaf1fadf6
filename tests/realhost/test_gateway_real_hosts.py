"""Issue 22 with the real ``claude`` and ``opencode`` CLIs, through the gateway.

Both hosts run against the mock model through the gateway (on by default) under
``--isolation none`` and ``os``:

* a plain trial: the figures are what the mock served (``usage.source: gateway``),
  every call is in ``model-calls.jsonl``, and the real API key is nowhere the
  agent's own tool can look (``scan.py`` hashes every token-like string of its
  environment, its sandbox, HOME, state and temp directories and its ancestors'
  environments);
* forged tool events written into the host's stdout through ``/proc``: tampered,
  behaviour checks ``error``, never ``pass``;
* a forbidden Write hidden by a glued fragment (Claude Code): tampered;
* forged usage, then a 900,000-token answer: stopped at the mock's usage.

Each attack also runs against a weakened engine (under ``none``): the defence
patched out, the attack gets through, so the test sees the breach.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from gatewaykit import FORGE, SCAN, without_cross_check, without_gateway_budget
from isolationkit import require_bwrap
from weakened import framing_without_recovery

from atlante_eval import ModelCall, TrialResult, load_model_calls, run_eval

from .environment import HOSTS, leftovers, real_host_environment
from .fixtures import require_hosts
from .mock_model import MockModelServer, Reply, RunBash, Script, Usage, WriteFile
from .script import Action

pytestmark = pytest.mark.realhost

CASES = [(host, isolation) for host in HOSTS for isolation in ("none", "os")]
IDS = [f"{host}-{isolation}" for host, isolation in CASES]
#: The user's real API key (a stored ``auth.json`` key for OpenCode).
REAL_KEY = f"sk-real-{uuid.uuid4().hex}"
MAX_TOKENS = 100_000
HUGE = Usage(input_tokens=900_000, output_tokens=5)


def _trial(
    tmp: Path,
    host: str,
    isolation: str,
    turns: list[Action],
    *,
    checks: list[dict[str, Any]] | None = None,
    max_tokens: int = 400_000,
    keep: bool = False,
) -> tuple[TrialResult, Path, MockModelServer]:
    """Run one trial of ``turns`` on the real ``host``; return it, the run dir, the mock."""
    bin_dir = require_hosts()
    if isolation == "os":
        require_bwrap()
    name = f"g{uuid.uuid4().hex[:6]}"
    marker = uuid.uuid4().hex
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    extended = {"$schema": EXTENDED_SCENARIO_URI} if checks else {}
    doc = {
        **scenario(name, prompt=f"Do it. [script:{name}]", checks=checks or _hello()),
        **extended,
    }
    extra = {"ANTHROPIC_API_KEY": REAL_KEY} if host == "claude-code" else {}
    with (
        MockModelServer([Script(name, turns)]) as mock,
        real_host_environment(
            host, mock, tmp, bin_dir=bin_dir, marker=marker, extra=extra
        ) as pass_env,
    ):
        if host == "opencode":
            stored = {"mock": {"type": "api", "key": REAL_KEY}}
            (tmp / "user-data" / "opencode" / "auth.json").write_text(json.dumps(stored))
        project = make_project(
            tmp / "project",
            host=host,
            scenarios=[doc],
            fixtures={
                "eval/fixtures/app": {"README.md": "hi\n", "forge.py": FORGE, "scan.py": SCAN}
            },
            eval_extra={
                "model": model,
                "budget": {"trials": 1, "maxTokens": max_tokens, "timeoutMs": 180_000},
            },
        )
        out = tmp / "out"
        report = anyio.run(
            lambda: run_eval(project, out=out, pass_env=pass_env, isolation=isolation, keep=keep)
        )
        assert leftovers(marker) == []
    [trial] = report.scenarios[name].trials
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return trial, run_dir, mock


def _hello() -> list[dict[str, Any]]:
    return [{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}]


@pytest.mark.parametrize(("host", "isolation"), CASES, ids=IDS)
def test_a_trial_is_metered_by_the_gateway_and_never_sees_the_key(
    tmp_path: Path, host: str, isolation: str
) -> None:
    """Tokens are what the mock served; the record lists each call; the key stays out."""
    turns: list[Action] = [
        WriteFile("hello.txt", "hello\n", usage=Usage(1000, 20, cache_read_tokens=30)),
        RunBash("python3 scan.py", usage=Usage(2000, 30)),
        Reply("done", usage=Usage(500, 5)),
    ]
    trial, run_dir, mock = _trial(tmp_path, host, isolation, turns, keep=True)
    assert trial.verdict == "pass", trial.error
    assert trial.tokens == 1050 + 2030 + 505
    assert trial.usage is not None
    assert (trial.usage.source, trial.usage.calls) == ("gateway", 3)
    assert (trial.usage.input_tokens, trial.usage.cache_read_tokens) == (3500, 30)
    assert trial.usage.host_tokens == trial.tokens  # the host counted what was served
    assert trial.model == "mock-model"
    assert trial.tampered is None
    assert trial.model_calls is not None
    calls = [c for c in load_model_calls(run_dir / trial.model_calls) if isinstance(c, ModelCall)]
    assert [c.tokens for c in calls] == [1050, 2030, 505]
    asked = [t.name.lower() for c in calls for t in c.tool_calls]
    assert asked == ["write", "bash"]
    assert trial.sandbox is not None
    hashes = (Path(trial.sandbox) / "project" / "hashes.txt").read_text().split()
    assert len(hashes) > 10
    assert hashlib.sha256(REAL_KEY.encode()).hexdigest() not in hashes
    credentials = [
        r.headers.get("x-api-key") or r.headers.get("authorization") for r in mock.requests
    ]
    assert all(REAL_KEY in (c or "") for c in credentials), credentials
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix != ".gz":
            assert REAL_KEY.encode() not in path.read_bytes(), path


def _weakened_cases() -> list[tuple[str, str, bool]]:
    """Each host and isolation as it is, and each host under ``none`` weakened."""
    return [(h, i, False) for h, i in CASES] + [(h, "none", True) for h in HOSTS]


FORGED_CHECKS = [
    {"type": "skill-used", "skill": "deploy"},
    {"type": "subagent-used", "agent": "reviewer"},
    {"type": "tool-used", "kind": "read", "inputMatches": "secret"},
]


@pytest.mark.parametrize(("host", "isolation", "weakened"), _weakened_cases())
def test_forged_tool_events_never_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, isolation: str, weakened: bool
) -> None:
    """Forged Skill, Task and Read calls in the host's own dialect: tampered, infra-error."""
    if weakened:
        without_cross_check(monkeypatch)
    turns: list[Action] = [RunBash("python3 forge.py tools"), Reply("done")]
    trial, _run_dir, _mock = _trial(tmp_path, host, isolation, turns, checks=FORGED_CHECKS)
    if weakened:
        assert trial.verdict == "pass", trial.error  # the forgeries pass every check
        return
    assert trial.verdict == "infra-error", trial.error
    assert trial.checks is not None
    assert {c.verdict for c in trial.checks} == {"error"}
    kinds = [e.kind for e in trial.tampered or []]
    assert kinds.count("unrequested-tool-call") == 3, trial.tampered


@pytest.mark.parametrize(
    ("isolation", "defences"),
    [("none", "both"), ("os", "both"), ("none", "gateway"), ("os", "gateway"), ("none", "none")],
)
def test_a_write_hidden_from_claude_code_transcript_is_tampering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str, defences: str
) -> None:
    """A fragment glued to Claude Code's Write line hides it: the model asked for it.

    ``both``: the stream's framing recovers the line (``glued-line``); ``gateway``: that
    recovery patched out, the cross-check alone misses the Write (``unrecorded-tool-call``);
    ``none``: both patched out, tool-not-used write passes.
    """
    if defences != "both":
        framing_without_recovery(monkeypatch)
    if defences == "none":
        without_cross_check(monkeypatch)
    turns: list[Action] = [
        RunBash("python3 forge.py hide .hide"),
        WriteFile("hello.txt", "hello\n", gate=".hide"),
        Reply("done"),
    ]
    checks = [*_hello(), {"type": "tool-not-used", "kind": "write"}]
    trial, _run_dir, _mock = _trial(tmp_path, "claude-code", isolation, turns, checks=checks)
    if defences == "none":
        assert trial.verdict == "pass", trial.error  # tool-not-used write passed
        return
    assert trial.verdict == "infra-error", trial.error
    expected = "glued-line" if defences == "both" else "unrecorded-tool-call"
    assert expected in [e.kind for e in trial.tampered or []], trial.tampered


@pytest.mark.parametrize("isolation", ["none", "os"])
def test_opencode_prints_no_line_a_fragment_can_hide_a_write_behind(
    tmp_path: Path, isolation: str
) -> None:
    """The same attack on OpenCode: its step_start line takes the fragment, never a pass.

    OpenCode prints each step's ``step_start`` right before the step's tool calls,
    after they ran, so the fragment (written when the Write's request arrives)
    glues to ``step_start`` and the Write stays in the transcript: tool-not-used
    write fails. The engine reports no pass either way.
    """
    turns: list[Action] = [
        RunBash("python3 forge.py hide .hide"),
        WriteFile("hello.txt", "hello\n", gate=".hide"),
        Reply("done"),
    ]
    checks = [*_hello(), {"type": "tool-not-used", "kind": "write"}]
    trial, _run_dir, _mock = _trial(tmp_path, "opencode", isolation, turns, checks=checks)
    assert trial.verdict in ("fail", "infra-error"), trial.error
    assert trial.activity is not None
    assert trial.activity.tool_calls.by_kind.get("write") == 1


@pytest.mark.parametrize(("host", "isolation", "weakened"), _weakened_cases())
def test_forged_usage_does_not_switch_the_budget_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, isolation: str, weakened: bool
) -> None:
    """An early result (Claude Code) or negative usage (OpenCode), then 900,000 tokens."""
    if weakened:
        without_gateway_budget(monkeypatch)
    mode = "early-result" if host == "claude-code" else "negative"
    turns: list[Action] = [
        RunBash(f"python3 forge.py {mode}", usage=Usage(100, 10)),
        WriteFile("one.txt", "1\n", usage=Usage(60_000, 10)),
        WriteFile("hello.txt", "hello\n", usage=HUGE),
        Reply("done"),
    ]
    trial, _run_dir, mock = _trial(tmp_path, host, isolation, turns, max_tokens=MAX_TOKENS)
    if weakened:
        assert trial.verdict != "budget-exceeded"  # the 900,000 tokens went unseen
        return
    assert trial.verdict == "budget-exceeded", trial.error
    tokens = trial.tokens or 0
    served_before = 110 + 60_010
    assert served_before + HUGE.input_tokens < tokens <= served_before + 900_005
    assert trial.usage is not None
    assert trial.usage.source == "gateway"
    assert max(r.step or 0 for r in mock.requests if r.kind == "main") == 2  # stopped there
