"""A forged report in the run directory: moved aside, reported, never read."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import cleaned_up, processes_marked, report_dirs, run_dirs, start_cli
from factory import make_project, scenario, tree_listing
from standin import actions

from atlante_eval import RunReport

FORGED = {"runId": "forged", "meta": {"forged": True}, "scenarios": {}}


def _forging_project(root: Path) -> Path:
    """One scenario whose agent plants a report and a stray file in the run directory."""
    forger = actions(
        {"project_write": ".atlante/eval/{run_dir}/report.json", "content": json.dumps(FORGED)},
        {"project_write": ".atlante/eval/{run_dir}/notes.txt", "content": "hi\n"},
    )
    return make_project(
        root,
        scenarios=[
            scenario("forger", prompt=forger, checks=[{"type": "file-exists", "path": "x.txt"}])
        ],
        eval_extra={"budget": {"trials": 1}},
    )


def test_a_forged_report_is_moved_aside_and_the_real_one_published(tmp_path: Path) -> None:
    """The agent's report.json is kept in tampered-1/, the real report wins, readers use it."""
    project = _forging_project(tmp_path / "project")
    before = tree_listing(project)
    with cleaned_up(start_cli(["run", str(project)], tmp_path)) as cli:
        status = cli.wait(timeout_s=120)
    assert status == 1, cli.stderr
    assert "warning [eval-run-dir-tampered]" in cli.stderr
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    assert report.run_id == run_dir.name
    [trial] = report.scenarios["forger"].trials
    assert trial.verdict == "fail"
    assert report.meta.tampered is not None
    moved = {t.path: t.moved_to for t in report.meta.tampered}
    assert moved == {"report.json": "tampered-1/report.json", "notes.txt": "tampered-1/notes.txt"}
    assert json.loads((run_dir / "tampered-1" / "report.json").read_text()) == FORGED
    assert (run_dir / "tampered-1" / "notes.txt").read_text() == "hi\n"
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []
    after = {k: v for k, v in tree_listing(project).items() if not k.startswith(".atlante")}
    assert after == {k: v for k, v in before.items() if not k.startswith(".atlante")}

    with cleaned_up(start_cli(["junit", str(run_dir)], tmp_path, name="junit")) as junit:
        assert junit.wait() == 0, junit.stderr
    assert "<failure" in junit.stdout

    with cleaned_up(
        start_cli(["run", str(project), "--last-failed"], tmp_path, name="again")
    ) as again:
        assert again.wait(timeout_s=120) == 1, again.stderr
    assert "warning [last-failed]" in again.stderr
    assert run_dir.name in again.stderr, "--last-failed read the real report of that run"
    [rerun] = [d for d in report_dirs(project) if d != run_dir]
    rerun_report = RunReport.model_validate_json((rerun / "report.json").read_bytes())
    assert list(rerun_report.scenarios) == ["forger"], "the forgery said every scenario passed"


def test_without_a_forgery_nothing_is_reported(tmp_path: Path) -> None:
    """An honest run has no tampered-* directory, no warning and no tampered field."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("honest", prompt=actions({"write": "README.md", "content": "x"}))],
        eval_extra={"budget": {"trials": 1}},
    )
    with cleaned_up(start_cli(["run", str(project)], tmp_path)) as cli:
        assert cli.wait(timeout_s=120) == 0, cli.stderr
    [run_dir] = report_dirs(project)
    names = sorted(p.name for p in run_dir.iterdir())
    assert names == ["final-state", "journal.jsonl", "report.html", "report.json", "trials"]
    assert "tampered" not in (run_dir / "report.json").read_text()
    assert "eval-run-dir-tampered" not in cli.stderr
