"""Progress of a run with arms: each trial line names its arm, and an interrupted run tells
the trial that started from the other arm's of the same index, which never did."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from clikit import cleaned_up, console, report_dirs, start_cli, wait_for
from factory import make_project, scenario
from standin import actions


def test_an_interrupted_run_with_arms_marks_only_the_unstarted_arm(tmp_path: Path) -> None:
    """SIGINT during block 1 (trial 1 of the first arm in its shuffled order): that trial is
    unfinished, the other arm's trial 1 never started; the lines name each trial's arm."""
    started = tmp_path / "trial-1-started"
    hold = f'[ "$ATLANTE_STANDIN_TRIAL" = 0 ] || {{ touch {started}; sleep 120; }}'
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "partly",
                prompt=actions({"run": ["sh", "-c", hold]}, {"write": "out.txt", "content": "x"}),
                checks=[{"type": "file-exists", "path": "out.txt"}],
            )
        ],
        eval_extra={
            "budget": {"trials": 2, "timeoutMs": 600_000},
            "variants": [{"name": "alpha"}, {"name": "beta", "model": "prov/beta"}],
        },
    )
    with cleaned_up(start_cli(["run", str(root), "--jobs", "1"], tmp_path)) as cli:
        wait_for(started.exists)
        cli.signal(signal.SIGINT)
        status = cli.wait(timeout_s=60)
    assert status == 3, cli.stderr
    [run_dir] = report_dirs(root)
    report = json.loads((run_dir / "report.json").read_text())
    result = report["scenarios"]["partly"]
    arms = {"alpha": result["trials"], "beta": result["arms"]["beta"]["trials"]}
    states = {
        arm: [(t["i"], t["verdict"], t.get("notStarted")) for t in trials]
        for arm, trials in arms.items()
    }
    lines = cli.stderr.splitlines()  # progress goes to stderr when stdout is no terminal
    running = [line for line in lines if line.startswith("trial 1 [")]
    assert len(running) == 1, cli.stderr  # only the first arm of block 1 started
    first = running[0].removeprefix("trial 1 [").split("]")[0]
    other = "beta" if first == "alpha" else "alpha"
    assert states[first] == [(0, "pass", None), (1, "infra-error", None)]
    assert states[other] == [(0, "pass", None), (1, "infra-error", True)]
    assert arms[other][1]["error"] == "the run was interrupted before this trial started"
    assert arms[first][1]["error"] == "the run was interrupted before this trial finished"
    # Either way alpha (the control) graded one trial: trial 1 never started or was cut.
    assert report["uplift"]["arms"]["beta"]["scenarios"]["partly"]["controlGraded"] == 1
    # A report with a never-started trial is no forgery: compare reads it (both ways).
    for args in (["--arms", f"{first},{other}"], [str(run_dir)]):
        compared = console(["compare", str(run_dir), *args, "--json"])
        assert compared.returncode == 0, compared.stderr.decode()
    for arm in ("alpha", "beta"):
        assert f"trial 0 [{arm}] running..." in lines, cli.stderr
        assert any(line.startswith(f"trial 0 [{arm}]: pass") for line in lines), cli.stderr
