"""selftest: null and reference agents through the real engine, findings and exit codes."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import CheckDoc, make_project, scenario, write_json, write_text
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, run_selftest
from atlante_eval.cli import app
from atlante_eval.diagnostics import CODES, Diagnostic, DiagnosticError
from atlante_eval.selftest.core import SELFTEST_HOST, SelftestOutcome

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart"
PY = sys.executable

WRITES_OUT: list[CheckDoc] = [
    {"type": "file-contains", "path": "out.txt", "pattern": "done"},
    {"type": "diff-allowlist", "allow": ["out.txt"]},
]


def _selftest(root: Path, tmp_path: Path, **options: Any) -> SelftestOutcome:
    """Run the library entry point with reports under ``tmp_path/reports``."""
    options.setdefault("out", tmp_path / "reports")
    return anyio.run(functools.partial(run_selftest, root, **options))


def _invoke(*args: str) -> Result:
    """Run the CLI and assert no traceback reached the user."""
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _solution(root: Path, name: str, files: dict[str, str], delete: Any = None) -> Path:
    """Write a reference solution beside the project's scenario documents."""
    directory = root / "eval" / "scenarios" / "solutions" / name
    for relative, text in files.items():
        write_text(directory / "files" / relative, text)
    if delete is not None:
        write_json(directory / "delete.json", delete)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _codes(outcome: SelftestOutcome) -> list[str]:
    """The codes of every finding, in order."""
    return [d.code for d in outcome.result.diagnostics]


def _only(outcome: SelftestOutcome, code: str) -> Diagnostic:
    """The single finding with ``code``."""
    found = [d for d in outcome.result.diagnostics if d.code == code]
    assert len(found) == 1, _codes(outcome)
    return found[0]


# --- the quickstart --------------------------------------------------------------


def test_quickstart_is_sound_through_the_cli(tmp_path: Path) -> None:
    """`atlante-eval selftest examples/quickstart` exits 0, prints the table and the report."""
    result = _invoke("selftest", str(QUICKSTART), "--out", str(tmp_path))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "selftest passed: 4 scenarios sound" in result.stdout
    for name in ("changelog-entry", "fix-median", "median-with-skill", "remove-legacy-module"):
        assert name in result.stdout
        assert f"{name} · null agent: fail" in result.stderr
        assert f"{name} · reference agent: pass" in result.stderr
    report_line = next(line for line in result.stdout.splitlines() if line.startswith("report "))
    report_path = Path(report_line.removeprefix("report "))
    assert report_path.resolve().parent.parent == tmp_path.resolve()  # relative to cwd, as run
    assert (report_path.parent / "selftest.json").is_file()


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> SelftestOutcome:
    """One library selftest of the quickstart, shared by the tests that only read it."""
    return _selftest(QUICKSTART, tmp_path_factory.mktemp("quickstart"))


def test_quickstart_is_sound_via_the_library(quickstart: SelftestOutcome) -> None:
    """run_selftest on the quickstart judges every scenario sound and writes no warning."""
    outcome = quickstart
    assert outcome.exit_code == 0
    assert outcome.result.diagnostics == []
    assert set(outcome.result.scenarios) == {
        "changelog-entry",
        "fix-median",
        "median-with-skill",
        "remove-legacy-module",
    }
    for judged in outcome.result.scenarios.values():
        assert judged.ok
        assert judged.null_agent is not None
        assert judged.null_agent.verdict == "fail"
        assert judged.reference_agent is not None
        assert judged.reference_agent.verdict == "pass"


def test_quickstart_validates() -> None:
    """`atlante-eval validate examples/quickstart` passes with both hosts' outputs verified."""
    result = _invoke("validate", str(QUICKSTART))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ok: 4 scenarios valid for claude-code")


