"""An agent that writes into the user's project: later trials are not run, the report says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clikit import cleaned_up, processes_marked, report_dirs, run_dirs, start_cli
from factory import make_project, scenario
from standin import actions

from atlante_eval import RunReport
from atlante_eval.project import ProjectWatch
from atlante_eval.project.fingerprint import fixture_digest
from atlante_eval.project.integrity import Watched

#: The agent solves nothing in its sandbox: it plants the answer in the project's fixture.
CHEAT = actions({"project_write": "eval/fixtures/app/README.md", "content": "solved\n"})
SOLVED = {"type": "file-contains", "path": "README.md", "pattern": "solved"}


def test_writing_into_the_fixtures_makes_later_trials_infra_errors(tmp_path: Path) -> None:
    """An agent that finds the project via /proc and edits eval/fixtures/ passes no later trial."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("cheat", prompt=CHEAT, checks=[SOLVED])],
        eval_extra={"budget": {"trials": 3}},
    )
    with cleaned_up(start_cli(["run", str(project), "--jobs", "1"], tmp_path)) as cli:
        status = cli.wait(timeout_s=120)
    assert status == 1, cli.stderr
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    first, *later = report.scenarios["cheat"].trials
    assert first.verdict == "fail", "the cheating trial itself graded its own sandbox"
    assert [t.verdict for t in later] == ["infra-error", "infra-error"]
    for trial in later:
        assert trial.error is not None
        assert "the project was modified during the run" in trial.error
        assert "eval/fixtures/app/README.md" in trial.error
    assert report.meta.project_modified == ["eval/fixtures/app/README.md"]
    assert "warning [eval-project-modified]" in cli.stderr
    assert "the project was modified during the run: eval/fixtures/app/README.md" in cli.stdout
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []


def test_without_the_check_the_planted_answer_passes_later_trials(tmp_path: Path) -> None:
    """With the check off, the same attack makes later trials pass: the test sees the breach."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("cheat", prompt=CHEAT, checks=[SOLVED])],
        eval_extra={"budget": {"trials": 3}},
    )
    extra = {"ATLANTE_TEST_NO_PROJECT_GUARD": "1"}
    args = ["run", str(project), "--jobs", "1"]
    with cleaned_up(start_cli(args, tmp_path, extra_env=extra)) as cli:
        assert cli.wait(timeout_s=120) == 1, cli.stderr
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    assert [t.verdict for t in report.scenarios["cheat"].trials] == ["fail", "pass", "pass"]
    assert report.meta.project_modified == ["eval/fixtures/app/README.md"], "the end check"


def test_an_honest_run_reports_no_modification(tmp_path: Path) -> None:
    """Without writes into the project, every trial is graded and nothing is reported."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("honest", prompt=actions({"write": "README.md", "content": "solved"}))],
        eval_extra={"budget": {"trials": 2}},
    )
    with cleaned_up(start_cli(["run", str(project)], tmp_path)) as cli:
        assert cli.wait(timeout_s=120) == 0, cli.stderr
    [run_dir] = report_dirs(project)
    text = (run_dir / "report.json").read_text()
    assert "projectModified" not in text
    assert "eval-project-modified" not in cli.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small fixture tree with a nested and an executable file."""
    root = tmp_path / "fixture"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "run.sh").write_text("echo hi\n")
    (root / "src" / "run.sh").chmod(0o755)
    return root


def _watch(tree: Path) -> ProjectWatch:
    watch = ProjectWatch([Watched(tree, "fx", frozenset({"s"}), tree=True)])
    watch.snapshot()
    return watch


def test_snapshot_digest_equals_the_fingerprint_digest(tree: Path) -> None:
    """The watch's tree digest is the fixture digest the fingerprints use (read once)."""
    assert _watch(tree).tree_digest(tree) == fixture_digest(tree)


def test_same_content_with_a_restored_mtime_is_still_checked(tree: Path) -> None:
    """A rewrite that restores the mtime is caught (ctime moves); a touch alone is not a change."""
    watch = _watch(tree)
    target = tree / "README.md"
    os.utime(target)
    assert watch.check() == {}
    before = target.stat()
    target.write_text("HELLO\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert watch.check() == {"fx/README.md": frozenset({"s"})}
    assert watch.affecting("s") == ["fx/README.md"]
    assert watch.affecting("other") == []


def test_added_and_removed_fixture_files_are_changes(tree: Path) -> None:
    """A file added to or removed from a watched tree counts as a change."""
    watch = _watch(tree)
    (tree / "new.txt").write_text("x")
    (tree / "src" / "run.sh").unlink()
    assert sorted(watch.check()) == ["fx/new.txt", "fx/src/run.sh"]
