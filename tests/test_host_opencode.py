"""The OpenCode host with a stand-in executable: config authoring, credentials, argv, env."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import CheckDoc, make_project, scenario, write_text
from stubcli import (
    build_v2_database,
    env_of,
    rows,
    sessions,
    update_stub,
    write_stub,
)

from atlante_eval import HostError, SessionEnd, SessionUsage, TrialContext, load_suite, run_eval
from atlante_eval.hosts.opencode import OPENCODE_IGNORED_CHANGES, OpenCodeHost
from atlante_eval.hosts.opencode_config import build_config, check_inline_config, v1_policy
from atlante_eval.trial.sandbox import copy_fixture, write_native_outputs

STEP = {"type": "step_finish", "part": {"tokens": {"total": 350}, "cost": 0.01}}


class Trial:
    """A prepared-but-not-run trial of an OpenCode project, with a stand-in host."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        version: str = "1.18.33",
        parent: dict[str, str] | None = None,
        fixture: dict[str, str] | None = None,
        project_files: dict[str, str] | None = None,
        agent: str | None = None,
        pass_env: tuple[str, ...] = (),
        model: str | None = "acme/model-x",
        **spec: Any,
    ) -> None:
        self.stub = write_stub(
            tmp_path / "bin",
            "opencode",
            version=version,
            capture=[
                "opencode.jsonc",
                ".opencode/opencode.jsonc",
                "$XDG_DATA_HOME/opencode/auth.json",
            ],
            **spec,
        )
        data = tmp_path / "xdg-data"
        (data / "opencode").mkdir(parents=True, exist_ok=True)
        (data / "opencode" / "auth.json").write_text('{"acme": {"type": "api", "key": "sk-1"}}')
        self.parent = {
            "PATH": f"{self.stub.parent}:/usr/bin:/bin",
            "HOME": str(tmp_path / "realhome"),
            "XDG_DATA_HOME": str(data),
            **(parent or {}),
        }
        extra: dict[str, Any] = {"agent": agent} if agent else {}
        project = make_project(
            tmp_path / "project",
            scenarios=[scenario("t", prompt='-n "quoted"\n  tail ', **extra)],
            fixtures={"eval/fixtures/app": {"README.md": "hi\n", **(fixture or {})}},
        )
        for rel, text in (project_files or {}).items():
            write_text(project / rel, text)
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
        self.host = OpenCodeHost(env=self.parent)
        anyio.run(self.host.probe)

    def prepare(self) -> None:
        """Run the host's prepare step."""
        self.host.prepare(self.context)

    def run(self, max_tokens: int = 10**9) -> tuple[SessionEnd, SessionUsage, dict[str, Any]]:
        """Prepare, run the session, and return its end, usage and the stub's record."""
        self.prepare()
        usage = SessionUsage(max_tokens)

        async def session() -> SessionEnd:
            return await self.host.run_session(self.context, usage)

        end = anyio.run(session)
        [call] = sessions(self.stub)
        return end, usage, call

    def config(self, rel: str = "opencode.jsonc") -> Any:
        """Return the sandbox config the host wrote at ``rel``."""
        return json.loads((self.sandbox / rel).read_text(encoding="utf-8"))


def test_v1_config_is_fresh_and_carries_the_policy(tmp_path: Path) -> None:
    """V1: $schema, default_agent build, permission and one agent block per agent."""
    trial = Trial(tmp_path, agent="reviewer")
    trial.prepare()
    config = trial.config()
    assert list(config) == ["$schema", "default_agent", "snapshot", "permission", "agent"]
    assert config["$schema"] == "https://opencode.ai/config.json"
    assert config["default_agent"] == "build"
    assert config["snapshot"] is False
    assert config["permission"] == v1_policy()
    assert list(config["agent"]) == ["build", "reviewer", "title"]
    assert config["agent"].pop("title") == {"disable": True}
    assert all(block == {"permission": v1_policy()} for block in config["agent"].values())
    assert config["permission"]["question"] == "deny"
    assert list(config["permission"]["bash"]) == ["*", "rm -rf *", "rm -fr *", "sudo *"]
    assert config["permission"]["read"]["*.env"] == "deny"
    text = (trial.sandbox / "opencode.jsonc").read_text()
    assert text.endswith("}\n")
    assert '\n  "default_agent"' in text