def test_quickstart_manifests_are_up_to_date() -> None:
    """tools/native_manifest.py --check finds the committed manifests current."""
    tool = REPO / "tools" / "native_manifest.py"
    checked = subprocess.run(
        [PY, str(tool), "--check", str(QUICKSTART)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.count("ok: ") == 2


# --- the report ------------------------------------------------------------------


def test_report_is_written_like_a_run_with_host_selftest(quickstart: SelftestOutcome) -> None:
    """The report is a run report: host selftest, trial 0 null agent, trial 1 reference agent.

    Later trials are the counter-solutions and the generic mutants.
    """
    outcome = quickstart
    assert outcome.report_path.name == "report.json"
    assert outcome.report_path.parent.name == outcome.report.run_id
    report = RunReport.model_validate_json(outcome.report_path.read_bytes())
    assert report.meta.host == SELFTEST_HOST
    assert report.meta.model == "none"
    assert report.meta.manifest_digest is not None
    for result in report.scenarios.values():
        agents = [(t.i, (t.host_evidence or {}).get("agent")) for t in result.trials]
        assert agents[:2] == [(0, "null"), (1, "reference")]
        assert {agent for _, agent in agents[2:]} <= {"counter", "mutant"}
        assert all(t.tokens == 0 and t.budget_unmonitored is None for t in result.trials)
    written = json.loads(outcome.result_path.read_text(encoding="utf-8"))
    assert written["ok"] is True
    assert written["report"] == str(outcome.report_path)


def test_selftest_starts_the_gateway_unless_asked_not_to(
    quickstart: SelftestOutcome, tmp_path: Path
) -> None:
    """By default the trials get routes their stand-in agents never use; --gateway off: none."""
    report = quickstart.report
    assert report.meta.gateway is not None
    trials = report.all_trials()
    assert report.meta.gateway.fallback_trials == len(trials)
    assert all(t.usage is not None and t.usage.source == "host" for t in trials)
    off = _selftest(QUICKSTART, tmp_path, gateway="off")
    assert off.report.meta.gateway is None
    assert all(t.usage is None for t in off.report.all_trials())


def test_selftest_writes_synthetic_transcripts(quickstart: SelftestOutcome) -> None:
    """Each agent has a transcript: header and session start as host selftest, the
    reference agent's file changes as write tool calls, and a result."""
    from atlante_eval import load_transcript
    from atlante_eval.transcript import HeaderEntry, ResultEntry, SessionStartEntry, ToolCallEntry

    run_dir = quickstart.report_path.parent
    fix = quickstart.report.scenarios["fix-median"]
    for trial in fix.trials:
        assert trial.transcript == f"trials/fix-median/{trial.i}/transcript.jsonl"
        entries = load_transcript(run_dir / trial.transcript)
        header, start, result = entries[0], entries[1], entries[-1]
        assert isinstance(header, HeaderEntry)
        assert header.host == SELFTEST_HOST
        assert isinstance(start, SessionStartEntry)
        assert start.host == SELFTEST_HOST
        assert isinstance(result, ResultEntry)
        assert result.status == "success"
        calls = [e for e in entries if isinstance(e, ToolCallEntry)]
        if trial.i == 0:
            assert calls == []
        else:
            assert calls
            # The solution's files as writes, then the command check it runs, as an
            # agent that tests its work would (its bytecode is the only other change).
            assert {c.tool_kind for c in calls} == {"write", "shell"}
            writes = [c for c in calls if c.tool_kind == "write"]
            [shell] = [c for c in calls if c.tool_kind == "shell"]
            assert shell.input == {"command": "python3 -m unittest"}
            assert trial.activity is not None
            assert trial.activity.tool_calls.total == len(calls)
            assert trial.activity.files_written == [str(c.input["path"]) for c in writes]
            others = set(trial.changed_files or []) - set(trial.activity.files_written)
            assert all("__pycache__/" in path for path in others)


def test_json_option_prints_the_analysis(tmp_path: Path) -> None:
    """--json prints selftest.json's content on stdout and nothing else."""
    result = _invoke("selftest", str(QUICKSTART), "--out", str(tmp_path), "--json")
    assert result.exit_code == 0
    printed = json.loads(result.stdout)
    assert printed["exitCode"] == 0
    assert printed["scenarios"]["fix-median"]["referenceAgent"]["verdict"] == "pass"
    assert Path(printed["report"]).is_file()


def test_default_report_location_is_the_projects_eval_directory(tmp_path: Path) -> None:
    """Without --out the report goes under <project>/.atlante/eval, which git ignores."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"})
    outcome = anyio.run(run_selftest, root)
    assert outcome.report_path.parent.parent == root / ".atlante" / "eval"
    assert (root / ".atlante" / ".gitignore").read_text(encoding="utf-8") == "eval/\n"


# --- the null agent --------------------------------------------------------------


def test_vacuous_scenario_is_reported_with_its_checks(tmp_path: Path) -> None:
    """A scenario whose checks all hold on the untouched fixture is vacuous (exit 1)."""
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "does-nothing",
                checks=[
                    {"type": "file-exists", "path": "README.md"},
                    {"type": "diff-allowlist", "allow": ["out.txt"]},
                ],
            )
        ],
    )
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-vacuous")
    assert finding.severity == "error"
    assert '"does-nothing"' in finding.message
    assert "0 file-exists README.md" in finding.message
    assert "1 diff-allowlist of 1 path" in finding.message
    assert finding.source == "eval/scenarios/does-nothing.eval.json"
    assert finding.pointer == "/checks"
    assert finding.location is not None
    assert outcome.result.scenarios["does-nothing"].ok is False


def test_null_agent_sees_the_verified_native_outputs(tmp_path: Path) -> None:
    """The sandbox holds the build's native files; only the unmet check fails."""
    checks = [
        {"type": "file-exists", "path": ".claude/agents/reviewer.md"},
        {"type": "file-exists", "path": "out.txt"},
    ]
    root = make_project(
        tmp_path / "p", host="claude-code", scenarios=[scenario("s", checks=checks)]
    )
    outcome = _selftest(root, tmp_path)
    null = outcome.result.scenarios["s"].null_agent
    assert null is not None
    assert null.failed_checks == [1]


def test_missing_native_outputs_are_a_validation_error(tmp_path: Path) -> None:
    """Selftest verifies native outputs like a run: none built means exit 2."""
    root = make_project(tmp_path / "p", native=False)
    result = _invoke("selftest", str(root), "--out", str(tmp_path / "reports"))
    assert result.exit_code == 2
    assert "native-outputs-not-verified" in result.stderr
    assert not (tmp_path / "reports").exists()


def test_scenario_without_solution_runs_the_null_agent_only(tmp_path: Path) -> None:
    """No solution is a warning, not an error: the suite is sound if the null agent fails."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0
    finding = _only(outcome, "selftest-no-solution")
    assert finding.severity == "warning"
    assert "no reference solution" in finding.message
    assert [t.i for t in outcome.report.scenarios["s"].trials] == [0]
    assert outcome.result.scenarios["s"].reference_agent is None


# --- the reference agent ---------------------------------------------------------


def test_failing_reference_solution_is_reported(tmp_path: Path) -> None:
    """A solution that leaves a check failing is selftest-solution-failed (exit 1)."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "not yet\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-solution-failed")
    assert "fails check 0 (file-contains out.txt)" in finding.message
    assert finding.cause == "out.txt does not contain 'done'"
    assert finding.pointer == "/checks/0"


def test_failing_command_check_quotes_its_output(tmp_path: Path) -> None:
    """A command check the solution fails names the exit status and the output tail."""
    check = {"type": "command", "run": [PY, "-c", "print('boom'); raise SystemExit(4)"]}
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=[check])])
    _solution(root, "s", {"out.txt": "x\n"})
    finding = _only(_selftest(root, tmp_path), "selftest-solution-failed")
    assert finding.cause is not None
    assert finding.cause.startswith("exit 4, expected 0; output: boom")


