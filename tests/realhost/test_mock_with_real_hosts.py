"""The mock model server drives the real ``claude`` and ``opencode`` CLIs end to end, offline."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .hostrun import (
    CLAUDE_OFFLINE_ENV,
    MOCK_MODEL,
    OPENCODE_OFFLINE_ENV,
    HostRun,
    claude_argv,
    claude_env,
    isolated_env,
    opencode_argv,
    opencode_env,
    run_host,
    trust_workspace,
)
from .hosts import CLAUDE_CODE_VERSION, OPENCODE_VERSION
from .mock_model import (
    Fail,
    MockModelServer,
    Reply,
    RequestRecord,
    RunBash,
    Script,
    Usage,
    WriteFile,
)

pytestmark = pytest.mark.realhost

WRITE_USAGE = Usage(input_tokens=1200, output_tokens=40, cache_read_tokens=300)
BASH_USAGE = Usage(input_tokens=1300, output_tokens=20)
REPLY_USAGE = Usage(input_tokens=1400, output_tokens=7)


@pytest.fixture(autouse=True)
def _remove_sandboxes(tmp_path: Path) -> Iterator[None]:
    """Delete each test's host homes and work dirs (about 8 MB per OpenCode run) afterwards."""
    yield
    for child in tmp_path.iterdir():
        shutil.rmtree(child, ignore_errors=True)


def write_bash_reply(name: str) -> Script:
    """Return a script that writes hello.txt, runs a shell command, then says done."""
    return Script(
        name,
        [
            WriteFile("hello.txt", "hello from the mock\n", usage=WRITE_USAGE),
            RunBash("printf ran > ran.txt", usage=BASH_USAGE),
            Reply("done", usage=REPLY_USAGE),
        ],
    )


def total(*usages: Usage) -> Usage:
    """Return the sum of ``usages``."""
    return Usage(
        sum(u.input_tokens for u in usages),
        sum(u.output_tokens for u in usages),
        sum(u.cache_read_tokens for u in usages),
        sum(u.cache_write_tokens for u in usages),
    )


def sandbox(tmp_path: Path) -> tuple[Path, Path]:
    """Return (root of the isolated home, working directory) under ``tmp_path``."""
    work = tmp_path / "work"
    work.mkdir(parents=True)
    return tmp_path / "host", work


def assert_only_expected(requests: Sequence[RequestRecord], path: str) -> None:
    """Assert that every request the mock saw was a model call on ``path`` it answered.

    The hosts run with the mock as their HTTP(S) proxy, so a request to any other host
    would be logged here too (kind ``proxy``) and fail this check.
    """
    assert requests, "the mock saw no request"
    for record in requests:
        assert (record.method, record.path, record.kind) in {
            ("POST", path, "main"),
            ("POST", path, "side"),
        }, record
        assert record.model == MOCK_MODEL
        assert record.error is None
        assert not record.exhausted


# -- Claude Code ------------------------------------------------------------------------


def run_claude(
    bin_dir: Path, mock: MockModelServer, tmp_path: Path, prompt: str, *flags: str
) -> tuple[HostRun, Path]:
    """Run Claude Code once on ``prompt`` in a fresh sandbox; return the run and its cwd."""
    root, work = sandbox(tmp_path)
    env = claude_env(root, mock)
    assert env["ANTHROPIC_BASE_URL"] == mock.url
    assert CLAUDE_OFFLINE_ENV.items() <= env.items()
    assert env["HTTPS_PROXY"] == mock.url
    run = run_host(claude_argv(bin_dir, *flags), cwd=work, env=env, prompt=prompt)
    return run, work