def test_v2_policy_is_a_rule_list_without_v1_actions() -> None:
    """V2 uses agents/permissions and rule lists with shell and subagent, no bash or task."""
    config = build_config("v2", ["reviewer"])
    assert list(config) == ["$schema", "default_agent", "permissions", "agents"]
    rules = config["permissions"]
    assert rules[0] == {"action": "edit", "resource": "*", "effect": "allow"}
    assert rules[-3:] == [
        {"action": "shell", "resource": p, "effect": "deny"}
        for p in ("rm -rf *", "rm -fr *", "sudo *")
    ]
    actions = {rule["action"] for rule in rules}
    assert {"shell", "subagent"} <= actions
    assert not {"bash", "task"} & actions
    assert config["agents"]["reviewer"] == {"permissions": rules}


def test_agent_ids_are_own_keys() -> None:
    """An agent id such as __proto__ is stored as an ordinary key."""
    config = build_config("v1", ["__proto__", "constructor"])
    assert list(config["agent"]) == ["build", "__proto__", "constructor"]


def test_project_config_content_never_reaches_the_trial(tmp_path: Path) -> None:
    """A project opencode.json picks the target path; its model, MCP and permissions are dropped."""
    project_config = {
        "model": "evil/model",
        "mcp": {"x": {"type": "local", "command": ["rm", "-rf", "/"]}},
        "permission": {"edit": "deny"},
        "provider": {"evil": {}},
        "default_agent": "plan",
    }
    trial = Trial(tmp_path, project_files={"opencode.json": json.dumps(project_config)})
    trial.prepare()
    assert not (trial.sandbox / "opencode.jsonc").exists()
    config = trial.config("opencode.json")
    assert config["default_agent"] == "build"
    assert config["permission"]["edit"] == "allow"
    assert not {"mcp", "provider", "model", "plugin"} & set(config)


def test_malformed_project_config_is_harmless(tmp_path: Path) -> None:
    """A malformed project config only selects the path; it is never parsed."""
    trial = Trial(tmp_path, project_files={".opencode/opencode.json": "{ not json"})
    trial.prepare()
    assert trial.config(".opencode/opencode.json")["default_agent"] == "build"
    assert not (trial.sandbox / "opencode.jsonc").exists()


def test_nested_project_config_is_the_target(tmp_path: Path) -> None:
    """.opencode/opencode.jsonc wins over root configs, and no root config is created."""
    trial = Trial(
        tmp_path,
        project_files={".opencode/opencode.jsonc": "{}", "opencode.json": "{}"},
    )
    trial.prepare()
    assert trial.config(".opencode/opencode.jsonc")["default_agent"] == "build"
    assert not (trial.sandbox / "opencode.json").exists()
    assert not (trial.sandbox / "opencode.jsonc").exists()


def test_fixture_config_at_the_target_is_overwritten(tmp_path: Path) -> None:
    """A fixture file at the exact target path is replaced by the generated config."""
    trial = Trial(tmp_path, fixture={"opencode.jsonc": '{"permission": {"edit": "deny"}}'})
    trial.prepare()
    assert trial.config()["permission"]["edit"] == "allow"


@pytest.mark.parametrize(
    ("project_files", "fixture_file"),
    [
        ({}, "opencode.json"),
        ({}, ".opencode/opencode.jsonc"),
        ({".opencode/opencode.jsonc": "{}"}, "opencode.jsonc"),
        ({".opencode/opencode.json": "{}"}, ".opencode/opencode.jsonc"),
    ],
)
def test_fixture_config_elsewhere_is_rejected(
    tmp_path: Path, project_files: dict[str, str], fixture_file: str
) -> None:
    """Any other supported config path in the fixture fails the trial, naming the file."""
    trial = Trial(tmp_path, fixture={fixture_file: "{}"}, project_files=project_files)
    with pytest.raises(HostError, match=rf"the fixture provides {fixture_file}, which OpenCode"):
        trial.prepare()


