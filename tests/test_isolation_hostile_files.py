"""Issue 23, item 2: a FIFO or ``/dev/zero`` where the engine expects a file never freezes a run.

The agent replaces what its checks run with hostile files: ``rm test.sh; mkfifo
test.sh`` before a check ``["./test.sh"]``, a FIFO as the ``pyvenv.cfg`` beside a
checked ``tool/bin/run``, a link to ``/dev/zero`` as ``.venv/pyvenv.cfg`` before a
check ``[".venv/bin/pytest"]``, and a FIFO where ``file-contains`` looks.

Against the weakened engine (:mod:`weakened_isolation`, ``binds``), which reads
the program's files in its event loop, the run is frozen: its event-loop thread
sits in the FIFO's ``open`` (``wait_for_partner``), and still does after a SIGTERM
was delivered; ``/dev/zero`` grows it until the memory limit. Against the engine as
it is, each hostile trial gets its normal verdict (no check timed out), under the
same memory limit, while a sibling's session runs, and the run answers SIGINT
and SIGTERM with a partial report (exit 3).
"""

from __future__ import annotations

import contextlib
import resource
import signal
from pathlib import Path
from typing import Any

import pytest
from clikit import (
    cleaned_up,
    hosts_running,
    journal_results,
    report_dirs,
    start_cli,
    wait_for,
)
from factory import make_project, scenario
from isolationkit import require_bwrap
from standin import actions

from atlante_eval import RunReport

#: A hang guard for checks, far above any check's run time: never reached here.
CHECK_TIMEOUT_MS = 120_000
#: The data-segment limit the CLI runs under (ample for a run; /dev/zero exceeds it).
MEMORY_LIMIT = 1 << 30
HELLO = {"write": "hello.txt", "content": "hi\n"}


def _command(*argv: str) -> dict[str, Any]:
    return {"type": "command", "run": list(argv), "timeoutMs": CHECK_TIMEOUT_MS}


HOSTILE = {
    "fifo-script": scenario(
        "fifo-script",
        prompt=actions({"delete": "test.sh"}, {"run": ["mkfifo", "test.sh"]}),
        checks=[_command("./test.sh")],
    ),
    "fifo-venv": scenario(
        "fifo-venv",
        prompt=actions({"delete": "tool/pyvenv.cfg"}, {"run": ["mkfifo", "tool/pyvenv.cfg"]}),
        checks=[_command("tool/bin/run")],
    ),
    "devzero-venv": scenario(
        "devzero-venv",
        prompt=actions(
            {"delete": ".venv/pyvenv.cfg"},
            {"symlink": ".venv/pyvenv.cfg", "target": "/dev/zero"},
        ),
        checks=[_command(".venv/bin/pytest")],
    ),
    "fifo-file": scenario(
        "fifo-file",
        prompt=actions({"run": ["mkfifo", "notes.txt"]}),
        checks=[
            {"type": "file-contains", "path": "notes.txt", "pattern": "x"},
            {"type": "file-unchanged", "path": "notes.txt"},
        ],
    ),
}
#: The verdict each hostile trial gets from the engine as it is.
EXPECTED = {"fifo-script": "fail", "fifo-venv": "pass", "devzero-venv": "pass", "fifo-file": "fail"}


def _project(root: Path, names: list[str], *, sibling: Path | None = None) -> Path:
    docs = [HOSTILE[name] for name in names]
    if sibling is not None:  # a session that runs until the test ends the run
        docs.append(scenario("sibling", prompt=actions(HELLO, {"wait_for": str(sibling)})))
    project = make_project(
        root,
        scenarios=docs,
        fixtures={
            "eval/fixtures/app": {
                "README.md": "hello\n",
                "test.sh": "#!/bin/sh\necho ok\n",
                "tool/pyvenv.cfg": "home = /usr/bin\n",
                "tool/bin/run": "#!/bin/sh\necho ran\n",
                ".venv/pyvenv.cfg": "home = /usr/bin\n",
                ".venv/bin/pytest": "#!/bin/sh\necho tests passed\n",
            }
        },
        eval_extra={"budget": {"trials": 1}},
    )
    fixture = project / "eval" / "fixtures" / "app"
    for script in ("test.sh", "tool/bin/run", ".venv/bin/pytest"):
        (fixture / script).chmod(0o755)
    return project


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_LIMIT, MEMORY_LIMIT))