def test_solution_violating_its_own_allowlist_is_reported(tmp_path: Path) -> None:
    """A solution that changes a path outside the diff-allowlist names that path."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n", "notes/extra.md": "oops\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-solution-failed")
    assert "outside the diff-allowlist of check 1: notes/extra.md" in finding.message
    assert finding.pointer == "/checks/1"


def test_solution_deletes_listed_paths_before_the_overlay(tmp_path: Path) -> None:
    """delete.json removes files and directories; the overlay then writes new files."""
    checks = [
        {"type": "file-absent", "path": "README.md"},
        {"type": "file-absent", "path": "docs/a.md"},
        {"type": "file-contains", "path": "docs/new.md", "pattern": "new"},
    ]
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("s", checks=checks)],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "docs/a.md": "a\n"}},
    )
    _solution(root, "s", {"docs/new.md": "new\n"}, delete=["README.md", "docs"])
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, _codes(outcome)
    reference = outcome.report.scenarios["s"].trials[1]
    assert reference.host_evidence == {
        "agent": "reference",
        "solution": "eval/scenarios/solutions/s",
        "deleted": 2,
        "written": 1,
    }


def _symlinked_files_dir(directory: Path) -> None:
    (directory / "files").mkdir()
    (directory / "files" / "x").symlink_to("/etc/hostname")


@pytest.mark.parametrize(
    ("plant", "needle"),
    [
        (lambda d: write_text(d / "notes.txt", "x"), "unexpected entries notes.txt"),
        (lambda d: d.joinpath("files").mkdir(), "the solution is empty"),
        (lambda d: write_json(d / "delete.json", ["../outside"]), "'..' segments"),
        (lambda d: write_json(d / "delete.json", {"path": "x"}), "must be a JSON array"),
        (lambda d: write_text(d / "delete.json", "[1,"), "malformed JSON"),
        (lambda d: write_text(d / "files" / ".git" / "config", "x"), "forbidden entry"),
        (lambda d: (d / "files-link").symlink_to("/etc/hostname"), "unexpected entries"),
        (_symlinked_files_dir, "files/x is a symbolic link"),
    ],
)
def test_malformed_solution_is_invalid_and_not_applied(
    tmp_path: Path, plant: Any, needle: str
) -> None:
    """A malformed or unsafe solution directory is selftest-solution-invalid; only trial 0 runs."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    directory = root / "eval" / "scenarios" / "solutions" / "s"
    directory.mkdir(parents=True)
    plant(directory)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-solution-invalid")
    assert needle in finding.message
    assert finding.source == "eval/scenarios/solutions/s"
    assert [t.i for t in outcome.report.scenarios["s"].trials] == [0]


