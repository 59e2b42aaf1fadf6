"""Issue 22: forged tool calls that never get a result cannot grow the engine.

The agent forges 400 Claude ``tool_use`` events of 8 MB each (3.2 GB through the
host's stdout, written from a child process through ``/proc/<host pid>/fd/1``).
The engine's peak resident memory (``VmHWM`` of the real CLI process) stays within
a few over-long lines of a quiet run's. With the open calls' inputs kept whole
(``ATLANTE_TEST_KEEP_PENDING_INPUTS``, the weakened engine), 60 of them already
grow it by far more than that bound: the test sees the breach.
"""

from __future__ import annotations

from pathlib import Path

from clikit import cleaned_up, processes_marked, report_dirs, run_dirs, start_cli
from factory import make_project, scenario
from standin import actions

from atlante_eval import RunReport
from atlante_eval.trial.process import MAX_LINE_BYTES

MIB = 1024 * 1024
#: The forged input of each call.
CALL_BYTES = 8 * MIB
#: Room for a few over-long lines in flight at once (read, decoded, parsed, recorded).
SLACK = 6 * MAX_LINE_BYTES + 16 * MIB


def _project(root: Path, calls: int) -> Path:
    steps = [{"forge_calls": calls, "size": CALL_BYTES}] if calls else []
    doc = scenario(
        "forged-calls",
        prompt=actions(*steps, {"write": "hello.txt", "content": "hello\n"}),
        checks=[{"type": "file-exists", "path": "hello.txt"}],
    )
    return make_project(
        root, scenarios=[doc], eval_extra={"budget": {"trials": 1, "timeoutMs": 600_000}}
    )


def _peak_rss_kib(tmp_path: Path, calls: int, *, keep_inputs: bool = False) -> tuple[int, Path]:
    """Run the CLI with the stand-in read as Claude Code; its peak memory (KiB) and project."""
    name = f"calls-{calls}-{'whole' if keep_inputs else 'capped'}"
    project = _project(tmp_path / name, calls)
    rss = tmp_path / f"{name}.rss"
    extra = {"ATLANTE_TEST_RSS_FILE": str(rss), "ATLANTE_TEST_STANDIN_DIALECT": "claude"}
    if keep_inputs:
        extra["ATLANTE_TEST_KEEP_PENDING_INPUTS"] = "1"
    run = start_cli(["run", str(project)], tmp_path, name=name, extra_env=extra)
    with cleaned_up(run) as cli:
        assert cli.wait(timeout_s=900) == 0, cli.stderr
        assert processes_marked(cli.tmpdir) == []
        assert run_dirs(cli.tmpdir) == []
    return int(rss.read_text()), project


def test_forged_pending_calls_keep_engine_memory_bounded(tmp_path: Path) -> None:
    """400 x 8 MB forged tool_use events: memory stays bounded; all are counted as calls."""
    baseline_kib, _ = _peak_rss_kib(tmp_path, 0)
    forged_kib, project = _peak_rss_kib(tmp_path, 400)
    assert forged_kib < baseline_kib + SLACK // 1024, (baseline_kib, forged_kib)
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    [trial] = report.scenarios["forged-calls"].trials
    assert trial.verdict == "pass"
    assert trial.activity is not None
    assert trial.activity.tool_calls.by_name == {"Bash": 400}  # written as pending, capped


def test_forged_pending_calls_grow_a_weakened_engine(tmp_path: Path) -> None:
    """With inputs kept whole, 60 forged calls already exceed the bound: the breach shows."""
    baseline_kib, _ = _peak_rss_kib(tmp_path, 0, keep_inputs=True)
    forged_kib, _ = _peak_rss_kib(tmp_path, 60, keep_inputs=True)
    assert forged_kib > baseline_kib + SLACK // 1024 + 200 * 1024, (baseline_kib, forged_kib)
