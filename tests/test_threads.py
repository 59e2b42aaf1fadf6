"""The CLI's run lends out as many worker threads at once as the process has CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from factory import make_project, scenario
from stubcli import calls, write_stub

from atlante_eval._util import threads

#: Run in a fresh interpreter on one CPU: at the first session's spawn (in a worker
#: thread), ask the event loop how many worker threads it lends out at once.
_AT_FIRST_SESSION = """
import json, os, sys
import anyio.from_thread, anyio.to_thread

OUT = sys.argv[2]
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

def _tokens():
    return anyio.to_thread.current_default_thread_limiter().total_tokens

def _at_session(event, args):
    if event == "subprocess.Popen" and os.path.basename(str(args[0])) == "opencode":
        if list(args[1][1:2]) == ["run"] and not os.path.exists(OUT):
            with open(OUT, "w") as out:
                json.dump(anyio.from_thread.run_sync(_tokens), out)

sys.addaudithook(_at_session)
from atlante_eval.cli import main
sys.argv = ["atlante-eval", "run", sys.argv[1], "--no-history", "--jobs", "4"]
main()
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_the_run_command_lends_as_many_worker_threads_as_it_has_cpus(tmp_path: Path) -> None:
    """On one CPU the run's loop lends two threads at once (anyio's default is 40)."""
    bin_dir = tmp_path / "bin"
    stub = write_stub(bin_dir, "opencode", version="1.18.33", write={"out.txt": "x\n"})
    home = tmp_path / "home"
    auth = home / ".local" / "share" / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text('{"acme": {"type": "api", "key": "k"}}', encoding="utf-8")
    root = make_project(
        tmp_path / "project",
        scenarios=[scenario("threads", checks=[{"type": "file-exists", "path": "out.txt"}])],
        eval_extra={"model": "acme/model", "budget": {"trials": 2}},
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "PYTEST_"))},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "NO_COLOR": "1",
    }
    seen = tmp_path / "tokens.json"
    result = subprocess.run(
        [sys.executable, "-c", _AT_FIRST_SESSION, str(root), str(seen)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert [c["argv"][1] for c in calls(stub)].count("run") == 2
    assert seen.read_text(encoding="utf-8") == "2"


@pytest.mark.parametrize(("cpus", "expected"), [(1, 2), (2, 2), (6, 6), (64, 40)])
def test_worker_threads_follow_the_usable_cpus_within_bounds(
    monkeypatch: pytest.MonkeyPatch, cpus: int, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert threads.worker_threads() == expected


def test_cap_worker_threads_sets_the_running_loops_limit() -> None:
    """The cap is the running loop's own: a later loop starts with anyio's default again."""

    async def capped() -> tuple[float, float]:
        before = anyio.to_thread.current_default_thread_limiter().total_tokens
        threads.cap_worker_threads()
        return before, anyio.to_thread.current_default_thread_limiter().total_tokens

    async def fresh() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    before, after = anyio.run(capped)
    assert (before, after) == (40, threads.worker_threads())
    assert anyio.run(fresh) == 40
