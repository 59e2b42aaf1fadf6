"""The ``run`` command end to end: report, output, progress, exit codes (stand-in host)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from enginekit import MASKS
from factory import make_multi_project, make_project, scenario, tree_listing, write_json
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, hosts
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError, error
from atlante_eval.trial import process as process_module

GOLDEN = Path(__file__).with_name("golden") / "report.json"
WRITE_X = actions(
    {"model": "acme/model-x"}, {"write": "x.txt", "content": "done\n"}, {"usage": 120, "cost": 0.01}
)
RUN_ID = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-[0-9a-f]{4}")


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put run roots (and kept sandboxes) under the test's own temporary directory."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture(autouse=True)
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make both configured hosts the stand-in, and end stubborn groups quickly."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    monkeypatch.setitem(hosts.HOST_FACTORIES, "claude-code", StandinHost)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.delenv("NO_COLOR", raising=False)


def invoke(*args: str) -> Result:
    """Run ``atlante-eval run ARGS``; never a traceback."""
    result = CliRunner().invoke(app, ["run", *args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def project(tmp_path: Path, *docs: dict[str, Any], **budget: Any) -> Path:
    budget.setdefault("trials", 1)
    return make_project(
        tmp_path / "project",
        scenarios=list(docs) or [scenario("cli-happy", prompt=WRITE_X)],
        eval_extra={"budget": budget},
    )


def report_dirs(root: Path) -> list[Path]:
    base = root / ".atlante" / "eval"
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def mask(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


# -- exit codes and report location --------------------------------------------------------


def test_happy_run_writes_the_default_report_and_gitignore(tmp_path: Path) -> None:
    """Exit 0; the report lands under .atlante/eval/<id>/ and eval/ is git-ignored."""
    root = project(tmp_path)
    result = invoke(str(root))
    assert result.exit_code == 0
    [run_dir] = report_dirs(root)
    assert RUN_ID.fullmatch(run_dir.name)
    report = json.loads((run_dir / "report.json").read_text())
    assert report["runId"] == run_dir.name
    assert report["scenarios"]["cli-happy"]["passRate"] == 1.0
    assert (root / ".atlante" / ".gitignore").read_text() == "eval/\n"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("node_modules/", "node_modules/\neval/\n"),
        ("node_modules/\n", "node_modules/\neval/\n"),
        ("  eval/  \n", "  eval/  \n"),
        ("", "eval/\n"),
    ],
)
def test_gitignore_line_is_added_once(tmp_path: Path, before: str, after: str) -> None:
    """eval/ is appended (after a missing newline) unless a trimmed line already says so."""
    root = project(tmp_path)
    (root / ".atlante" / ".gitignore").write_text(before)
    assert invoke(str(root)).exit_code == 0
    assert (root / ".atlante" / ".gitignore").read_text() == after


def test_failing_check_exits_1(tmp_path: Path) -> None:
    """A failed trial makes the run exit 1 (the report is still written)."""
    root = project(tmp_path, scenario("bad", checks=[{"type": "file-exists", "path": "nope"}]))
    result = invoke(str(root))
    assert result.exit_code == 1
    assert len(report_dirs(root)) == 1


def test_skipped_trials_exit_1_and_print_reference_progress(tmp_path: Path) -> None:
    """maxSessions 1 with 2 trials: pass then skipped-budget, exit 1, reference progress lines.

    ``--gateway off``: the reference's own behaviour (the stand-in host calls no model).
    """
    root = project(tmp_path, scenario("cli-happy", prompt=WRITE_X), trials=2, maxSessions=1)
    result = invoke(str(root), "--jobs", "1", "--gateway", "off")
    assert result.exit_code == 1
    lines = re.sub(r"\(\d+ms", "(Nms", result.stderr).splitlines()
    assert lines == [
        "warning [eval-sessions-exceed-budget]: 1 of 2 trial(s) will be skipped-budget: "
        "the plan needs 2 host sessions and eval.budget.maxSessions allows 1",
        "next: raise eval.budget.maxSessions to 2, or run fewer trials (--trials, --scenario)",
        "== cli-happy",
        "trial 0 running...",
        "trial 0: pass (Nms · $0.0100 · 120 tokens)",
        "trial 1: skipped-budget (Nms) — maxSessions 1 reached: the trial did not start",
        "cli-happy: 1/1 trials passed",
    ]
    assert "trial 1: skipped-budget (0ms)" in result.stderr
    assert "\x1b[" not in result.stderr


def test_parallel_progress_lines_are_prefixed_with_the_scenario(tmp_path: Path) -> None:
    """With --jobs > 1 each trial line names its scenario and no '== name' header appears."""
    root = project(
        tmp_path,
        scenario("alpha", prompt=WRITE_X),
        scenario("beta", checks=[{"type": "file-exists", "path": "nope"}]),
        trials=2,
        maxSessions=3,
    )
    result = invoke(str(root), "--jobs", "3")
    lines = result.stderr.splitlines()
    assert not any(line.startswith("==") for line in lines)
    for name in ("alpha", "beta"):
        for trial in (0, 1):
            assert any(line.startswith(f"{name} trial {trial}") for line in lines)
    assert "alpha: 2/2 trials passed" in lines
    assert "beta: 0/1 trials passed" in lines
    assert any(
        re.fullmatch(r"beta trial 1: skipped-budget \(0ms\) — maxSessions 3 reached.*", line)
        for line in lines
    )


def test_all_skipped_scenario_says_no_trials_executed(tmp_path: Path) -> None:
    """A scenario whose trials were all skipped prints 'no trials executed', and 'not run'."""
    root = project(tmp_path, scenario("a"), scenario("b"), trials=1, maxSessions=1)
    result = invoke(str(root), "--jobs", "1")
    assert "b: no trials executed" in result.stderr.splitlines()
    assert "b: not run (1 skipped-budget)" in result.stdout.splitlines()
    assert "b: pass 0%" not in result.stdout


def test_summary_lists_scenarios_host_model_and_report_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary shows the run id, host and model, one line per scenario and the report path."""
    root = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = invoke(str(root))
    assert result.exit_code == 0
    [run_dir] = report_dirs(root)
    lines = re.sub(r"\d+ms", "Nms", result.stdout).splitlines()
    assert lines == [
        f"eval {run_dir.name}",
        "host standin 1.0.0 · model acme/model-x · isolation none · "
        "gateway on (0 model calls, 1 trial on the host's figures)",
        "",
        "cli-happy: pass 100% · mean Nms · p95 Nms",
        "",
        "trials 1 · pass 1",
        "tokens 120 · cost $0.0100",
        "",
        f"report project/.atlante/eval/{run_dir.name}/report.json",
        f"html project/.atlante/eval/{run_dir.name}/report.html",
    ]
    assert "trial 0" not in result.stdout