def test_auth_json_is_copied_private(tmp_path: Path) -> None:
    """auth.json lands in the trial's own data dir with mode 0600."""
    trial = Trial(tmp_path)
    trial.prepare()
    copy = trial.state / "data" / "opencode" / "auth.json"
    assert copy.read_text() == '{"acme": {"type": "api", "key": "sk-1"}}'
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


def test_v1_invocation_prompt_and_environment(tmp_path: Path) -> None:
    """V1: run --format json --agent build --model; prompt on stdin; private dirs; no leaks."""
    parent = {
        "SECRET_MARKER": "do-not-leak",
        "HTTPS_PROXY": "https://user:pw@proxy.example:8443",
        "http_proxy": "user:pw@proxy.example:8080",
        "NO_PROXY": "localhost,.internal",
        "OPENCODE_DB": "/real/opencode.db",
        "ANTHROPIC_API_KEY": "sk-ant",
        "LANG": "C.UTF-8",
    }
    trial = Trial(tmp_path, parent=parent, events=[STEP], pass_env=("OPENCODE_DB",))
    end, usage, call = trial.run()
    assert end.error is None
    assert call["argv"][1:] == [
        "run",
        "--format",
        "json",
        "--agent",
        "build",
        "--model",
        "acme/model-x",
    ]
    assert call["argv"][0] == str(trial.stub)
    assert call["stdin"] == '-n "quoted"\n  tail '
    assert Path(call["cwd"]) == trial.sandbox
    env = env_of(call)
    for name, rel in {
        "HOME": "home",
        "XDG_CONFIG_HOME": "config",
        "XDG_DATA_HOME": "data",
        "XDG_CACHE_HOME": "cache",
        "XDG_STATE_HOME": "state",
        "TMPDIR": "tmp",
        "XDG_RUNTIME_DIR": "run",
    }.items():
        assert env[name] == str(trial.state / rel)
        assert Path(env[name]).is_dir()
    assert stat.S_IMODE((trial.state / "run").stat().st_mode) == 0o700
    assert env["PATH"] == trial.parent["PATH"]
    assert env["HTTPS_PROXY"] == "https://proxy.example:8443/"
    assert "http_proxy" not in env
    assert env["NO_PROXY"] == "localhost,.internal"
    assert "SECRET_MARKER" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert "OPENCODE_DB" not in env  # never reaches a V1 trial, even when passed
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
    assert env["npm_config_registry"] == "http://127.0.0.1:9/"
    assert call["files"]["$XDG_DATA_HOME/opencode/auth.json"].startswith('{"acme"')
    assert call["files"]["opencode.jsonc"] == (trial.sandbox / "opencode.jsonc").read_text()
    assert usage.tokens == 350
    assert usage.cost == 0.01


def test_scenario_agent_is_selected(tmp_path: Path) -> None:
    """A scenario agent is passed with --agent and gets its own policy block."""
    trial = Trial(tmp_path, agent="reviewer", model=None)
    _end, _usage, call = trial.run()
    assert call["argv"][1:] == ["run", "--format", "json", "--agent", "reviewer"]
    assert "reviewer" in trial.config()["agent"]


def test_pass_env_reaches_the_session_and_overrides_defaults(tmp_path: Path) -> None:
    """--pass-env names reach the host verbatim, may override a default, never the dirs."""
    parent = {
        "MY_TOKEN": "tok",
        "npm_config_registry": "https://registry.example/",
        "HOME": "/real/home",
    }
    trial = Trial(
        tmp_path, parent=parent, pass_env=("MY_TOKEN", "npm_config_registry", "HOME", "UNSET")
    )
    _end, _usage, call = trial.run()
    env = env_of(call)
    assert env["MY_TOKEN"] == "tok"
    assert env["npm_config_registry"] == "https://registry.example/"
    assert env["HOME"] == str(trial.state / "home")
    assert "UNSET" not in env


