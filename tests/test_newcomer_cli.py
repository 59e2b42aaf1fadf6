"""Issue 24 (part A): a newcomer's first hour, round three, each stumble through the command line.

Commands that need no host run the installed ``atlante-eval`` console script;
``run`` goes through ``tests/standin_cli.py`` (the same CLI with the stand-in host).
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

from clikit import cleaned_up, report_dirs, start_cli, wait_for
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from standin import actions
from test_cli_show import golden
from test_newcomer import console, standin_run

WRITES = actions({"write": "out.txt", "content": "x"})
OUT_CHECK = [{"type": "file-exists", "path": "out.txt"}]
EXTENDED = {"$schema": EXTENDED_SCENARIO_URI}


def _passing(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=[
            scenario("first", prompt=WRITES, checks=OUT_CHECK),
            scenario("second", prompt=WRITES, checks=OUT_CHECK),
        ],
        eval_extra={"budget": {"trials": 1}},
    )


def test_last_failed_after_an_all_pass_run_runs_and_publishes_nothing(tmp_path: Path) -> None:
    """--last-failed when nothing failed: says so, exit 0, no run directory, nothing recorded."""
    root = _passing(tmp_path)
    status, _out, err = standin_run(tmp_path, str(root), name="all-pass")
    assert status == 0, err
    [first] = report_dirs(root)
    status, out, err = standin_run(tmp_path, str(root), "--last-failed", name="again")
    assert status == 0, err
    assert out == ""
    assert err.splitlines()[:3] == [
        f"warning [last-failed]: --last-failed: nothing to rerun: every selected scenario "
        f"passed in run {first.name} ({first / 'report.json'}); nothing was run or published",
        f"at: {first / 'report.json'}",
        "next: run without --last-failed to run every scenario again",
    ]
    assert report_dirs(root) == [first]
    listed = console("history", "list", "--project", str(root), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [run["runId"] for run in json.loads(listed.stdout)] == [first.name]


def test_an_extension_check_error_does_not_hide_the_documents_other_errors(tmp_path: Path) -> None:
    """validate: a behaviour check in a v0.1 document, and every other error, in document order."""
    checks: list[dict[str, object]] = [{"type": "file-exists", "path": "a"} for _ in range(11)]
    checks[1] = {"type": "skill-used", "skill": "python-tests"}
    checks[2] = {"type": "file-exists"}  # no path
    checks[10] = {"type": "file-exists", "path": ""}  # empty path
    document = scenario("Bad_Name", checks=checks)
    root = make_project(tmp_path / "p", scenarios=[{**document, "name": "Bad_Name"}])
    result = console("validate", str(root))
    assert result.returncode == 2
    found = [
        (line.split("]")[0].removeprefix("error ["), line.split(" /")[-1])
        for line in result.stderr.splitlines()
        if line.startswith(("error [", "at: "))
    ]
    codes = [code for code, _ in found[0::2]]
    pointers = ["/" + where for _, where in found[1::2]]
    assert codes == [
        "invalid-eval-scenario",
        "scenario-extension-check",
        "invalid-eval-scenario",
        "invalid-eval-scenario",
    ], result.stderr
    assert pointers == ["/name", "/checks/1/type", "/checks/2/path", "/checks/10/path"], (
        result.stderr
    )
    as_json = console("validate", str(root), "--json")
    assert [d["pointer"] for d in json.loads(as_json.stdout)["diagnostics"]] == pointers


def test_list_json_prints_the_valid_scenarios_and_the_diagnostics(tmp_path: Path) -> None:
    """list --json with one invalid document: the valid ones and the diagnostic, exit 2."""
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("good-one"), scenario("good-two"), scenario("broken", checks=[])],
    )
    result = console("list", str(root), "--json")
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert [row["name"] for row in document["scenarios"]] == ["good-one", "good-two"]
    [problem] = document["diagnostics"]
    assert problem["code"] == "invalid-eval-scenario"
    assert problem["source"] == "eval/scenarios/broken.eval.json"
    assert problem["pointer"] == "/checks"
    text = console("list", str(root))
    assert text.returncode == 2
    assert text.stderr.startswith("error [invalid-eval-scenario]: ")
    assert [line.split()[0] for line in text.stdout.splitlines()] == [
        "NAME",
        "good-one",
        "good-two",
    ]
    valid = console("list", str(make_project(tmp_path / "q")), "--json")
    assert valid.returncode == 0
    assert [row["name"] for row in json.loads(valid.stdout)] == ["basic"]


def _skill_call(status: str, **state: object) -> dict[str, object]:
    """An OpenCode ``tool_use`` event: the ``skill`` tool loading python-tests, ended ``status``."""
    return {
        "event": {
            "type": "tool_use",
            "part": {
                "type": "tool",
                "tool": "skill",
                "callID": f"call-skill-{status}",
                "state": {"status": status, "input": {"name": "python-tests"}, **state},
            },
        }
    }


def test_opencode_skill_used_does_not_count_a_failed_skill_load(tmp_path: Path) -> None:
    """skill-used on OpenCode: an errored skill call (no ripgrep) fails the check and says why."""
    checks = [{"type": "skill-used", "skill": "python-tests"}]
    failed = _skill_call("error", error="ripgrep execution failed")
    loaded = _skill_call("completed", output="<skill_content>")
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario("skill-failed", prompt=actions(failed), checks=checks, **EXTENDED),
            scenario("skill-loaded", prompt=actions(loaded), checks=checks, **EXTENDED),
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    status, _out, err = standin_run(tmp_path, str(root), name="skills")
    assert status == 1, err
    [run_dir] = report_dirs(root)
    report = json.loads((run_dir / "report.json").read_text())
    verdicts = {
        name: [c["verdict"] for c in result["trials"][0]["checks"]]
        for name, result in report["scenarios"].items()
    }
    assert verdicts == {"skill-failed": ["fail"], "skill-loaded": ["pass"]}
    [check] = report["scenarios"]["skill-failed"]["trials"][0]["checks"]
    assert check["evidence"]["count"] == 0
    assert [f["error"] for f in check["evidence"]["failedLoads"]] == ["ripgrep execution failed"]
    shown = console("show", str(run_dir), "skill-failed:0")
    assert shown.returncode == 0, shown.stderr
    assert (
        "cause: check 0 skill-used: skill python-tests: 0 found, expected at least 1; "
        "failed load: ripgrep execution failed\n"
    ) in shown.stdout


def test_never_started_trials_of_an_interrupted_run_enter_no_pass_rate(tmp_path: Path) -> None:
    """SIGINT during trial 1 of 3: trial 2 never started, so it counts nowhere; partial is said."""
    started = tmp_path / "trial-1-started"
    hold = f'[ "$ATLANTE_STANDIN_TRIAL" = 0 ] || {{ touch {started}; sleep 120; }}'
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "partly",
                prompt=actions({"run": ["sh", "-c", hold]}, {"write": "out.txt", "content": "x"}),
                checks=OUT_CHECK,
            )
        ],
        eval_extra={"budget": {"trials": 3, "timeoutMs": 600_000}},
    )
    with cleaned_up(start_cli(["run", str(root), "--jobs", "1"], tmp_path)) as cli:
        wait_for(started.exists)
        cli.signal(signal.SIGINT)
        status = cli.wait(timeout_s=60)
    assert status == 3, cli.stderr
    [run_dir] = report_dirs(root)
    report = json.loads((run_dir / "report.json").read_text())
    result = report["scenarios"]["partly"]
    assert [(t["verdict"], t.get("notStarted")) for t in result["trials"]] == [
        ("pass", None),
        ("infra-error", None),
        ("infra-error", True),
    ]
    assert result["trials"][2]["error"] == "the run was interrupted before this trial started"
    assert result["passRate"] == 0.5  # pass / the two that ran; 1/3 before
    assert (result["stats"]["executed"], result["stats"]["graded"]) == (2, 1)
    assert result["stats"]["passRateGraded"] == 1.0
    summary = cli.stdout.splitlines()
    assert (
        "partial report: the run was interrupted; 1 trial never started and counts in no pass rate"
    ) in summary, cli.stdout
    at = next(i for i, line in enumerate(summary) if line.startswith("partly: pass 50% · "))
    assert summary[at + 1 : at + 3] == [
        "  infra-error 1/2: the run was interrupted before this trial finished",
        "  not started 1/3: the run was interrupted first",
    ]
    shown = console("show", str(run_dir))
    assert "interrupted (partial report)" in shown.stdout, shown.stdout
    page = tmp_path / "history.html"
    made = console("html", "--history", str(root / ".atlante" / "eval"), "-o", str(page))
    assert made.returncode == 0, made.stderr
    assert page.read_text().count('data-mark="partial"') == 2  # the run's row and its cell


def test_show_takes_a_project_and_a_bare_scenario_name(tmp_path: Path) -> None:
    """show . is the project's newest run; show SCENARIO[:I] that scenario there; else exit 2."""
    root = _passing(tmp_path)
    for name in ("older", "newer"):
        status, _out, err = standin_run(tmp_path, str(root), name=name)
        assert status == 0, err
    newest = report_dirs(root)[-1]
    by_dir = console("show", str(newest))
    assert by_dir.returncode == 0, by_dir.stderr
    for args, cwd in [(("show", "."), root), (("show", str(root)), tmp_path)]:
        shown = console(*args, cwd=cwd)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == by_dir.stdout
    trial = console("show", "second:0", cwd=root)
    assert trial.returncode == 0, trial.stderr
    assert trial.stdout == console("show", str(newest), "second:0").stdout
    assert trial.stdout.startswith(f"trial second:0 · run {newest.name}: pass")
    listing = console("show", "first", cwd=root)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout == console("show", str(newest), "first").stdout
    neither = console("show", "no-such-thing", cwd=root)
    assert neither.returncode == 2
    assert neither.stderr.startswith("error [report-unreadable]: no run no-such-thing under ")


