"""The Claude Code host with a stand-in executable: settings, trust, credentials, argv, env."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from stubcli import env_of, sessions, write_stub
from typer.testing import CliRunner

from atlante_eval import HostError, SessionEnd, SessionUsage, TrialContext, load_suite
from atlante_eval.cli import app
from atlante_eval.hosts.claude_code import ClaudeCodeHost, claude_settings
from atlante_eval.trial.sandbox import copy_fixture, write_native_outputs

ASSISTANT = {
    "type": "assistant",
    "message": {
        "id": "m1",
        "model": "fable-1",
        "usage": {"input_tokens": 300, "output_tokens": 50},
    },
}
RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "usage": {"input_tokens": 300, "output_tokens": 40},
    "total_cost_usd": 0.03,
    "permission_denials": [],
}


class Trial:
    """A prepared-but-not-run trial of a Claude Code project, with a stand-in host."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        parent: dict[str, str] | None = None,
        fixture: dict[str, str] | None = None,
        agent: str | None = None,
        model: str | None = None,
        pass_env: tuple[str, ...] = (),
        probe: bool = True,
        **spec: Any,
    ) -> None:
        self.stub = write_stub(
            tmp_path / "bin",
            "claude",
            version="2.1.332",
            capture=[".claude/settings.json", "$CLAUDE_CONFIG_DIR/.claude.json"],
            **spec,
        )
        self.parent = {
            "PATH": f"{self.stub.parent}:/usr/bin:/bin",
            "HOME": str(tmp_path / "realhome"),
            **(parent if parent is not None else {"ANTHROPIC_API_KEY": "sk-ant"}),
        }
        extra: dict[str, Any] = {"agent": agent} if agent else {}
        project = make_project(
            tmp_path / "project",
            host="claude-code",
            scenarios=[scenario("t", prompt="-p --help [script:x]\n", **extra)],
            fixtures={"eval/fixtures/app": {"README.md": "hi\n", **(fixture or {})}},
        )
        suite = load_suite(project)
        assert suite.native is not None
        trial_dir = tmp_path / "run" / "t-trial-0"
        trial_dir.mkdir(parents=True)
        self.sandbox = trial_dir / "project"
        self.state = trial_dir / "state"
        self.state.mkdir()
        copy_fixture(suite.scenarios[0].fixture_path, self.sandbox)
        write_native_outputs(suite.native, self.sandbox)
        self.context = TrialContext(
            scenario=suite.scenarios[0],
            trial=0,
            sandbox=self.sandbox,
            state_dir=self.state,
            native=suite.native,
            model=model,
            pass_env=pass_env,
            project_root=project,
        )
        self.host = ClaudeCodeHost(env=self.parent)
        if probe:
            anyio.run(self.host.probe)

    def run(self, max_tokens: int = 10**9) -> tuple[SessionEnd, SessionUsage, dict[str, Any]]:
        """Prepare, run the session, and return its end, usage and the stub's record."""
        self.host.prepare(self.context)
        usage = SessionUsage(max_tokens)

        async def session() -> SessionEnd:
            return await self.host.run_session(self.context, usage)

        end = anyio.run(session)
        [call] = sessions(self.stub)
        return end, usage, call


def test_settings_carry_only_the_policy(tmp_path: Path) -> None:
    """.claude/settings.json holds the allow/deny policy and nothing else (no MCP servers)."""
    trial = Trial(tmp_path)
    trial.host.prepare(trial.context)
    text = (trial.sandbox / ".claude" / "settings.json").read_text()
    settings = json.loads(text)
    assert settings == claude_settings()
    assert settings["permissions"]["allow"] == [
        "Read",
        "Edit",
        "Write",
        "Glob",
        "Grep",
        "Bash",
        "Skill",
        "Agent",
    ]
    assert settings["permissions"]["deny"] == [
        "Bash(rm -rf *)",
        "Bash(rm -fr *)",
        "Bash(sudo *)",
        "WebFetch",
        "WebSearch",
        "AskUserQuestion",
    ]
    assert "mcpServers" not in text
    assert text.endswith("}\n")


