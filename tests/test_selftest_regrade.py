"""selftest proves each scenario regrades exactly, and a selftest run is not regraded."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario, write_text

from atlante_eval import DiagnosticError, run_selftest
from atlante_eval.run.regrade import regrade_run
from atlante_eval.selftest.core import SelftestOutcome

PY = sys.executable
DONE = {"type": "file-contains", "path": "out.txt", "pattern": "done"}


def _selftest(root: Path, tmp_path: Path) -> SelftestOutcome:
    return anyio.run(functools.partial(run_selftest, root, out=tmp_path / "reports", jobs=1))


def _project(tmp_path: Path, *checks: dict[str, Any]) -> Path:
    root = make_project(tmp_path / "p", scenarios=[scenario("s", checks=[DONE, *checks])])
    write_text(root / "eval" / "scenarios" / "solutions" / "s" / "files" / "out.txt", "done\n")
    return root


def test_a_sound_scenario_regrades_to_the_same_verdicts(tmp_path: Path) -> None:
    """Checks on the files alone: no regrade finding, the scenario is ok."""
    root = _project(
        tmp_path, {"type": "command", "run": [PY, "-c", "print(open('out.txt').read())"]}
    )
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    assert outcome.result.scenarios["s"].findings == []
    [reference] = [t for t in outcome.report.scenarios["s"].trials if t.i == 1]
    assert reference.final_state is not None
    assert reference.final_state.complete


def test_a_check_that_depends_on_more_than_the_files_is_found(tmp_path: Path) -> None:
    """A command judging its working directory's name passes the trial, fails its rebuild."""
    judge_place = [PY, "-c", "import os, sys; sys.exit('-regrade-' in os.getcwd())"]
    root = _project(tmp_path, {"type": "command", "run": judge_place})
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    [finding] = [d for d in outcome.result.diagnostics if d.code == "selftest-regrade-differs"]
    assert finding.severity == "error"
    assert "check 1 (command) pass -> fail" in finding.message
    judged = outcome.result.scenarios["s"]
    assert not judged.ok
    assert "selftest-regrade-differs" in judged.findings


def test_a_trial_that_cannot_be_rebuilt_is_a_warning(tmp_path: Path) -> None:
    """A FIFO left by a command check is not stored: the scenario says it cannot be regraded."""
    fifo = [PY, "-c", "import os; os.path.exists('pipe') or os.mkfifo('pipe')"]
    root = _project(tmp_path, {"type": "command", "run": fifo})
    outcome = _selftest(root, tmp_path)
    [finding] = [d for d in outcome.result.diagnostics if d.code == "selftest-not-regradable"]
    assert finding.severity == "warning"
    assert "pipe: a FIFO, socket or device" in finding.message
    assert outcome.exit_code == 0


def test_a_selftest_run_is_not_regraded(tmp_path: Path) -> None:
    """regrade names selftest as the way to judge a selftest run again (exit 2)."""
    root = _project(tmp_path)
    outcome = _selftest(root, tmp_path)
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(functools.partial(regrade_run, outcome.report_path.parent, project=root))
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "regrade-selftest-run"
    assert caught.value.exit_code == 2
