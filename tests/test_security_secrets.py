"""Secrets in the parent environment reach no host session, check or git, and no output.

The real CLI runs as a subprocess with the real OpenCode and Claude Code hosts,
whose executables are stand-ins that record the environment they were given. A
``git`` wrapper first on PATH records every git call's environment, and a command
check dumps its own. Afterwards every file the run wrote (reports, journal, kept
sandboxes and host state) and everything it printed (with JSON logs) is searched
for every secret value.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from clikit import processes_marked
from factory import make_project, scenario
from stubcli import env_of, sessions, update_stub, write_stub

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-leak-7f3a9c01",
    "GITHUB_TOKEN": "ghp_leak_51b2e8d4",
    "OPENAI_API_KEY": "sk-openai-leak-93d1aa",
    "MY_SECRET": "my-leak-c0ffee42",
    "ANTHROPIC_API_KEY": "sk-ant-leak-4e5f6071",
}
#: A proxy password: the proxy variable passes, its credentials must not.
PROXY_PASSWORD = "proxy-leak-pw-8c7d"
ALL_SECRET_VALUES = [*SECRETS.values(), PROXY_PASSWORD]

_DUMP = "import json, os, sys; open(sys.argv[1], 'a').write(json.dumps(dict(os.environ)) + '\\n')"

#: Records each git call's argv and environment, then runs the real git.
_GIT_WRAPPER = """#!{python}
import json, os, sys
with open({log!r}, "a") as handle:
    handle.write(json.dumps({{"argv": sys.argv, "env": dict(os.environ)}}) + "\\n")
os.execv({git!r}, [{git!r}, *sys.argv[1:]])
"""

STEP = {"type": "step_finish", "part": {"tokens": {"total": 350}, "cost": 0.01}}
ASSISTANT = {
    "type": "assistant",
    "message": {"id": "m1", "model": "fable-1", "usage": {"input_tokens": 3}},
}
RESULT = {"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": 0.01}


@dataclass
class SecretRun:
    """One CLI run with secrets in its environment, and where it left traces."""

    tmp_path: Path
    project: Path
    stub: Path
    dumps: Path
    tmpdir: Path
    stdout: str = ""
    stderr: str = ""
    status: int = -1

    def dumped(self, name: str) -> list[dict[str, Any]]:
        """Environments recorded in ``dumps/<name>.jsonl``."""
        path = self.dumps / f"{name}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def git_envs(self) -> list[dict[str, str]]:
        """The environment of every git call the run made."""
        return [record["env"] for record in self.dumped("git")]


def _prepare(tmp_path: Path, host: str) -> SecretRun:
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    bin_dir = tmp_path / "bin"
    if host == "opencode":
        stub = write_stub(bin_dir, "opencode", version="1.18.33", events=[STEP])
    else:
        stub = write_stub(bin_dir, "claude", version="2.1.332", events=[ASSISTANT, RESULT])
    real_git = shutil.which("git")
    assert real_git is not None
    wrapper = bin_dir / "git"
    wrapper.write_text(
        _GIT_WRAPPER.format(python=sys.executable, log=str(dumps / "git.jsonl"), git=real_git)
    )
    wrapper.chmod(0o755)
    checks: list[dict[str, Any]] = [
        {"type": "command", "run": [sys.executable, "-c", _DUMP, str(dumps / "check.jsonl")]},
        {
            "type": "command",
            "run": [sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
        },
        {"type": "diff-allowlist", "allow": ["README.md"]},
    ]
    project = make_project(
        tmp_path / "project",
        host=host,
        scenarios=[
            scenario(
                "leaky",
                setup=[sys.executable, "-c", _DUMP, str(dumps / "setup.jsonl")],
                checks=checks,
            )
        ],
        eval_extra={"budget": {"trials": 2}, "model": "acme/model-x"},
    )
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    return SecretRun(tmp_path, project, stub, dumps, tmpdir)


def _run(secret_run: SecretRun, *extra: str) -> SecretRun:
    """Run ``atlante-eval run`` (real hosts, stand-in executables) with secrets in its env."""
    data = secret_run.tmp_path / "xdg-data"
    (data / "opencode").mkdir(parents=True, exist_ok=True)
    (data / "opencode" / "auth.json").write_text('{"acme": {"type": "api", "key": "sk-1"}}')
    env = {
        "PATH": f"{secret_run.stub.parent}:{os.environ['PATH']}",
        "HOME": str(secret_run.tmp_path / "home"),
        "XDG_DATA_HOME": str(data),
        "TMPDIR": str(secret_run.tmpdir),
        "LANG": "C.UTF-8",
        "HTTPS_PROXY": f"http://user:{PROXY_PASSWORD}@proxy.invalid:8080",
        "NO_COLOR": "1",
        **SECRETS,
    }
    args = ["run", str(secret_run.project), "--keep", "--log-format", "json", "--json", *extra]
    result = subprocess.run(
        [sys.executable, "-m", "atlante_eval", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    secret_run.stdout, secret_run.stderr, secret_run.status = (
        result.stdout,
        result.stderr,
        result.returncode,
    )
    assert processes_marked(secret_run.tmpdir) == []
    return secret_run


def _leaks(run: SecretRun, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Every place outside the deliberate dumps where a secret value appears."""
    places: dict[str, bytes] = {
        "stdout": run.stdout.encode(),
        "stderr": run.stderr.encode(),
    }
    for root in (run.project, run.tmpdir):
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                places[str(path)] = path.read_bytes()
    found = []
    for where, content in places.items():
        for name, value in [*SECRETS.items(), ("HTTPS_PROXY", PROXY_PASSWORD)]:
            if name not in allowed and value.encode() in content:
                found.append(f"{name} in {where}")
    return found


