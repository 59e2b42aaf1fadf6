"""A fixture file name that is not UTF-8 is refused up front, never a crash of the run."""

from __future__ import annotations

import os
from pathlib import Path

from clikit import cleaned_up, report_dirs, start_cli
from factory import make_project, scenario
from typer.testing import CliRunner

from atlante_eval.cli import app

BAD_NAME = b"caf\xe9.txt"  # Latin-1, not UTF-8


def _project(tmp_path: Path) -> Path:
    project = make_project(tmp_path / "project", scenarios=[scenario("basic")])
    fixture = os.fsencode(project / "eval" / "fixtures" / "app")
    with open(os.path.join(fixture, BAD_NAME), "wb") as handle:
        handle.write(b"x\n")
    return project


def test_validate_refuses_a_fixture_name_that_is_not_utf8(tmp_path: Path) -> None:
    """``validate`` exits 2 with invalid-scenario-fixture naming the file, bytes escaped."""
    project = _project(tmp_path)
    result = CliRunner().invoke(app, ["validate", str(project)], catch_exceptions=False)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    first, where = result.stderr.splitlines()[:2]
    assert first == (
        "error [invalid-scenario-fixture]: "
        "fixture file name is not valid UTF-8: eval/fixtures/app/caf\\xe9.txt"
    )
    assert where.endswith(" /task/fixture")


def test_run_refuses_it_before_any_trial(tmp_path: Path) -> None:
    """``run`` (a real CLI process) exits 2 with the same diagnostic and starts no trial."""
    project = _project(tmp_path)
    with cleaned_up(start_cli(["run", str(project)], tmp_path)) as cli:
        assert cli.wait() == 2, cli.stderr
    assert "Traceback" not in cli.stdout + cli.stderr
    assert "[invalid-scenario-fixture]" in cli.stderr
    assert "caf\\xe9.txt" in cli.stderr
    assert report_dirs(project) == []
