"""An agent planting links or FIFOs in the run directory cannot steer what the engine writes.

The run directory lies in the user's project, within the agent's reach. These
attacks are performed for real by the stand-in host: trial 0 plants something at
the place a later trial's files will go, then the tests check the engine neither
wrote through it nor blocked on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from clikit import report_dirs
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval

PRECIOUS = "the user's own file\n"


def _plant(project: Path, code: str) -> dict[str, list[str]]:
    """A stand-in action running ``code`` once for every run directory of ``project``."""
    script = (
        "import glob, os, sys\n"
        f"for run in glob.glob({str(project / '.atlante' / 'eval')!r} + '/*/'):\n"
        "    trial = os.path.join(run, 'trials', 's', '1')\n"
        + "".join(f"    {line}\n" for line in code.splitlines())
    )
    return {"run": [sys.executable, "-c", script]}


def _report(project: Path) -> tuple[Path, RunReport]:
    [run_dir] = report_dirs(project)
    return run_dir, RunReport.model_validate_json((run_dir / "report.json").read_bytes())


@pytest.mark.anyio
async def test_a_symlink_planted_for_a_later_trial_is_not_written_through(tmp_path: Path) -> None:
    """Trial 1's transcript never overwrites the file a planted ``trials/s/1`` link points at."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "transcript.jsonl").write_text(PRECIOUS)
    project = tmp_path / "p"
    plant = _plant(
        project,
        f"os.makedirs(os.path.dirname(trial), exist_ok=True)\nos.symlink({str(victim)!r}, trial)",
    )
    make_project(
        project,
        scenarios=[scenario("s", prompt=actions(plant))],
        eval_extra={"budget": {"trials": 2}},
    )
    await run_eval(project, host=StandinHost(), jobs=1)
    run_dir, report = _report(project)
    # The attack happened: the link is there, and it points at the victim.
    assert (run_dir / "trials" / "s" / "1").is_symlink()
    assert (victim / "transcript.jsonl").read_text() == PRECIOUS
    assert sorted(p.name for p in victim.iterdir()) == ["transcript.jsonl"]
    first, second = report.scenarios["s"].trials
    assert (first.verdict, second.verdict) == ("pass", "pass")
    assert first.transcript == "trials/s/0/transcript.jsonl"
    # Trial 1 ran and was graded; its transcript had no safe place, so none is claimed.
    assert second.transcript is None


@pytest.mark.anyio
async def test_a_fifo_planted_for_an_unfinished_trial_does_not_hang_the_report(
    tmp_path: Path,
) -> None:
    """An interrupted run still publishes although an unfinished trial's transcript is a FIFO."""
    project = tmp_path / "p"
    plant = _plant(
        project,
        "os.makedirs(trial, exist_ok=True)\nos.mkfifo(os.path.join(trial, 'transcript.jsonl'))",
    )
    make_project(
        project,
        scenarios=[scenario("s", prompt=actions(plant, {"sleep": 120}))],
        eval_extra={"budget": {"trials": 2, "timeoutMs": 600_000}},
    )
    fifo_glob = "*/trials/s/1/transcript.jsonl"
    base = project / ".atlante" / "eval"

    async with anyio.create_task_group() as group:

        async def cancel_when_planted() -> None:
            # The planted FIFO is the event: cancel once it exists.
            while not list(base.glob(fifo_glob)):  # noqa: ASYNC110
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()

        group.start_soon(cancel_when_planted)
        await run_eval(project, host=StandinHost(), jobs=1)
        pytest.fail("run_eval returned although it was cancelled")
    run_dir, report = _report(project)
    assert (run_dir / "trials" / "s" / "1" / "transcript.jsonl").is_fifo()
    assert report.meta.interrupted is True
    unfinished = report.scenarios["s"].trials[1]
    assert unfinished.verdict == "infra-error"
    assert unfinished.transcript is None
    assert json.loads((run_dir / "report.json").read_text())["runId"] == report.run_id
