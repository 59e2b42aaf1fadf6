"""Issue 15: a newcomer's first hour, each stumble reproduced through the command line.

Commands that need no host run the installed ``atlante-eval`` console script;
``run`` goes through ``tests/standin_cli.py`` (the same CLI with the stand-in host).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
from clikit import start_cli, wait_for
from factory import make_project, scenario
from standin import StandinHost, actions
from stubcli import calls, write_stub

from atlante_eval import RunOptions
from atlante_eval.hosts import TrialContext
from atlante_eval.hosts.claude_code import ClaudeCodeHost, claude_settings
from atlante_eval.run.runner import execute_run

CONSOLE = Path(sys.executable).with_name("atlante-eval")
OUT_CHECK = [{"type": "file-exists", "path": "out.txt"}]
WRITES = actions({"write": "out.txt", "content": "x"})
IDLE = actions()


def console(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``atlante-eval`` console script; never a traceback."""
    result = subprocess.run(
        [str(CONSOLE), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else {**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def standin_run(tmp_path: Path, *args: str, name: str) -> tuple[int, str, str]:
    """Run ``run ARGS`` through the stand-in CLI; return status, stdout and stderr."""
    run = start_cli(["run", *args], tmp_path, name=name)
    status = run.wait(timeout_s=300)
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    return status, run.stdout, run.stderr


def _two_scenarios(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=[
            scenario("passes", prompt=WRITES, checks=OUT_CHECK),
            scenario("fails", prompt=IDLE, checks=OUT_CHECK),
        ],
        eval_extra={"budget": {"trials": 1}},
    )


def _stub_opencode(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An OpenCode V1 stand-in executable on PATH, signed in; each session writes out.txt."""
    bin_dir = tmp_path / "stub-bin"
    stub = write_stub(bin_dir, "opencode", version="1.18.33", write={"out.txt": "x\n"})
    env = _env(tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    auth = Path(env["XDG_DATA_HOME"]) / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True, exist_ok=True)
    auth.write_text('{"acme": {"type": "api", "key": "k"}}')
    return env, stub


def _sessions(stub: Path) -> int:
    """How many host sessions (``opencode run ...``) the stand-in executable served."""
    return sum(1 for call in calls(stub) if call["argv"][1:2] == ["run"])


def _stub_project(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=[
            scenario("passes", checks=OUT_CHECK),
            scenario("fails", checks=[{"type": "file-exists", "path": "never.txt"}]),
        ],
        eval_extra={"model": "acme/model", "budget": {"trials": 1}},
    )


def test_last_failed_skips_selftest_reports_and_names_the_run_it_took(tmp_path: Path) -> None:
    """After run then selftest, --last-failed takes the real run, not the selftest's."""
    env, stub = _stub_opencode(tmp_path)
    root = _stub_project(tmp_path)
    first_run = console("run", str(root), env=env)
    assert first_run.returncode == 1, first_run.stderr
    assert _sessions(stub) == 2
    [first] = [p for p in (root / ".atlante" / "eval").iterdir() if p.is_dir()]
    selftest = console("selftest", str(root), env=env)
    assert selftest.returncode == 0, selftest.stderr
    second = console("run", str(root), "--last-failed", "--json", env=env)
    assert second.returncode == 1
    assert list(json.loads(second.stdout)["scenarios"]) == ["fails"]
    assert _sessions(stub) == 3  # one more session: only "fails" ran
    assert f"took run {first.name}" in second.stderr
    assert "skipped 1 newer selftest report" in second.stderr


def test_last_failed_with_only_a_selftest_report_runs_everything_and_says_why(
    tmp_path: Path,
) -> None:
    """A selftest report alone is no earlier run: every scenario runs, and the note says so."""
    env, _stub = _stub_opencode(tmp_path)
    root = _stub_project(tmp_path)
    assert console("selftest", str(root), env=env).returncode == 0
    result = console("run", str(root), "--last-failed", "--json", env=env)
    assert result.returncode == 1
    assert sorted(json.loads(result.stdout)["scenarios"]) == ["fails", "passes"]
    assert "no earlier run found (skipped 1 newer selftest report)" in result.stderr


def test_junit_in_a_missing_directory_exits_2_before_any_session(tmp_path: Path) -> None:
    """--junit missing-dir/x.xml is refused up front: exit 2, no session, no report."""
    env, stub = _stub_opencode(tmp_path)
    root = _stub_project(tmp_path)
    result = console("run", str(root), "--junit", str(tmp_path / "missing-dir" / "x.xml"), env=env)
    assert result.returncode == 2
    assert "error [invalid-output-path]: --junit" in result.stderr
    assert "missing-dir" in result.stderr
    assert "does not exist" in result.stderr
    assert result.stdout == ""
    assert calls(stub) == []  # not even the version probe ran
    assert not (root / ".atlante" / "eval").exists()
    # The same run with a writable --junit path spends its sessions and writes the file.
    ok = console("run", str(root), "--junit", str(tmp_path / "x.xml"), env=env)
    assert ok.returncode == 1
    assert _sessions(stub) == 2
    assert (tmp_path / "x.xml").read_bytes().startswith(b"<?xml")


def test_junit_naming_a_directory_and_out_naming_a_file_are_both_reported(
    tmp_path: Path,
) -> None:
    """Every bad output path is reported at once, before the run starts."""
    env, stub = _stub_opencode(tmp_path)
    root = _stub_project(tmp_path)
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    result = console("run", str(root), "--junit", str(tmp_path), "--out", str(blocker), env=env)
    err = result.stderr
    assert result.returncode == 3  # eval-report-failed for --out, as the reference has it
    assert calls(stub) == []
    assert "invalid-output-path" in err
    assert "is a directory" in err
    assert "eval-report-failed" in err
    assert "is not a directory" in err
    assert blocker.read_text() == "x"


def test_report_commands_check_their_output_files_first(tmp_path: Path) -> None:
    """compare --markdown, junit --output and merge --output refuse a missing directory."""
    missing = tmp_path / "nowhere" / "out"
    no_report = tmp_path / "absent.json"
    for args in (
        ["compare", str(no_report), str(no_report), "--markdown", str(missing)],
        ["junit", str(no_report), "--output", str(missing)],
        ["merge", str(no_report), "--output", str(missing)],
    ):
        result = console(*args)
        assert result.returncode == 2, args
        assert "invalid-output-path" in result.stderr, args
        assert "report-unreadable" not in result.stderr, args


PY_FIXTURE = {
    "eval/fixtures/py": {
        "pkg/__init__.py": "from .mod import answer\n",
        "pkg/mod.py": "def answer() -> int:\n    return 41\n",
        "tests/__init__.py": "",
        "tests/test_mod.py": "import unittest\n\nfrom pkg import answer\n\n\n"
        "class T(unittest.TestCase):\n    def test_answer(self) -> None:\n"
        "        self.assertEqual(answer(), 42)\n",
        "NOTES.md": "notes\n",
    }
}
UNITTEST = {"type": "command", "run": [sys.executable, "-m", "unittest"]}


def _solution(root: Path, name: str, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = root / "eval" / "scenarios" / "solutions" / name / "files" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def test_selftest_runs_command_checks_and_reports_their_leftovers(tmp_path: Path) -> None:
    """A correct solution plus a test run leaves .pyc files an exact allowlist forbids."""
    root = make_project(
        tmp_path / "p",
        fixtures=PY_FIXTURE,
        scenarios=[
            scenario(
                "fix-answer",
                fixture="eval/fixtures/py",
                checks=[UNITTEST, {"type": "diff-allowlist", "allow": ["pkg/mod.py"]}],
            ),
            scenario(
                "write-notes",
                fixture="eval/fixtures/py",
                setup=[sys.executable, "-m", "compileall", "-q", "pkg", "tests"],
                checks=[
                    UNITTEST | {"expectExit": 1},
                    {"type": "file-contains", "path": "NOTES.md", "pattern": "done"},
                    {"type": "diff-allowlist", "allow": ["NOTES.md"]},
                ],
            ),
        ],
    )
    _solution(root, "fix-answer", {"pkg/mod.py": "def answer() -> int:\n    return 42\n"})
    _solution(root, "write-notes", {"NOTES.md": "done\n"})
    result = console("selftest", str(root))
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'error [selftest-command-leftovers]: scenario "fix-answer"' in result.stderr
    assert "pkg/__pycache__/mod.cpython-" in result.stderr
    assert '"allow": ["pkg/mod.py", "pkg/__pycache__/' in result.stderr
    # The setup compiled the bytecode and the agent edits no module: no finding.
    assert 'scenario "write-notes"' not in result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line}
    assert lines["fix-answer"].endswith("command-leftovers")
    assert lines["write-notes"].endswith("ok")


# --- validate passes what a run would fail on -------------------------------------


def _env(tmp_path: Path, *, path: str | None = None, **extra: str) -> dict[str, str]:
    """A clean environment for the console script: no host credentials of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "OPENCODE", "PYTEST_"))
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update({"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")})
    env.update({"NO_COLOR": "1", "PATH": path if path is not None else env["PATH"], **extra})
    return env


def test_validate_refuses_an_agent_no_native_output_defines(tmp_path: Path) -> None:
    """ "agent": "nobody" is unknown-scenario-agent (exit 2); a host built-in is fine."""
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario("nobody-drives", agent="nobody"),
            scenario("build-drives", agent="build"),
        ],
        eval_extra={"model": "acme/m"},
    )
    result = console("validate", str(root), env=_env(tmp_path))
    assert result.returncode == 2
    assert 'error [unknown-scenario-agent]: scenario "nobody-drives" names agent "nobody"' in (
        result.stderr
    )
    assert "at: eval/scenarios/nobody-drives.eval.json:" in result.stderr
    assert "/task/agent" in result.stderr
    assert "build-drives" not in result.stderr


def test_validate_refuses_a_name_too_long_for_the_trial_directories(tmp_path: Path) -> None:
    """A 250-character name is scenario-name-too-long (exit 2), not ENAMETOOLONG per trial."""
    root = make_project(tmp_path / "p", scenarios=[scenario("a" * 128)])
    long_doc = json.dumps(scenario("b" * 250))
    (root / "eval" / "scenarios" / "long.eval.json").write_text(long_doc)
    result = console("validate", str(root), "--json", env=_env(tmp_path))
    assert result.returncode == 2
    report = json.loads(result.stdout)
    [problem] = report["diagnostics"]
    assert problem["code"] == "scenario-name-too-long"
    assert problem["pointer"] == "/name"
    assert "250 characters" in problem["message"]
    assert "at most 128" in problem["message"]


def test_git_missing_from_path_is_a_diagnostic_and_selftest_does_not_blame_the_fixture(
    tmp_path: Path,
) -> None:
    """Without git on PATH validate and selftest exit 3 with git-unavailable."""
    root = make_project(tmp_path / "p", eval_extra={"model": "acme/m"})
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = _env(tmp_path, path=str(empty))
    validate = console("validate", str(root), env=env)
    assert validate.returncode == 3
    assert "error [git-unavailable]: git was not found on PATH" in validate.stderr
    selftest = console("selftest", str(root), env=env)
    assert selftest.returncode == 3
    assert "git-unavailable" in selftest.stderr
    assert "fixture" not in selftest.stderr
    assert not (root / ".atlante" / "eval").exists()


def test_opencode_without_a_model_warns_for_v1_and_is_an_error_for_v2(tmp_path: Path) -> None:
    """eval-model-unset (warning) without --probe or on V1; eval-model-required on V2."""
    root = make_project(tmp_path / "p")
    plain = console("validate", str(root), env=_env(tmp_path))
    assert plain.returncode == 0
    assert "warning [eval-model-unset]" in plain.stderr
    for version, status, code in (
        ("1.18.33", 0, "warning [eval-model-unset]"),
        ("2.0.0", 2, "error [eval-model-required]"),
    ):
        bin_dir = tmp_path / f"bin-{version}"
        write_stub(bin_dir, "opencode", version=version)
        env = _env(tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        auth = Path(env["XDG_DATA_HOME"]) / "opencode" / "auth.json"
        auth.parent.mkdir(parents=True, exist_ok=True)
        auth.write_text('{"acme": {"type": "api", "key": "k"}}')
        probed = console("validate", str(root), "--probe", env=env)
        assert probed.returncode == status, (version, probed.stderr)
        assert code in probed.stderr
    with_model = make_project(tmp_path / "q", eval_extra={"model": "acme/m"})
    assert "eval-model" not in console("validate", str(with_model), env=_env(tmp_path)).stderr


def test_probe_says_exactly_what_it_checked_about_credentials(tmp_path: Path) -> None:
    """An API key's presence is reported as such, not as "signed in"."""
    root = make_project(tmp_path / "p", host="claude-code")
    bin_dir = tmp_path / "bin"
    write_stub(bin_dir, "claude", version="2.1.332")
    env = _env(
        tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", ANTHROPIC_API_KEY="sk-x"
    )
    result = console("validate", str(root), "--probe", env=env)
    assert result.returncode == 0, result.stderr
    assert (
        "ok: host claude-code 2.1.332 is installed; "
        "ANTHROPIC_API_KEY is set (not verified with the provider)"
    ) in result.stdout
    assert "signed in" not in result.stdout


def test_a_claude_that_is_not_executable_is_reported_as_such(tmp_path: Path) -> None:
    """A claude file without the execute bit is "not executable", not "not found on PATH"."""
    root = make_project(tmp_path / "p", host="claude-code")
    bin_dir = tmp_path / "bin"
    stub = write_stub(bin_dir, "claude", version="2.1.332")
    stub.chmod(0o644)
    env = _env(tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = console("validate", str(root), "--probe", env=env)
    assert result.returncode == 3
    assert f"cause: {stub} exists but is not executable" in result.stderr
    assert "not found on PATH" not in result.stderr


def test_ctrl_c_during_a_hung_probe_is_an_interruption(tmp_path: Path) -> None:
    """A hung `claude --version`: a waiting note, then Ctrl-C exits 130 as interrupted."""
    root = make_project(tmp_path / "p", host="claude-code")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hung = bin_dir / "claude"
    hung.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    hung.chmod(0o755)
    env = _env(tmp_path, path=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    stderr_path = tmp_path / "validate.stderr"
    with stderr_path.open("wb") as err:
        process = subprocess.Popen(
            [str(CONSOLE), "validate", str(root), "--probe"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    try:
        wait_for(lambda: "waiting for the claude-code probe" in stderr_path.read_text(), 120)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = stderr_path.read_text()
    assert "error [eval-run-interrupted]: interrupted while probing the claude-code host" in text
    assert "timed out" not in text


def test_a_name_at_the_limit_runs_its_trials(tmp_path: Path) -> None:
    """The longest allowed name fits every directory a trial creates."""
    name = "n" * 128
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario(name, prompt=WRITES, checks=OUT_CHECK)],
        eval_extra={"budget": {"trials": 1}},
    )
    status, out, err = standin_run(tmp_path, str(root), "--json", name="limit")
    assert status == 0, err
    assert json.loads(out)["scenarios"][name]["trials"][0]["verdict"] == "pass"


# --- confusing output --------------------------------------------------------------


def test_next_steps_say_what_atlante_is_and_name_the_manifest_tool_for_the_quickstart(
    tmp_path: Path,
) -> None:
    """Stale native outputs: the next step explains `atlante build`; in the clone it
    also names tools/native_manifest.py."""
    repo = Path(__file__).resolve().parents[1]
    copy = tmp_path / "clone"
    (copy / "tools").mkdir(parents=True)
    (copy / "atlante_eval").mkdir()
    (copy / "tools" / "native_manifest.py").write_text("")
    inside = make_project(copy / "examples" / "qs", eval_extra={"model": "acme/m"})
    outside = make_project(tmp_path / "mine", eval_extra={"model": "acme/m"})
    for root in (inside, outside):
        agent = next((root / ".opencode").rglob("*.md"))
        agent.write_text(agent.read_text() + "edited\n")
    about = "Atlante (https://atlante.sh), the harness builder"
    clone = console("validate", str(inside), env=_env(tmp_path))
    assert clone.returncode == 2
    assert f"next: run `atlante build` ({about}) and try again; " in clone.stderr
    assert f"python3 {copy / 'tools' / 'native_manifest.py'} {inside}" in clone.stderr
    own = console("validate", str(outside), env=_env(tmp_path))
    assert f"next: run `atlante build` ({about}) and try again\n" in own.stderr
    assert "native_manifest" not in own.stderr
    missing = console("validate", str(tmp_path / "nothing-here"), env=_env(tmp_path))
    assert f"`atlante init` ({about})" in missing.stderr
    assert repo.joinpath("tools", "native_manifest.py").is_file()


def test_native_manifest_tool_on_an_empty_directory_says_so_and_fails(tmp_path: Path) -> None:
    """tools/native_manifest.py used to print nothing and exit 0 on an empty directory."""
    tool = Path(__file__).resolve().parents[1] / "tools" / "native_manifest.py"
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run(
        [sys.executable, str(tool), str(empty)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert f"error: {empty} has no native outputs to record" in result.stderr
    assert ".opencode/agents/" in result.stderr
    assert list(empty.iterdir()) == []


def test_option_errors_speak_in_the_options_own_terms(tmp_path: Path) -> None:
    """No pydantic field names: `--retry-infra must be 0..10`, `--format must be one of`."""
    root = make_project(tmp_path / "p")
    retry = console("run", str(root), "--retry-infra", "11")
    assert retry.returncode == 2
    assert "error [invalid-option]: --retry-infra must be 0..10, got 11" in retry.stderr
    assert "retry_infra" not in retry.stderr
    fmt = console("validate", str(root), "--format", "yaml")
    assert fmt.returncode == 2
    assert "error [invalid-option]: --format must be one of: text, json (got 'yaml')" in (
        fmt.stderr
    )
    assert "Value error" not in fmt.stderr


def test_pass_env_takes_a_name_not_an_assignment_or_nothing(tmp_path: Path) -> None:
    """--pass-env FOO=bar and --pass-env '' are refused with the reason, before any trial."""
    root = make_project(tmp_path / "p")
    result = console("run", str(root), "--pass-env", "FOO=bar", "--pass-env", "")
    assert result.returncode == 2
    assert "--pass-env takes a variable name, not NAME=VALUE: got 'FOO=bar'" in result.stderr
    assert "--pass-env needs the name of an environment variable, got an empty value" in (
        result.stderr
    )
    assert not (root / ".atlante" / "eval").exists()


def test_help_is_in_plain_words_and_h_is_accepted() -> None:
    """Metavars without Python types or braces; -h works; exit status 3 where it applies."""
    merge = console("merge", "-h")
    assert merge.returncode == 0
    assert "Usage: atlante-eval merge [OPTIONS] REPORT...\n" in merge.stdout
    assert "<list[Path]>" not in merge.stdout
    assert "-o, --output FILE" in merge.stdout
    schema = console("schema", "--help")
    assert "Usage: atlante-eval schema [OPTIONS] KIND\n" in schema.stdout
    assert "<str>" not in schema.stdout
    assert "{kind}" not in schema.stdout
    compare = console("compare", "-h")
    assert "Usage: atlante-eval compare [OPTIONS] BASE [HEAD]\n" in compare.stdout
    assert "{BASE}" not in compare.stdout
    for command in ("junit", "merge", "compare"):
        text = " ".join(console(command, "--help").stdout.split())
        assert "3 when" in text, command
    assert console("run", "-h").returncode == 0


def test_a_bad_fixture_shared_by_four_scenarios_is_one_error_listing_every_problem(
    tmp_path: Path,
) -> None:
    """One diagnostic per fixture, naming the other users; node_modules reported too."""
    root = make_project(
        tmp_path / "p", scenarios=[scenario(f"s{i}") for i in range(4)], eval_extra={"model": "m/m"}
    )
    fixture = root / "eval" / "fixtures" / "app"
    (fixture / "link").symlink_to("README.md")
    (fixture / "node_modules").mkdir()
    result = console("validate", str(root), "--json")
    assert result.returncode == 2
    [problem] = json.loads(result.stdout)["diagnostics"]
    assert problem["code"] == "invalid-scenario-fixture"
    assert "fixture contains a symbolic link: eval/fixtures/app/link" in problem["message"]
    assert (
        "fixture contains a forbidden entry: eval/fixtures/app/node_modules" in (problem["message"])
    )
    assert "also used by s1, s2, s3" in problem["message"]


def test_selftest_prints_the_report_line_in_runs_style(tmp_path: Path) -> None:
    """`report <path relative to cwd>`, as run's summary has it."""
    root = _two_scenarios(tmp_path)
    result = console("selftest", "p", cwd=tmp_path)
    [line] = [x for x in result.stdout.splitlines() if x.startswith("report")]
    assert line.startswith("report p/.atlante/eval/")
    assert line.endswith("/report.json")
    status, out, _err = standin_run(tmp_path, str(root), name="run")
    assert status == 1
    assert any(x.startswith("report ") for x in out.splitlines())


# --- one convention for machine-readable output ----------------------------------


def test_every_document_command_takes_json(tmp_path: Path) -> None:
    """validate --json (with --format json as an alias), schema --json, list --json."""
    root = make_project(tmp_path / "p", eval_extra={"model": "acme/m"})
    assert json.loads(console("validate", str(root), "--json").stdout)["ok"] is True
    assert json.loads(console("validate", str(root), "--format", "json").stdout)["ok"] is True
    assert json.loads(console("schema", "report", "--json").stdout)["type"] == "object"
    assert isinstance(json.loads(console("list", str(root), "--json").stdout), list)


def test_merge_json_prints_the_report_also_when_out_publishes_it(tmp_path: Path) -> None:
    """merge --out DIR --json publishes and prints the merged report."""
    root = _two_scenarios(tmp_path)
    shards = []
    for index in (1, 2):
        out_dir = tmp_path / f"shard{index}"
        status, _o, _e = standin_run(
            tmp_path, str(root), "--shard", f"{index}/2", "--out", str(out_dir), name=f"s{index}"
        )
        assert status in (0, 1)
        [run_dir] = out_dir.iterdir()
        shards.append(str(run_dir))
    merged_dir = tmp_path / "merged"
    result = console("merge", *shards, "--out", str(merged_dir), "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    [published] = merged_dir.glob("*/report.json")
    assert json.loads(published.read_text()) == printed
    assert sorted(printed["scenarios"]) == ["fails", "passes"]
    assert "merged 2 shard reports into" in result.stderr


# --- Claude Code's runtime file ----------------------------------------------------


class ClaudeLikeHost(StandinHost):
    """The stand-in with Claude Code's diff-allowlist ignores and its generated settings."""

    ignored_changes = ClaudeCodeHost.ignored_changes

    def prepare(self, context: TrialContext) -> None:
        super().prepare(context)
        settings = context.sandbox / ".claude" / "settings.json"
        settings.write_text(json.dumps(claude_settings()), encoding="utf-8")


class IgnoresNothingHost(ClaudeLikeHost):
    """The same host without the runtime-file rule: shows the test can see the file."""

    ignored_changes = ()


def test_claude_settings_local_is_a_runtime_file_but_native_outputs_and_settings_stay_graded(
    tmp_path: Path,
) -> None:
    """.claude/settings.local.json is ignored; edits to agents and settings.json still fail."""
    allow = [{"type": "diff-allowlist", "allow": ["x.txt"]}]
    write_x = {"write": "x.txt", "content": "done\n"}
    root = make_project(
        tmp_path / "p",
        host="claude-code",
        scenarios=[
            scenario(
                "local-settings",
                prompt=actions(write_x, {"write": ".claude/settings.local.json", "content": "{}"}),
                checks=allow,
            ),
            scenario(
                "edits-agent",
                prompt=actions(write_x, {"write": ".claude/agents/reviewer.md", "content": "x"}),
                checks=allow,
            ),
            scenario(
                "edits-settings",
                prompt=actions(write_x, {"write": ".claude/settings.json", "content": "{}"}),
                checks=allow,
            ),
        ],
        eval_extra={"budget": {"trials": 1}},
    )

    def verdicts(host: StandinHost) -> dict[str, list[str]]:
        report = anyio.run(lambda: execute_run(root, RunOptions(), host=host)).report
        return {
            name: [
                str(t.checks[0].evidence.get("unexpected")) if t.checks else "" for t in r.trials
            ]
            for name, r in report.scenarios.items()
        }

    assert ClaudeCodeHost.ignored_changes == (".claude/settings.local.json",)
    graded = verdicts(ClaudeLikeHost())
    assert graded["local-settings"] == ["None"]  # pass: no unexpected paths
    assert graded["edits-agent"] == ["['.claude/agents/reviewer.md']"]
    assert graded["edits-settings"] == ["['.claude/settings.json']"]
    blind = verdicts(IgnoresNothingHost())
    assert blind["local-settings"] == ["['.claude/settings.local.json']"]


# --- the README and docs -----------------------------------------------------------


REPO = Path(__file__).resolve().parents[1]


def test_python_api_doc_names_every_exported_name_and_no_private_helper() -> None:
    """docs/python-api.md documents each name in atlante_eval.__all__."""
    import atlante_eval

    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    missing = [name for name in atlante_eval.__all__ if f"`{name}" not in text]
    assert missing == []
    assert "atlante_eval.trial.process" not in text


def test_readme_set_up_is_a_venv_then_exactly_install_and_test() -> None:
    """The set-up: the venv line, then the two commands .ci/run runs, and what pytest installs."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = [line.strip() for line in setup.splitlines() if line.startswith("    ")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate",
        "pip install -e '.[dev]'",
        "pytest",
    ]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -e '.[dev]'" in ci
    assert "\npytest || status_first=$?\n" in ci
    flat = " ".join(setup.split())
    assert "740 MB" in flat
    assert "npm" in flat
    assert "ATLANTE_EVAL_HOST_INSTALL=0" in flat
    hosts = (REPO / "tests" / "realhost" / "hosts.py").read_text(encoding="utf-8")
    assert 'INSTALL_ENV = "ATLANTE_EVAL_HOST_INSTALL"' in hosts
    for page in ("diagnostics.md", "sandbox.md"):
        assert f"(docs/{page})" in readme


def test_install_commands_in_the_docs_name_something_that_exists() -> None:
    """No `pip install atlante-eval` from an index that serves no release."""
    for page in ("nightly.md", "scaling.md"):
        text = (REPO / "docs" / page).read_text(encoding="utf-8")
        for line in text.splitlines():
            if "pip install" in line and "atlante" in line:
                assert "atlante-eval==" not in line, line
                assert not line.rstrip().endswith("pip install atlante-eval"), line


def test_tutorial_copies_the_quickstart_outside_the_clone_without_reports() -> None:
    """The tutorial's copy goes to ~/my-project and drops .atlante/eval."""
    text = (REPO / "docs" / "writing-scenarios.md").read_text(encoding="utf-8")
    assert "cp -r examples/quickstart ~/my-project" in text
    assert "rm -rf ~/my-project/.atlante/eval" in text
    assert "cp -r examples/quickstart my-project" not in text