def test_claude_writes_runs_and_reports_mock_usage(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """Claude Code writes the scripted file, runs the command, and sums the mock's usage."""
    mock_model.add(write_bash_reply("claude-ok"))
    prompt = "Create hello.txt, then run a command. [script:claude-ok]\n  (verbatim)"
    run, work = run_claude(real_hosts, mock_model, tmp_path, prompt, "--allowedTools", "Write,Bash")

    assert run.returncode == 0, run.stderr
    assert (work / "hello.txt").read_text() == "hello from the mock\n"
    assert (work / "ran.txt").read_text() == "ran"
    init = run.of_type("system")[0]
    assert init["claude_code_version"] == CLAUDE_CODE_VERSION
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    [result] = run.of_type("result")
    assert result["is_error"] is False
    assert result["result"] == "done"
    assert result["num_turns"] == 3
    expected = total(WRITE_USAGE, BASH_USAGE, REPLY_USAGE)
    assert result["usage"]["input_tokens"] == expected.input_tokens
    assert result["usage"]["output_tokens"] == expected.output_tokens
    assert result["usage"]["cache_read_input_tokens"] == expected.cache_read_tokens
    assert result["modelUsage"][MOCK_MODEL]["outputTokens"] == expected.output_tokens

    requests = mock_model.requests
    assert_only_expected(requests, "/v1/messages")
    assert [r.step for r in requests] == [0, 1, 2]
    assert [r.action for r in requests] == ["tool Write", "tool Bash", "text"]
    assert all(r.query == {"beta": ["true"]} and r.body["stream"] for r in requests)
    assert all(r.workdir == str(work.resolve()) for r in requests)
    assert prompt in requests[0].user_texts
    assert requests[0].headers["x-api-key"] == "test"


@pytest.mark.parametrize("status", [400, 529])
def test_claude_http_error_is_an_error(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path, status: int
) -> None:
    """A scripted HTTP error makes Claude Code exit nonzero with is_error and the status."""
    mock_model.add(Script("claude-err", [Fail(status, "mock says no")]))
    prompt = "Fail please. [script:claude-err]"
    run, work = run_claude(real_hosts, mock_model, tmp_path, prompt, "--allowedTools", "Write")

    assert run.returncode != 0
    [result] = run.of_type("result")
    assert result["is_error"] is True
    assert result["api_error_status"] == status
    assert "mock says no" in result["result"]
    assert list(work.iterdir()) == []
    requests = mock_model.requests
    assert_only_expected(requests, "/v1/messages")
    assert {r.status for r in requests} == {status}
    if status == 529:  # CLAUDE_CODE_MAX_RETRIES=0: no retry
        assert len(requests) == 1
    # A 400 is re-sent a few times (6 with 2.1.332) with fewer features, whatever the retry cap.


def test_claude_project_settings_apply_in_a_trusted_workspace(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """A project allow list permits Write once $CLAUDE_CONFIG_DIR/.claude.json trusts the cwd."""
    mock_model.add(Script("claude-trust", [WriteFile("t.txt", "trusted"), Reply("ok")]))
    root, work = sandbox(tmp_path)
    env = claude_env(root, mock_model)
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"allow": ["Write"]}})
    )
    trust_workspace(env, work)
    argv = claude_argv(real_hosts, "--setting-sources", "project")
    run = run_host(argv, cwd=work, env=env, prompt="Write t.txt [script:claude-trust]")

    assert run.returncode == 0, run.stderr
    [result] = run.of_type("result")
    assert result["permission_denials"] == []
    assert (work / "t.txt").read_text() == "trusted"