def test_solution_never_writes_through_a_symlink_planted_by_setup(tmp_path: Path) -> None:
    """A target crossing a symlink made by setup is refused; nothing is written outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    setup = [PY, "-c", f"import os; os.symlink({str(outside)!r}, 'out')"]
    checks = [{"type": "file-exists", "path": "result.txt"}]
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=checks, setup=setup)])
    _solution(root, "s", {"out/owned.txt": "gotcha\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-solution-invalid")
    assert finding.cause == "path traverses a symbolic link at out"
    assert list(outside.iterdir()) == []


def test_solution_deleting_a_missing_path_is_invalid(tmp_path: Path) -> None:
    """delete.json naming a path the sandbox lacks cannot be applied."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"}, delete=["nope.txt"])
    finding = _only(_selftest(root, tmp_path), "selftest-solution-invalid")
    assert finding.cause == "delete.json lists nope.txt, which does not exist in the sandbox"


def test_solutions_option_overrides_the_location(tmp_path: Path) -> None:
    """--solutions DIR/<name> replaces solutions/ beside the scenario documents."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "wrong\n"})
    elsewhere = tmp_path / "elsewhere"
    write_text(elsewhere / "s" / "files" / "out.txt", "done\n")
    outcome = _selftest(root, tmp_path, solutions=elsewhere)
    assert outcome.exit_code == 0
    assert outcome.result.scenarios["s"].solution == str(elsewhere / "s")


def test_unknown_solution_directory_is_a_warning(tmp_path: Path) -> None:
    """A solution directory named after no scenario is flagged as a likely typo."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"})
    _solution(root, "s-typo", {"out.txt": "done\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0
    finding = _only(outcome, "selftest-solution-invalid")
    assert finding.severity == "warning"
    assert '"s-typo" names no discovered scenario' in finding.message


# --- setup failures and check errors ---------------------------------------------


def test_setup_failure_is_reported_once_for_both_agents(tmp_path: Path) -> None:
    """A failing setup command is selftest-setup-failed, pointing at task.setup."""
    setup = [PY, "-c", "import sys; sys.exit(3)"]
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT, setup=setup)])
    _solution(root, "s", {"out.txt": "done\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-setup-failed")
    assert "for the null and reference agents" in finding.message
    assert finding.cause == "setup failed: exit 3"
    assert finding.pointer == "/task/setup"
    assert "selftest-vacuous" not in _codes(outcome)


@pytest.mark.parametrize(
    ("check", "setup", "cause"),
    [
        ({"type": "command", "run": ["atlante-no-such-tool"]}, None, "atlante-no-such-tool"),
        (
            {"type": "file-exists", "path": "link/hostname"},
            [PY, "-c", "import os; os.symlink('/etc', 'link')"],
            "path traverses a symbolic link at link",
        ),
    ],
)
def test_check_that_reaches_no_verdict_is_reported(
    tmp_path: Path, check: dict[str, Any], setup: list[str] | None, cause: str
) -> None:
    """A check that errors at run time (missing tool, symlinked path) is selftest-check-error."""
    extra: dict[str, Any] = {"setup": setup} if setup else {}
    checks: list[CheckDoc] = [check, {"type": "file-exists", "path": "out.txt"}]
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=checks, **extra)])
    _solution(root, "s", {"out.txt": "done\n"})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    finding = _only(outcome, "selftest-check-error")
    assert finding.pointer == "/checks/0"
    assert "with the null and reference agents" in finding.message
    assert finding.cause is not None
    assert cause in finding.cause


# --- the command line ------------------------------------------------------------