def test_budget_warning_in_summary_and_on_stderr_with_json(tmp_path: Path) -> None:
    """No usage events: a warning in the summary, or on stderr in --json mode."""
    root = project(tmp_path, scenario("quiet", prompt=actions({"write": "x.txt"})))
    warning = "token budget unmonitored for 1 trial (no usage events were observed): quiet:0"
    summary = invoke(str(root))
    assert f"warning: {warning}" in summary.stdout.splitlines()
    as_json = invoke(str(root), "--json")
    assert f"warning: {warning}" in as_json.stderr
    assert warning not in as_json.stdout


def test_json_prints_exactly_the_report_and_out_is_relative_to_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--json --out: stdout is the report file's JSON; out resolves from the cwd only."""
    root = project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    before = tree_listing(root)
    result = invoke(str(root), "--json", "--out", "reports", "--no-history")
    assert result.exit_code == 0
    [run_dir] = [p for p in (elsewhere / "reports").iterdir() if p.is_dir()]
    assert result.stdout == (run_dir / "report.json").read_text()
    parsed = json.loads(result.stdout)
    assert parsed["runId"] == run_dir.name
    assert tree_listing(root) == before
    assert not (root / ".atlante" / "eval").exists()
    assert not (root / ".atlante" / ".gitignore").exists()


def test_keep_prints_and_records_sandbox_paths(tmp_path: Path) -> None:
    """--keep records every sandbox path in the report, prints the run root, keeps both."""
    root = project(tmp_path, scenario("kept", prompt=WRITE_X), trials=2)
    result = invoke(str(root), "--keep", "--json")
    report = json.loads(result.stdout)
    run_root = Path(report["meta"]["runRoot"])
    try:
        sandboxes = [Path(t["sandbox"]) for t in report["scenarios"]["kept"]["trials"]]
        assert [p.parent for p in sandboxes] == [run_root, run_root]
        assert all((p / "project" / "x.txt").is_file() for p in sandboxes)
        summary = invoke(str(root), "--keep")
        kept_line = next(line for line in summary.stdout.splitlines() if "sandboxes kept" in line)
        second_root = Path(kept_line.removeprefix("sandboxes kept in "))
        assert second_root.is_dir()
        from atlante_eval.trial import remove_tree

        remove_tree(second_root)
    finally:
        from atlante_eval.trial import remove_tree

        remove_tree(run_root)


def test_symlinked_report_directory_exits_3_and_writes_nothing_outside(tmp_path: Path) -> None:
    """A symlinked .atlante/eval is refused (exit 3) and nothing lands in its target."""
    root = project(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    (root / ".atlante" / "eval").symlink_to(target)
    result = invoke(str(root))
    assert result.exit_code == 3
    assert "eval-report-failed" in result.stderr
    assert list(target.iterdir()) == []
    assert not (root / ".atlante" / ".gitignore").exists()


def test_out_pointing_at_a_file_exits_3(tmp_path: Path) -> None:
    """--out naming an existing file is a report failure (exit 3) before any trial."""
    root = project(tmp_path)
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    result = invoke(str(root), "--out", str(blocker))
    assert result.exit_code == 3
    assert "eval-report-failed" in result.stderr
    assert blocker.read_text() == "x"
    assert "trial 0" not in result.stderr


@pytest.mark.parametrize("raw", ["0", "51", "0x3", "1e1", " 3 ", "-1", "two"])
def test_invalid_trials_exit_2(tmp_path: Path, raw: str) -> None:
    """--trials must be a plain integer from 1 to 50 (invalid-trials, exit 2)."""
    root = project(tmp_path)
    result = invoke(str(root), "--trials", raw)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"error [invalid-trials]: --trials must be an integer from 1 to 50, got {raw}"
    )
    assert not (root / ".atlante" / "eval").exists()