def _args(project: Path, *extra: str) -> list[str]:
    return ["run", str(project), "--isolation", "os", "--no-history", *extra]


def _main_thread_in(pid: int, function: str) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/task/{pid}/wchan").read_text() == function
    return False


def _no_signal_pending(pid: int) -> bool:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["SigPnd"], 16) == 0 and int(fields["ShdPnd"], 16) == 0


def test_weakened_engine_freezes_on_a_fifo_and_ignores_sigterm(tmp_path: Path) -> None:
    """Weakened: the event loop blocks in the sandbox FIFO's open, before and after SIGTERM."""
    require_bwrap()
    project = _project(tmp_path / "project", ["fifo-venv"])
    run = start_cli(_args(project), tmp_path, extra_env={"ATLANTE_TEST_WEAKEN": "binds"})
    with cleaned_up(run) as cli:
        wait_for(lambda: _main_thread_in(cli.pid, "wait_for_partner"))
        cli.signal(signal.SIGTERM)
        # Delivered (nothing pending), handled, and the loop is still in the FIFO's open.
        wait_for(
            lambda: _no_signal_pending(cli.pid) and _main_thread_in(cli.pid, "wait_for_partner")
        )
        [fifo] = cli.tmpdir.glob("atlante-eval-*/fifo-venv-trial-0-*/project/tool/pyvenv.cfg")
        with fifo.open("w", encoding="utf-8") as writer:  # release the engine
            writer.write("home = /usr/bin\n")
        cli.wait(timeout_s=120)


def test_weakened_engine_reads_dev_zero_until_its_memory_runs_out(tmp_path: Path) -> None:
    """Weakened: the link to /dev/zero is read whole, until the memory limit stops it."""
    require_bwrap()
    project = _project(tmp_path / "project", ["devzero-venv"])
    run = start_cli(
        _args(project),
        tmp_path,
        extra_env={"ATLANTE_TEST_WEAKEN": "binds"},
        preexec=_limit_memory,
    )
    with cleaned_up(run) as cli:
        cli.wait(timeout_s=300)
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    trial = report.scenarios["devzero-venv"].trials[0]
    assert trial.verdict == "infra-error"
    assert "MemoryError" in (trial.error or "")


def _hostile_trials_done(project: Path, tmpdir: Path) -> bool:
    dirs = report_dirs(project)
    done = len(journal_results(dirs[0])) if dirs else 0
    return done == len(HOSTILE) and len(hosts_running(tmpdir)) >= 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_hostile_files_get_normal_verdicts_and_the_run_answers_signals(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Each hostile trial is graded as usual while a sibling runs; the signal ends the run."""
    require_bwrap()
    never = tmp_path / "never-created"
    project = _project(tmp_path / "project", list(HOSTILE), sibling=never)
    args = _args(project, "--jobs", str(len(HOSTILE) + 1))
    with cleaned_up(start_cli(args, tmp_path, preexec=_limit_memory)) as cli:
        wait_for(lambda: _hostile_trials_done(project, cli.tmpdir))
        cli.signal(sig)
        status = cli.wait(timeout_s=120)
    assert status == 3, cli.stderr
    assert "error [eval-run-interrupted]" in cli.stderr
    [run_dir] = report_dirs(project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    verdicts = {name: result.trials[0].verdict for name, result in report.scenarios.items()}
    assert verdicts == {**EXPECTED, "sibling": "infra-error"}
    for name in HOSTILE:
        for check in report.scenarios[name].trials[0].checks or []:
            assert "timedOut" not in check.evidence, (name, check.evidence)
    assert not never.exists()