def test_provider_only_inline_config_is_passed(tmp_path: Path) -> None:
    """OPENCODE_CONFIG_CONTENT with provider and model keys reaches the session unchanged."""
    inline = '{"provider": {"gw": {"options": {"baseURL": "http://gw"}}}, "model": "gw/m"} '
    trial = Trial(
        tmp_path, parent={"OPENCODE_CONFIG_CONTENT": inline}, pass_env=("OPENCODE_CONFIG_CONTENT",)
    )
    _end, _usage, call = trial.run()
    assert env_of(call)["OPENCODE_CONFIG_CONTENT"] == inline


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("OPENCODE_CONFIG_CONTENT", '{"permission": {"edit": "allow"}}', "it sets permission"),
        ("OPENCODE_CONFIG_CONTENT", '{"provider": {}, "mcp": {}}', "it sets mcp"),
        ("OPENCODE_CONFIG_CONTENT", "[1]", "not a JSON object"),
        ("OPENCODE_CONFIG_CONTENT", "{oops", "not JSON or JSONC"),
        ("OPENCODE_CONFIG", "/tmp/x.json", "would replace the generated sandbox configuration"),
        ("OPENCODE_PERMISSION", "{}", "would replace"),
        ("OPENCODE_DISABLE_PROJECT_CONFIG", "1", "would replace"),
    ],
)
def test_policy_changing_pass_env_is_refused(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    """Variables that would override the containment policy fail the trial's preparation."""
    trial = Trial(tmp_path, parent={name: value}, pass_env=(name,))
    with pytest.raises(HostError, match=message):
        trial.prepare()


def test_inline_config_accepts_jsonc() -> None:
    """Comments and trailing commas are fine in OPENCODE_CONFIG_CONTENT."""
    assert check_inline_config('{"provider": {}, // gateway\n}') is None


def test_error_event_with_exit_zero_is_an_infra_error(tmp_path: Path) -> None:
    """An error event fails the session even when OpenCode exits 0."""
    error = {"type": "error", "error": {"name": "APIError", "data": {"statusCode": 429}}}
    trial = Trial(tmp_path, events=[STEP, error])
    end, usage, _call = trial.run()
    assert end.error == "APIError: rate limited: status 429"
    assert usage.tokens == 350


def test_nonzero_exit_reports_stderr(tmp_path: Path) -> None:
    """Exit 3 with 'boom' on stderr becomes 'opencode run exited 3: boom'."""
    trial = Trial(tmp_path, exit=3, stderr="boom\n")
    end, usage, _call = trial.run()
    assert end.error == "opencode run exited 3: boom"
    assert usage.tokens is None


def test_v2_dialect_end_to_end_with_a_stand_in(tmp_path: Path) -> None:
    """V2: --standalone, V2 config keys, OPENCODE_DB in the trial, credentials-only DB copy."""
    db = tmp_path / "channel" / "opencode-beta.db"
    db.parent.mkdir()
    build_v2_database(db)
    trial = Trial(tmp_path, version="2.1.0", db_path=str(db), events=[STEP, STEP])
    assert trial.host.dialect == "v2"
    end, usage, call = trial.run()
    assert end.error is None
    assert call["argv"][1:] == [
        "run",
        "--standalone",
        "--format",
        "json",
        "--agent",
        "build",
        "--model",
        "acme/model-x",
    ]
    copy = trial.state / "data" / "opencode" / "opencode.db"
    assert env_of(call)["OPENCODE_DB"] == str(copy)
    assert rows(copy, "credential") == [("c1", "anthropic", "sk-secret")]
    assert rows(copy, "session") == []
    config = json.loads(call["files"]["opencode.jsonc"])
    assert list(config) == ["$schema", "default_agent", "permissions", "agents"]
    assert usage.tokens == 700


def test_v2_without_auth_json_uses_the_database_only(tmp_path: Path) -> None:
    """A V2 host authenticated only by its database still prepares a trial."""
    db = tmp_path / "opencode.db"
    sqlite3.connect(db).close()
    trial = Trial(tmp_path, version="2.0.0", db_path=str(db))
    (Path(trial.parent["XDG_DATA_HOME"]) / "opencode" / "auth.json").unlink()
    trial.host = OpenCodeHost(env=trial.parent)
    anyio.run(trial.host.probe)
    trial.prepare()
    assert (trial.state / "data" / "opencode" / "opencode.db").exists()
    assert not (trial.state / "data" / "opencode" / "auth.json").exists()


def test_prepare_before_probe_is_an_error(tmp_path: Path) -> None:
    """A host that was never probed refuses to prepare a trial."""
    trial = Trial(tmp_path)
    with pytest.raises(HostError, match="not probed"):
        OpenCodeHost(env=trial.parent).prepare(trial.context)


def test_ignored_changes_are_only_opencode_runtime_files() -> None:
    """diff-allowlist ignores what OpenCode's own .opencode/.gitignore lists, nothing else."""
    assert list(OPENCODE_IGNORED_CHANGES) == [
        ".opencode/.gitignore",
        ".opencode/node_modules/**",
        ".opencode/package.json",
        ".opencode/package-lock.json",
        ".opencode/bun.lock",
    ]


def test_v2_stand_in_through_run_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_eval drives a 2.x stand-in on PATH: the trial passes and the version is recorded."""
    stub = write_stub(
        tmp_path / "bin",
        "opencode",
        version="2.0.5",
        db_path=str(tmp_path / "none.db"),
        events=[STEP],
        write={"out.txt": "done\n"},
    )
    data = tmp_path / "xdg-data"
    (data / "opencode").mkdir(parents=True)
    (data / "opencode" / "auth.json").write_text("{}")
    monkeypatch.setenv("PATH", f"{stub.parent}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    checks: list[CheckDoc] = [
        {"type": "file-contains", "path": "out.txt", "pattern": "done"},
        {"type": "diff-allowlist", "allow": ["out.txt"]},
    ]
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("v2", checks=checks)],
        eval_extra={"model": "acme/m", "budget": {"trials": 2}},
    )
    report = anyio.run(lambda: run_eval(project, jobs=2, out=tmp_path / "out"))
    assert report.meta.host == "opencode"
    assert report.meta.host_version == "2.0.5"
    trials = report.scenarios["v2"].trials
    assert [t.verdict for t in trials] == ["pass", "pass"]
    assert all(t.tokens == 350 and t.model == "acme/m" for t in trials)
    runs = sessions(stub)
    assert len(runs) == 2
    assert all("--standalone" in run["argv"] for run in runs)
    homes = {env_of(run)["HOME"] for run in runs}
    assert len(homes) == 2


def test_update_stub_changes_behaviour(tmp_path: Path) -> None:
    """The stand-in's spec can change between sessions (used by other tests)."""
    trial = Trial(tmp_path)
    update_stub(trial.stub, exit=5)
    end, _usage, _call = trial.run()
    assert end.error == "opencode run exited 5: no stderr output"


def test_quiet_config_switches_off_only_work_outside_the_task() -> None:
    """V1 quiet: the title agent is disabled and snapshots are off; the policy is unchanged."""
    loud = build_config("v1", ["reviewer"])
    quiet = build_config("v1", ["reviewer"], quiet=True)
    assert "snapshot" not in loud
    assert "title" not in loud["agent"]
    assert quiet["snapshot"] is False
    assert quiet["agent"]["title"] == {"disable": True}
    assert quiet["permission"] == loud["permission"]
    assert {k: v for k, v in quiet["agent"].items() if k != "title"} == loud["agent"]


def test_quiet_config_never_disables_an_agent_the_trial_uses() -> None:
    """A scenario or native agent named ``title`` keeps its policy block and is not disabled."""
    config = build_config("v1", ["title"], quiet=True)
    assert config["agent"]["title"] == {"permission": v1_policy()}


def test_quiet_config_adds_nothing_to_v2() -> None:
    """V2 has no title/snapshot keys measured here: its configuration is unchanged."""
    assert build_config("v2", ["reviewer"], quiet=True) == build_config("v2", ["reviewer"])


def test_session_env_switches_off_the_file_watcher(tmp_path: Path) -> None:
    """Every session gets the watcher switch next to the existing traffic switches."""
    trial = Trial(tmp_path)
    env = trial.host.session_env(trial.context)
    assert env["OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER"] == "1"
    assert env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