def test_trials_override_is_recorded(tmp_path: Path) -> None:
    """--trials 2 runs two trials per scenario and is recorded in meta.config."""
    root = project(tmp_path)
    report = json.loads(invoke(str(root), "--trials", "2", "--json").stdout)
    assert report["meta"]["config"]["trials"] == 2
    assert len(report["scenarios"]["cli-happy"]["trials"]) == 2


def test_invalid_jobs_exit_2(tmp_path: Path) -> None:
    """--jobs must be a positive integer."""
    root = project(tmp_path)
    result = invoke(str(root), "--jobs", "0")
    assert result.exit_code == 2
    assert "invalid-option" in result.stderr


def test_unknown_scenario_exits_2(tmp_path: Path) -> None:
    """--scenario naming nothing discovered is unknown-scenario-filter (exit 2)."""
    root = project(tmp_path)
    result = invoke(str(root), "--scenario", "nope")
    assert result.exit_code == 2
    assert "unknown-scenario-filter" in result.stderr
    assert "cli-happy" in result.stderr


def test_missing_eval_section_exits_2(tmp_path: Path) -> None:
    """A configuration without an eval section is eval-not-configured (exit 2)."""
    root = project(tmp_path)
    config = json.loads((root / "atlante.jsonc").read_text())
    del config["eval"]
    write_json(root / "atlante.jsonc", config)
    result = invoke(str(root))
    assert result.exit_code == 2
    assert "eval-not-configured" in result.stderr


def test_unavailable_host_exits_3_without_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host whose probe fails is a run-level error (exit 3); nothing is written."""

    class Missing(StandinHost):
        async def probe(self) -> None:
            raise DiagnosticError([error("eval-host-unavailable", "could not run opencode")])

    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", Missing)
    root = project(tmp_path)
    result = invoke(str(root))
    assert result.exit_code == 3
    assert "eval-host-unavailable" in result.stderr
    assert not (root / ".atlante" / "eval").exists()


def test_pack_scenario_not_included_warns_and_is_not_run(tmp_path: Path) -> None:
    """A selected pack scenario without eval.include is warned about and not run."""
    root = make_multi_project(tmp_path / "multi")
    result = invoke(str(root), "--scenario", "local-a", "--scenario", "unincluded-one", "--json")
    assert result.exit_code == 0
    assert "warning [pack-scenario-not-included]" in result.stderr
    assert '"unincluded-one"' in result.stderr
    report = json.loads(result.stdout)
    assert list(report["scenarios"]) == ["local-a"]


def test_only_unincluded_pack_scenarios_gives_an_empty_report(tmp_path: Path) -> None:
    """When every selected scenario is a non-included pack scenario, the report is empty."""
    root = make_multi_project(tmp_path / "multi")
    result = invoke(str(root), "--scenario", "unincluded-one", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["scenarios"] == {}


# -- the report's exact shape --------------------------------------------------------------


def golden_project(tmp_path: Path) -> Path:
    """Scenarios covering every verdict, with descriptions, usage, evidence and a diff."""
    return make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "a-pass",
                prompt=WRITE_X,
                description="Writes x.txt.",
                checks=[
                    {"type": "file-contains", "path": "x.txt", "pattern": "done"},
                    {"type": "diff-allowlist", "allow": ["x.txt"]},
                    {"type": "file-unchanged", "path": "README.md"},
                ],
            ),
            scenario(
                "b-fail",
                prompt=actions({"write": "README.md", "content": "changed\n"}, {"usage": 7}),
                checks=[
                    {"type": "file-exists", "path": "missing.txt"},
                    {"type": "diff-allowlist", "allow": ["x.txt"]},
                    {"type": "file-unchanged", "path": "README.md"},
                    {
                        "type": "command",
                        "run": ["python3", "-c", "print('3 passed')"],
                        "outputMatches": r"\d+ failed",
                    },
                ],
            ),
            scenario("c-timeout", prompt=actions({"sleep": 20}), budget={"timeoutMs": 300}),
            scenario("d-budget", prompt=actions({"usage": 5000, "cost": 0.5}, {"sleep": 20})),
            scenario("e-infra", prompt=actions({"stderr": "boom"}, {"exit": 3})),
        ],
        eval_extra={"budget": {"trials": 2, "maxSessions": 9, "maxTokens": 1000}},
    )


def test_report_matches_the_golden_file(tmp_path: Path) -> None:
    """The report's keys, order and values match tests/golden/report.json (volatile masked)."""
    root = golden_project(tmp_path)
    result = invoke(str(root), "--json", "--jobs", "4")
    assert result.exit_code == 1
    actual = mask(result.stdout)
    if os.environ.get("ATLANTE_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(actual)
    assert actual == GOLDEN.read_text()
    RunReport.model_validate_json(result.stdout)