def _assert_clean(env: dict[str, str], allowed: frozenset[str] = frozenset()) -> None:
    text = json.dumps(env)
    for name, value in SECRETS.items():
        if name not in allowed:
            assert name not in env
            assert value not in text
    assert PROXY_PASSWORD not in text


@pytest.fixture(scope="module")
def opencode_run(tmp_path_factory: pytest.TempPathFactory) -> SecretRun:
    """One OpenCode run (two trials, kept sandboxes, JSON logs) with secrets around it."""
    return _run(_prepare(tmp_path_factory.mktemp("opencode-secrets"), "opencode"))


def test_run_completes_and_grades(opencode_run: SecretRun) -> None:
    """The run itself works: two graded trials, sessions and checks really ran."""
    assert opencode_run.status == 0, opencode_run.stderr
    report = json.loads(opencode_run.stdout)
    assert [t["verdict"] for t in report["scenarios"]["leaky"]["trials"]] == ["pass", "pass"]
    assert len(sessions(opencode_run.stub)) == 2
    assert len(opencode_run.dumped("check")) == 2
    assert '"event": "run.start"' in opencode_run.stderr


def test_no_secret_reaches_an_opencode_session(opencode_run: SecretRun) -> None:
    """OpenCode sessions get none of the secrets (not even ANTHROPIC_API_KEY)."""
    for call in sessions(opencode_run.stub):
        _assert_clean(env_of(call))


def test_no_secret_reaches_a_command_check(opencode_run: SecretRun) -> None:
    """Command checks get the allowlist only: no secret, no proxy password."""
    for env in opencode_run.dumped("check"):
        _assert_clean(env)


def test_no_secret_reaches_git(opencode_run: SecretRun) -> None:
    """No git call (grading's diff; the baseline is written in-process) gets a secret;
    all ignore user config."""
    envs = opencode_run.git_envs()
    assert len(envs) >= 2  # each trial's git diff
    for env in envs:
        _assert_clean(env)
        assert env["GIT_CONFIG_NOSYSTEM"] == "1"


def test_setup_gets_the_full_environment_as_documented(opencode_run: SecretRun) -> None:
    """Setup commands inherit the full environment (the seeds say so): secrets included."""
    for env in opencode_run.dumped("setup"):
        assert env["MY_SECRET"] == SECRETS["MY_SECRET"]


def test_no_secret_in_reports_journal_logs_sandboxes_or_output(opencode_run: SecretRun) -> None:
    """No secret value appears in any file the run wrote or anything it printed."""
    assert _leaks(opencode_run) == []


def test_pass_env_reaches_only_the_host_session(tmp_path: Path) -> None:
    """--pass-env MY_SECRET reaches the host session only: not checks, git or the report."""
    run = _run(_prepare(tmp_path, "opencode"), "--pass-env", "MY_SECRET")
    assert run.status == 0, run.stderr
    for call in sessions(run.stub):
        env = env_of(call)
        assert env["MY_SECRET"] == SECRETS["MY_SECRET"]
        _assert_clean(env, allowed=frozenset({"MY_SECRET"}))
    for env in [*run.dumped("check"), *run.git_envs()]:
        _assert_clean(env)
    assert _leaks(run) == []


@pytest.mark.parametrize("gateway", ["on", "off"])
def test_claude_sessions_get_their_auth_variables_only(tmp_path: Path, gateway: str) -> None:
    """Claude Code sessions get ANTHROPIC_API_KEY (its auth) and no other secret.

    With the gateway on (the default) even that is a per-trial stand-in: the real key
    stays with the engine (docs/gateway.md); with it off, the session gets the key.
    """
    run = _run(_prepare(tmp_path, "claude-code"), "--gateway", gateway)
    assert run.status == 0, run.stderr
    calls = sessions(run.stub)
    assert len(calls) == 2
    for call in calls:
        env = env_of(call)
        if gateway == "off":
            assert env["ANTHROPIC_API_KEY"] == SECRETS["ANTHROPIC_API_KEY"]
            _assert_clean(env, allowed=frozenset({"ANTHROPIC_API_KEY"}))
        else:
            assert env["ANTHROPIC_API_KEY"].startswith("atlante-gw-")
            assert env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
            _assert_clean({k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"})
            assert SECRETS["ANTHROPIC_API_KEY"] not in json.dumps(env)
    for env in [*run.dumped("check"), *run.git_envs()]:
        _assert_clean(env)
    assert _leaks(run) == []


def test_no_secret_in_diagnostics(tmp_path: Path) -> None:
    """Validation failures, an unavailable host and a failing session print no secret."""
    prepared = _prepare(tmp_path, "opencode")
    scenario_file = prepared.project / "eval" / "scenarios" / "leaky.eval.json"
    document = json.loads(scenario_file.read_text())

    invalid = {**document, "checks": [{"type": "command", "run": ["x"], "outputMatches": "("}]}
    scenario_file.write_text(json.dumps(invalid))
    assert _run(prepared).status == 2
    assert "invalid-eval-scenario" in prepared.stderr
    assert _leaks(prepared) == []

    scenario_file.write_text(json.dumps(document))
    update_stub(prepared.stub, version_output="opencode 0.0.1\n")
    assert _run(prepared).status == 3
    assert "error [eval-host" in prepared.stderr
    assert _leaks(prepared) == []

    update_stub(prepared.stub, version_output="1.18.33\n", stderr="the session broke\n", exit=1)
    assert _run(prepared).status == 1
    report = json.loads(prepared.stdout)
    [trial, _] = report["scenarios"]["leaky"]["trials"]
    assert trial["verdict"] == "infra-error"
    assert "the session broke" in trial["error"]
    assert _leaks(prepared) == []