def test_exit_codes_zero_one_two(tmp_path: Path) -> None:
    """The CLI exits 0 for a sound suite, 1 for a vacuous one, 2 for an invalid project."""
    sound = make_project(tmp_path / "sound", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(sound, "s", {"out.txt": "done\n"})
    vacuous = make_project(tmp_path / "vacuous")
    broken = make_project(tmp_path / "broken")
    write_text(broken / "eval" / "scenarios" / "basic.eval.json", "{")
    out = str(tmp_path / "reports")
    assert _invoke("selftest", str(sound), "--out", out).exit_code == 0
    failed = _invoke("selftest", str(vacuous), "--out", out)
    assert failed.exit_code == 1
    assert "error [selftest-vacuous]" in failed.stderr
    assert "selftest failed: 1 of 1 scenario cannot be trusted" in failed.stdout
    assert "vacuous" in failed.stdout.splitlines()[1]
    invalid = _invoke("selftest", str(broken), "--out", out)
    assert invalid.exit_code == 2
    assert "[invalid-json]" in invalid.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "--jobs must be a positive integer"),
        (["--solutions", "does-not-exist"], "--solutions must be an existing directory"),
        (["--scenario", "nope"], "unknown-scenario-filter"),
    ],
)
def test_bad_options_exit_two(tmp_path: Path, args: list[str], message: str) -> None:
    """Invalid options are validation errors (exit 2) and run nothing."""
    root = make_project(tmp_path / "p")
    result = _invoke("selftest", str(root), "--out", str(tmp_path / "reports"), *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "reports").exists()


def test_scenario_option_selects_scenarios(tmp_path: Path) -> None:
    """--scenario runs only the named scenarios (repeatable)."""
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario(n, checks=WRITES_OUT) for n in ("a", "b", "c")],
    )
    result = _invoke(
        "selftest", str(root), "--out", str(tmp_path / "r"), "--scenario", "a", "--scenario", "c"
    )
    assert result.exit_code == 0
    table = result.stdout.split("\n\n")[0].splitlines()[1:]
    assert [row.split()[0] for row in table] == ["a", "c"]
    assert "selftest passed: 2 scenarios sound; 2 without a reference solution" in result.stdout


def test_keep_leaves_the_sandboxes(tmp_path: Path) -> None:
    """--keep keeps each trial's sandbox and records where it is."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"})
    outcome = _selftest(root, tmp_path, keep=True)
    try:
        trials = outcome.report.scenarios["s"].trials
        kept = [Path(t.sandbox) for t in trials if t.sandbox]
        assert len(kept) == 3  # null, reference, and the stray-file mutant of the allowlist
        assert (kept[1] / "project" / "out.txt").read_text(encoding="utf-8") == "done\n"
        assert (kept[2] / "project" / "atlante-selftest-stray.txt").is_file()
    finally:
        assert outcome.report.meta.run_root is not None
        shutil.rmtree(outcome.report.meta.run_root)


def test_keep_option_prints_where_the_sandboxes_are(tmp_path: Path) -> None:
    """--keep on the command line prints the kept run directory, which holds every trial."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"})
    result = _invoke("selftest", str(root), "--out", str(tmp_path / "r"), "--keep")
    assert result.exit_code == 0
    line = next(x for x in result.stdout.splitlines() if x.startswith("sandboxes kept in "))
    kept = Path(line.removeprefix("sandboxes kept in "))
    try:
        trials = sorted(p.name.rsplit("-", 1)[0] for p in kept.iterdir() if p.name[0] != ".")
        assert trials == ["s-trial-0", "s-trial-1", "s-trial-2"]
    finally:
        shutil.rmtree(kept)


def test_selftest_codes_are_documented() -> None:
    """Every code selftest can emit is in the table of diagnostic codes."""
    emitted = {
        "selftest-vacuous",
        "selftest-solution-failed",
        "selftest-solution-invalid",
        "selftest-setup-failed",
        "selftest-check-error",
        "selftest-no-solution",
    }
    assert emitted <= set(CODES)


def test_validation_errors_raise_from_the_library(tmp_path: Path) -> None:
    """run_selftest raises DiagnosticError (exit 2) before any trial for an invalid project."""
    root = make_project(tmp_path / "p", native=False)
    with pytest.raises(DiagnosticError) as caught:
        _selftest(root, tmp_path)
    assert caught.value.exit_code == 2


def test_selftest_refuses_a_symlinked_default_report_location(tmp_path: Path) -> None:
    """Like run, selftest refuses to publish through a symlinked .atlante/eval (exit 3)."""
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=WRITES_OUT)])
    _solution(root, "s", {"out.txt": "done\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".atlante" / "eval").symlink_to(elsewhere)
    result = _invoke("selftest", str(root))
    assert result.exit_code == 3
    assert "eval-report-failed" in result.stderr
    assert list(elsewhere.iterdir()) == []