def test_trust_is_pre_accepted_for_the_sandbox_realpath_only(tmp_path: Path) -> None:
    """The trial's .claude.json trusts exactly one project: the sandbox's real path."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    trial = Trial(tmp_path / "link")
    trial.host.prepare(trial.context)
    trust = json.loads((trial.state / "claude-config" / ".claude.json").read_text())
    assert trust == {
        "projects": {os.path.realpath(trial.sandbox): {"hasTrustDialogAccepted": True}}
    }
    assert str(real) in next(iter(trust["projects"]))
    mode = (trial.state / "claude-config" / ".claude.json").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600


def test_only_the_credentials_file_is_copied(tmp_path: Path) -> None:
    """.credentials.json travels (0600); history and other user config do not."""
    home = tmp_path / "realhome" / ".claude"
    home.mkdir(parents=True)
    (home / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "t"}}')
    (home / "history.jsonl").write_text("secret history\n")
    (home / "settings.json").write_text('{"permissions": {"allow": ["WebFetch"]}}')
    trial = Trial(tmp_path, parent={"CLAUDE_CODE_OAUTH_TOKEN": "o"})
    trial.host.prepare(trial.context)
    config = trial.state / "claude-config"
    assert sorted(p.name for p in config.iterdir()) == [".claude.json", ".credentials.json"]
    copy = config / ".credentials.json"
    assert copy.read_text() == '{"claudeAiOauth": {"accessToken": "t"}}'
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "name", [".mcp.json", ".claude/settings.json", ".claude/settings.local.json"]
)
def test_fixture_files_claude_would_merge_are_rejected(tmp_path: Path, name: str) -> None:
    """A fixture with .mcp.json or Claude settings fails before the trial, naming the file."""
    trial = Trial(tmp_path, fixture={name: "{}"})
    with pytest.raises(HostError, match=rf"the fixture provides {name}, which Claude Code"):
        trial.host.prepare(trial.context)
    assert not (trial.state / "claude-config" / ".claude.json").exists()


def test_other_claude_fixture_files_are_kept(tmp_path: Path) -> None:
    """Non-colliding .claude files in the fixture are copied and left alone."""
    trial = Trial(tmp_path, fixture={".claude/commands/x.md": "hi"})
    trial.host.prepare(trial.context)
    assert (trial.sandbox / ".claude" / "commands" / "x.md").read_text() == "hi"


def test_missing_auth_is_rejected_before_any_write(tmp_path: Path) -> None:
    """Credentials gone since the probe: prepare fails and writes no trust file."""
    trial = Trial(tmp_path)
    trial.host = ClaudeCodeHost(env={**trial.parent, "ANTHROPIC_API_KEY": ""})
    trial.host._path = str(trial.stub)  # probed earlier, credentials removed since
    with pytest.raises(HostError, match="claude-code authentication not found"):
        trial.host.prepare(trial.context)
    assert not (trial.state / "claude-config").exists()
    assert not (trial.sandbox / ".claude" / "settings.json").exists()


def test_invocation_prompt_and_environment(tmp_path: Path) -> None:
    """argv is the reference's plus --strict-mcp-config; prompt on stdin; private dirs."""
    parent = {
        "ANTHROPIC_API_KEY": "sk-ant",
        "ANTHROPIC_BASE_URL": "https://gateway.example",
        "CLAUDE_CODE_USE_BEDROCK": "0",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "SECRET_MARKER": "do-not-leak",
        "CLAUDE_CONFIG_DIR": "/real/config",
    }
    trial = Trial(
        tmp_path,
        parent=parent,
        agent="reviewer",
        model="sonnet",
        events=[ASSISTANT, RESULT],
    )
    end, usage, call = trial.run()
    assert end.error is None
    assert call["argv"][1:] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--setting-sources",
        "project",
        "--strict-mcp-config",
        "--agent",
        "reviewer",
        "--model",
        "sonnet",
    ]
    assert call["stdin"] == "-p --help [script:x]\n"
    assert Path(call["cwd"]) == trial.sandbox
    env = env_of(call)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant"
    assert env["ANTHROPIC_BASE_URL"] == "https://gateway.example"
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "0"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert "SECRET_MARKER" not in env
    assert env["CLAUDE_CONFIG_DIR"] == str(trial.state / "claude-config")
    assert env["HOME"] == str(trial.state / "home")
    assert env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(trial.state / "tmp")
    assert env["XDG_RUNTIME_DIR"] == str(trial.state / "run")
    assert env["DISABLE_TELEMETRY"] == "1"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert json.loads(call["files"]["$CLAUDE_CONFIG_DIR/.claude.json"])["projects"]
    assert json.loads(call["files"][".claude/settings.json"]) == claude_settings()
    assert (usage.tokens, usage.cost, usage.model) == (
        350,
        0.03,
        "fable-1",
    )  # the figure never goes down


