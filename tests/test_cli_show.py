"""``atlante-eval show`` through the installed console script: overview, scenario, trial, JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import cleaned_up, cli_env, start_cli
from factory import make_project, scenario
from standin import actions

GOLDEN = Path(__file__).with_name("golden")
SCRIPT = Path(sys.executable).with_name("atlante-eval")
ANSI_COMMAND = [
    sys.executable,
    "-c",
    "print('\\x1b[31mboom\\x1b[0m \\x1b]0;owned\\x07'); raise SystemExit(1)",
]
WRITE_X = actions({"write": "x.txt", "content": "done\n"}, {"usage": 120, "cost": 0.01})

#: A transcript by the transcript contract: every kind, a nested subagent call,
#: an unknown kind, a line that is not JSON, and escape sequences in agent text.
TRANSCRIPT: list[Any] = [
    {"kind": "header", "schema": 1, "host": "opencode", "scenario": "alpha", "trial": 0, "t": 0},
    {
        "kind": "session-start",
        "t": 5,
        "host": "opencode",
        "version": "1.18.33",
        "model": "acme/model-x",
        "tools": ["bash", "write", "task"],
        "agents": ["reviewer"],
        "skills": ["python-tests"],
    },
    {
        "kind": "text",
        "t": 1200,
        "text": "Writing x.txt \x1b[2J\x9b31m now\nthen checking",
        "agent": None,
    },
    {
        "kind": "tool-call",
        "t": 1500,
        "id": "c1",
        "name": "write",
        "toolKind": "write",
        "input": {"filePath": "x.txt", "content": "done\n" + "y" * 400},
        "output": "wrote 1 file",
        "error": None,
        "status": "ok",
        "durationMs": 12,
        "parent": None,
    },
    {"kind": "skill", "t": 1600, "name": "python-tests", "parent": None},
    {
        "kind": "tool-call",
        "t": 1700,
        "id": "c2",
        "name": "task",
        "toolKind": "subagent",
        "input": {"prompt": "review the change"},
        "output": "looks fine",
        "status": "ok",
        "durationMs": 900,
        "parent": None,
    },
    {"kind": "subagent", "t": 1701, "name": "reviewer", "callId": "c2", "parent": None},
    {
        "kind": "tool-call",
        "t": 1800,
        "id": "c3",
        "name": "bash",
        "toolKind": "shell",
        "input": {"command": "cat x.txt"},
        "output": None,
        "error": "permission denied",
        "status": "denied",
        "durationMs": 3,
        "parent": "c2",
    },
    {"kind": "text", "t": 1850, "text": "Reviewed.", "agent": "reviewer", "parent": "c2"},
    {"kind": "usage", "t": 2000, "tokens": 1234, "costUsd": 0.0012},
    {"kind": "error", "t": 2100, "message": "rate limited, retrying", "status": 429},
    {"kind": "hologram", "t": 2200, "beam": "\x1b]0;owned\x07"},
    {"kind": "usage", "t": 2300, "tokens": 2345, "costUsd": 0.002},
    {"kind": "result", "t": 2500, "status": "success", "text": "Done.", "turns": 3, "tokens": 2345},
    {"kind": "truncated", "t": 2600, "reason": "per-trial cap", "dropped": 4, "unit": "entries"},
]


def mask(text: str) -> str:
    """Mask run ids, timestamps, durations and machine paths."""
    text = text.replace(sys.executable, "<python>")
    text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-[0-9a-f]{4}", "<run-id>", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}T[\d:.]+Z", "<time>", text)
    text = re.sub(r"(?<![+\d.])\d+(\.\d)?(ms|s)\b", "<t>", text)
    return re.sub(r"\S*/\.atlante/eval/", "<base>/", text)


def show(*args: str, cwd: Path, tty: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the installed ``atlante-eval show ARGS``."""
    env = cli_env(cwd)
    return subprocess.run(
        [str(SCRIPT), "show", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run (fail, infra-error, pass, skipped) with a transcript for alpha:0."""
    tmp_path = tmp_path_factory.mktemp("show")
    root = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "alpha",
                prompt=WRITE_X,
                checks=[
                    {"type": "file-exists", "path": "x.txt"},
                    {"type": "file-contains", "path": "x.txt", "pattern": "nope"},
                    {"type": "command", "run": ANSI_COMMAND},
                ],
            ),
            scenario("beta", prompt=actions({"stderr": "invalid API key"}, {"exit": 3})),
            scenario("gamma", prompt=WRITE_X, checks=[{"type": "file-exists", "path": "x.txt"}]),
            scenario("zeta", prompt=WRITE_X),
        ],
        eval_extra={"budget": {"trials": 2, "maxSessions": 6}},
    )
    with cleaned_up(start_cli(["run", str(root), "--jobs", "2"], tmp_path)) as run:
        assert run.wait(timeout_s=120) == 1, run.stderr
    [directory] = [p for p in (root / ".atlante" / "eval").iterdir() if p.is_dir()]
    # The run recorded real transcripts; alpha:0 gets one with every kind of entry instead,
    # and beta:1 loses its own, as a run from before transcripts would have none.
    trial = directory / "trials" / "alpha" / "0"
    trial.mkdir(parents=True, exist_ok=True)
    (directory / "trials" / "beta" / "1" / "transcript.jsonl").unlink()
    lines = [json.dumps(entry) for entry in TRANSCRIPT] + ["this line is not JSON"]
    (trial / "transcript.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def golden(name: str, text: str) -> None:
    """Compare ``text`` with tests/golden/NAME (ATLANTE_UPDATE_GOLDEN=1 rewrites it)."""
    path = GOLDEN / name
    if os.environ.get("ATLANTE_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_overview_of_the_newest_run(run_dir: Path) -> None:
    """Without RUN, show picks the project's newest run: meta, rates, intervals, failing checks."""
    result = show(cwd=run_dir.parent.parent.parent)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    golden("show-run.txt", mask(result.stdout))


def test_scenario_lists_its_trials_with_causes(run_dir: Path) -> None:
    """show RUN SCENARIO: the summary and one line per trial with its escaped cause."""
    result = show(str(run_dir), "alpha", cwd=run_dir)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    golden("show-scenario.txt", mask(result.stdout))


def test_trial_shows_checks_diff_and_transcript_timeline(run_dir: Path) -> None:
    """show RUN SCENARIO:I: verdict, cause, evidence, diff and the transcript as a timeline."""
    result = show(str(run_dir / "report.json"), "alpha:0", cwd=run_dir)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "\x9b" not in result.stdout
    assert "\\x1b]0;owned\\x07" in result.stdout
    golden("show-trial.txt", mask(result.stdout))


def test_trial_without_a_transcript_says_so(run_dir: Path) -> None:
    """A trial with no transcript.jsonl still shows its verdict and cause."""
    result = show(str(run_dir), "beta:1", cwd=run_dir)
    assert result.returncode == 0, result.stderr
    assert "cause: standin run exited 3: invalid API key" in result.stdout
    assert "checks: none ran (the session did not complete)" in result.stdout
    assert "transcript: none recorded" in result.stdout


def test_json_prints_the_same_data(run_dir: Path) -> None:
    """--json prints the views as JSON, with the cause, checks and timeline entries."""
    project = run_dir.parent.parent.parent
    overview = json.loads(show("--json", "--project", str(project), cwd=run_dir).stdout)
    assert overview["runId"] == run_dir.name
    by_name = {s["name"]: s for s in overview["scenarios"]}
    assert by_name["zeta"]["note"] == "not run (2 skipped-budget)"
    assert by_name["beta"]["note"] == "no graded trials (2 infra-error)"
    assert by_name["gamma"]["passRateGraded"] == 1.0
    assert by_name["alpha"]["failingChecks"] == [
        {"index": 1, "type": "file-contains", "failed": 2, "errored": 0, "graded": 2},
        {"index": 2, "type": "command", "failed": 2, "errored": 0, "graded": 2},
    ]
    listing = json.loads(show(run_dir.name, "beta", "--json", cwd=project).stdout)
    assert [t["cause"] for t in listing["trials"]] == ["standin run exited 3: invalid API key"] * 2
    raw = show(run_dir.name, "alpha:0", "--json", "--project", str(project), cwd=run_dir).stdout
    assert "\x1b" not in raw
    assert "\x9b" not in raw
    trial = json.loads(raw)
    assert trial["verdict"] == "fail"
    assert trial["cause"].startswith('check 1 file-contains: x.txt does not contain "nope"')
    assert [c["verdict"] for c in trial["checks"]] == ["pass", "fail", "fail"]
    kinds = [e["kind"] for e in trial["timeline"]]
    assert kinds == [e["kind"] for e in TRANSCRIPT[:11]] + ["raw", "usage", "result"] + [
        "truncated",
        "raw",
    ]
    assert trial["timeline"][2]["data"]["text"].startswith("Writing x.txt \x1b[2J\x9b31m")
    assert trial["timeline"][11]["data"] == {"event": TRANSCRIPT[11]}


def test_default_skips_selftest_runs(run_dir: Path, tmp_path: Path) -> None:
    """A newer selftest run is not 'the newest run'; --out points at another report base."""
    base = tmp_path / "reports"
    shutil.copytree(run_dir, base / run_dir.name)
    report = json.loads((run_dir / "report.json").read_text())
    report["runId"] = "9999-01-01T00-00-00-abcd"
    report["meta"]["host"] = "selftest"
    (base / report["runId"]).mkdir()
    (base / report["runId"] / "report.json").write_text(json.dumps(report))
    result = show("--out", str(base), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runId"] == run_dir.name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["2020-01-01T00-00-00-0000"], "error [report-unreadable]: no run <run-id> under"),
        (["../x/../y"], "error [report-unreadable]: no run directory, report or run id"),
        (["<RUN>", "omega"], "error [invalid-option]: run <run-id> has no scenario 'omega'"),
        (["<RUN>", "alpha:7"], "error [invalid-option]: scenario 'alpha' has no trial 7"),
    ],
)
def test_unknown_runs_scenarios_and_trials_exit_2(
    run_dir: Path, args: list[str], message: str
) -> None:
    """A run, scenario or trial that does not exist is a diagnostic and exit 2."""
    project = run_dir.parent.parent.parent
    argv = [str(run_dir) if a == "<RUN>" else a for a in args]
    result = show(*argv, "--project", str(project), cwd=project)
    assert result.returncode == 2
    assert message in mask(result.stderr)
    assert "Traceback" not in result.stderr


def test_no_run_yet_exits_2(tmp_path: Path) -> None:
    """A project without runs says how to make one."""
    root = make_project(tmp_path / "empty")
    result = show(cwd=root)
    assert result.returncode == 2
    assert "error [report-unreadable]: no run report found under" in result.stderr
    assert "next: run `atlante-eval run` first" in result.stderr


def test_only_selftest_runs_names_the_one_to_show(tmp_path: Path) -> None:
    """With only selftest runs, show says it left them out and how to name one."""
    root = make_project(tmp_path / "selftested")
    selftest = root / ".atlante" / "eval" / "2026-01-01T00-00-00-abcd"
    selftest.mkdir(parents=True)
    (selftest / "selftest.json").write_text("{}")
    result = show(cwd=root)
    assert result.returncode == 2
    assert "only selftest runs (1), which show leaves out unless named" in result.stderr
    assert f"atlante-eval show {selftest}" in result.stderr