def test_retry_infra_labels_each_attempt_and_show_lists_them(tmp_path: Path) -> None:
    """--retry-infra 2: the retry says `attempt 2/3` and why; show RUN S:I lists the attempts."""
    once = tmp_path / "failed-once"
    # The first session kills its own host (an infra-error); the retry writes out.txt.
    flaky = f'[ -e {once} ] || {{ touch {once}; kill -9 "$PPID"; }}'
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "flaky",
                prompt=actions({"run": ["sh", "-c", flaky]}, {"write": "out.txt", "content": "x"}),
                checks=OUT_CHECK,
            )
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    args = ("--retry-infra", "2", "--jobs", "1")
    status, _out, err = standin_run(tmp_path, str(root), *args, name="retry")
    assert status == 0, err
    progress = [line for line in err.splitlines() if line.startswith("trial 0")]
    assert progress == [
        "trial 0 running...",
        "trial 0 running... (attempt 2/3, after infra-error: standin run exited SIGKILL: "
        "no stderr output)",
        f"trial 0: pass ({progress[-1].split('(')[1]}",
    ], err
    [run_dir] = report_dirs(root)
    shown = console("show", str(run_dir), "flaky:0")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = lines.index("attempts 2 (--retry-infra retried infra-errors):")
    assert re.fullmatch(
        r"  attempt 1: infra-error \(\d+ms\): standin run exited SIGKILL: no stderr output",
        lines[at + 1],
    ), shown.stdout
    assert lines[at + 2] == "  attempt 2: pass (this result)"
    as_json = json.loads(console("show", str(run_dir), "flaky:0", "--json").stdout)
    assert [a["verdict"] for a in as_json["earlierAttempts"]] == ["infra-error"]