def test_no_agent_or_model_flags_without_selection(tmp_path: Path) -> None:
    """Without a scenario agent or eval.model, --agent and --model are omitted."""
    _end, _usage, call = Trial(tmp_path, events=[RESULT]).run()
    assert "--agent" not in call["argv"]
    assert "--model" not in call["argv"]


def test_pass_env_reaches_claude(tmp_path: Path) -> None:
    """Cloud-mode credentials reach the session only when named with --pass-env."""
    parent = {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_REGION": "eu-west-1", "AWS_PROFILE": "p"}
    trial = Trial(tmp_path, parent=parent, pass_env=("AWS_REGION",), events=[RESULT])
    assert trial.host.auth_mode == "bedrock"
    _end, _usage, call = trial.run()
    env = env_of(call)
    assert env["AWS_REGION"] == "eu-west-1"
    assert "AWS_PROFILE" not in env


def test_permission_denials_are_evidence(tmp_path: Path) -> None:
    """A result with permission denials completes, and the denials are recorded."""
    denied = {**RESULT, "permission_denials": [{"tool_name": "WebFetch", "tool_input": {}}]}
    end, usage, _call = Trial(tmp_path, events=[denied]).run()
    assert end.error is None
    assert usage.evidence == {"permissionDenials": [{"tool": "WebFetch", "input": "{}"}]}


def test_api_error_result_with_exit_zero_is_an_infra_error(tmp_path: Path) -> None:
    """An is_error result fails the session even when Claude Code exits 0."""
    failed = {**RESULT, "is_error": True, "api_error_status": 429, "result": "slow down"}
    end, _usage, _call = Trial(tmp_path, events=[failed]).run()
    assert end.error == "claude run failed: rate limited: status 429: slow down"


def test_nonzero_exit_prefers_the_host_error(tmp_path: Path) -> None:
    """Exit 1 after an error result reports the result's text, not stderr."""
    failed = {**RESULT, "is_error": True, "api_error_status": 400, "result": "bad"}
    end, _usage, _call = Trial(tmp_path, events=[failed], exit=1, stderr="noise").run()
    assert end.error == "claude run exited 1: claude run failed: bad request: status 400: bad"


def test_budget_binds_on_assistant_messages(tmp_path: Path) -> None:
    """A run whose first assistant message exceeds maxTokens is cancelled by the budget."""
    trial = Trial(tmp_path, events=[ASSISTANT], sleep=30)
    trial.host.prepare(trial.context)

    async def session() -> tuple[bool, int | None]:
        # The stub sleeps 30 s after the event: a budget that did not bind would
        # let the session finish and leave the budget scope uncancelled.
        with anyio.CancelScope() as scope:
            usage = SessionUsage(100, scope.cancel)
            await trial.host.run_session(trial.context, usage)
        assert scope.cancelled_caught
        return usage.exceeded, usage.tokens

    exceeded, tokens = anyio.run(session)
    assert exceeded
    assert tokens == 350
    pid = int(trial.stub.with_name("claude.calls.jsonl.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_cli_run_without_claude_auth_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`atlante-eval run` with an unauthenticated Claude exits 3 naming setup-token; no report."""
    stub = write_stub(
        tmp_path / "bin", "claude", version="2.1.332", auth_status={"loggedIn": False}
    )
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", f"{stub.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = make_project(tmp_path / "project", host="claude-code")
    result = CliRunner().invoke(app, ["run", str(project)])
    assert result.exit_code == 3, result.output
    assert "eval-host-unauthenticated" in result.output
    assert "claude setup-token" in result.output
    assert not (project / ".atlante" / "eval").exists()
    assert sessions(stub) == []
    probe = CliRunner().invoke(app, ["validate", str(project), "--probe"])
    assert probe.exit_code == 3
    assert "claude setup-token" in probe.output


def test_validate_probe_reports_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate --probe` runs the host probe without a trial and reports the version."""
    stub = write_stub(tmp_path / "bin", "claude", version="2.0.7 (Claude Code)")
    monkeypatch.setenv("PATH", f"{stub.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    project = make_project(tmp_path / "project", host="claude-code")
    result = CliRunner().invoke(app, ["validate", str(project), "--probe"])
    assert result.exit_code == 0, result.output
    assert "host claude-code 2.0.7" in result.output
    as_json = CliRunner().invoke(app, ["validate", str(project), "--probe", "--format", "json"])
    assert json.loads(as_json.stdout)["hostVersion"] == "2.0.7"
    assert sessions(stub) == []