def test_proxy_trap_catches_traffic_when_claude_may_go_online(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """Without the offline switches Claude Code reaches for other hosts, and the trap logs it.

    This shows that the no-other-traffic checks above are not vacuous.
    """
    mock_model.add(Script("online", [Reply("hi")]))
    root, work = sandbox(tmp_path)
    env = claude_env(root, mock_model)
    for name in CLAUDE_OFFLINE_ENV:
        del env[name]
    run = run_host(claude_argv(real_hosts), cwd=work, env=env, prompt="[script:online]")

    assert run.returncode == 0, run.stderr
    trapped = [r for r in mock_model.requests if r.kind == "proxy"]
    assert trapped, "expected Claude Code to try another host"
    assert all(r.method == "CONNECT" and r.status == 403 for r in trapped)


def test_concurrent_claude_conversations_follow_their_own_scripts(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """Two runs at once on one mock each get their own script, chosen by the prompt marker."""
    names = ["conc-a", "conc-b"]
    for name in names:
        mock_model.add(Script(name, [WriteFile("who.txt", name), Reply(f"done {name}")]))

    def one(name: str) -> tuple[HostRun, Path]:
        prompt = f"[script:{name}]"
        return run_claude(
            real_hosts, mock_model, tmp_path / name, prompt, "--allowedTools", "Write"
        )

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        runs = dict(zip(names, pool.map(one, names), strict=True))

    for name in names:
        run, work = runs[name]
        assert run.returncode == 0, run.stderr
        assert (work / "who.txt").read_text() == name
        assert run.of_type("result")[0]["result"] == f"done {name}"
        assert [r.step for r in mock_model.requests_for(name)] == [0, 1]


# -- OpenCode ---------------------------------------------------------------------------


def run_opencode(
    bin_dir: Path, mock: MockModelServer, tmp_path: Path, prompt: str
) -> tuple[HostRun, Path]:
    """Run OpenCode once on ``prompt`` (stdin) in a fresh sandbox; return the run and its cwd."""
    root, work = sandbox(tmp_path)
    env = opencode_env(root, mock)
    assert OPENCODE_OFFLINE_ENV.items() <= env.items()
    assert env["HTTPS_PROXY"] == mock.url
    assert mock.openai_base_url in env["OPENCODE_CONFIG_CONTENT"]
    run = run_host(opencode_argv(bin_dir), cwd=work, env=env, prompt=prompt)
    return run, work


def test_opencode_writes_runs_and_reports_mock_usage(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """OpenCode writes the scripted file, runs the command, and its steps carry the mock's usage."""
    mock_model.add(write_bash_reply("oc-ok"))
    prompt = 'Create "hello.txt", then run a command. [script:oc-ok]\n  (verbatim)'
    run, work = run_opencode(real_hosts, mock_model, tmp_path, prompt)

    assert run.returncode == 0, run.stderr
    assert (work / "hello.txt").read_text() == "hello from the mock\n"
    assert (work / "ran.txt").read_text() == "ran"
    tools = run.of_type("tool_use")
    assert [t["part"]["tool"] for t in tools] == ["write", "bash"]
    assert all(t["part"]["state"]["status"] == "completed" for t in tools)
    assert [t["part"]["text"] for t in run.of_type("text")] == ["done"]
    steps = [e["part"] for e in run.of_type("step_finish")]
    assert [s["reason"] for s in steps] == ["tool-calls", "tool-calls", "stop"]
    expected = total(WRITE_USAGE, BASH_USAGE, REPLY_USAGE)
    assert sum(s["tokens"]["input"] for s in steps) == expected.input_tokens
    assert sum(s["tokens"]["output"] for s in steps) == expected.output_tokens
    assert sum(s["tokens"]["cache"]["read"] for s in steps) == expected.cache_read_tokens

    requests = mock_model.requests
    assert_only_expected(requests, "/v1/chat/completions")
    main = [r for r in requests if r.kind == "main"]
    assert [r.action for r in main] == ["tool write", "tool bash", "text"]
    assert all(r.workdir == str(work.resolve()) for r in main)
    assert main[0].user_texts == (prompt,)
    assert [r.kind for r in requests].count("side") == 1  # the title request
    assert all(r.body["stream"] for r in requests)


def test_opencode_http_400_emits_an_error_event(
    real_hosts: Path, mock_model: MockModelServer, tmp_path: Path
) -> None:
    """A scripted 400 makes OpenCode emit an APIError event and exit 1."""
    mock_model.add(Script("oc-400", [Fail(400, "mock says no")]))
    run, work = run_opencode(real_hosts, mock_model, tmp_path, "Fail please. [script:oc-400]")

    assert run.returncode == 1
    [error] = run.of_type("error")
    assert error["error"]["name"] == "APIError"
    assert error["error"]["data"]["statusCode"] == 400
    assert error["error"]["data"]["message"] == "mock says no"
    assert list(work.iterdir()) == []
    assert_only_expected(mock_model.requests, "/v1/chat/completions")
    assert [r.status for r in mock_model.requests if r.kind == "main"] == [400]


def test_host_versions_are_the_pinned_ones(real_hosts: Path, tmp_path: Path) -> None:
    """The located CLIs report the versions the tests are written against."""
    for argv, expected in (
        ([str(real_hosts / "claude"), "--version"], CLAUDE_CODE_VERSION),
        ([str(real_hosts / "opencode"), "--version"], OPENCODE_VERSION),
    ):
        env = isolated_env(tmp_path / Path(argv[0]).name, {})
        run = run_host(argv, cwd=tmp_path, env=env, prompt="")
        assert run.returncode == 0, run.stderr
        assert run.stdout.split()[0] == expected