def test_schema_help_and_its_error_list_every_kind() -> None:
    """schema: the help, the error and its hint name every kind, transcript included."""
    from atlante_eval.choices import SCHEMA_KINDS

    shown = console("schema", "--help")
    assert shown.returncode == 0
    help_text = " ".join(shown.stdout.split())
    assert "file format (scenario, config, report or transcript)" in help_text
    assert f"One of: {', '.join(SCHEMA_KINDS)}." in help_text
    wrong = console("schema", "transcripts")
    assert wrong.returncode == 2
    assert wrong.stderr.rstrip("\n").splitlines() == [
        "error [invalid-option]: unknown schema 'transcripts'",
        "expected: scenario, config, report, transcript",
        "next: run `atlante-eval schema scenario` (or config, report, transcript)",
    ]
    assert console("schema", "transcript").returncode == 0


OPTION_ERRORS = [
    ("run", "--jbos", "2"),
    ("run", "--scenraio", "x"),
    ("run", "--jobs"),
    ("show", "--jsn"),
    ("lst",),
    ("history", "lst"),
    ("schema",),
    ("compare", "a", "b", "c"),
    ("run", "--retry-infra", "11"),
]


def test_option_errors_are_diagnostics_naming_the_closest_option(tmp_path: Path) -> None:
    """Unknown options and commands, missing values: one style, the closest real name, exit 2."""
    root = make_project(tmp_path / "p")
    shown = []
    for args in OPTION_ERRORS:
        result = console(*args, cwd=root)
        assert result.returncode == 2, (args, result.stderr)
        assert "Usage:" not in result.stderr
        shown.append(f"$ atlante-eval {' '.join(args)}\n{result.stderr}")
    golden("option-errors.txt", "".join(shown))
    assert console("-h").returncode == 0
    assert console().returncode == 2  # no command: the help, as before
    assert console("--version").stdout.startswith("atlante-eval ")
