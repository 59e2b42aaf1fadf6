"""The spawn plan seam: descriptors handed down, a step after the spawn, one after the exit.

Limits and the tmpfs watch use it; each step must run whatever happens (the
program missing, the step itself failing), and a limited spawn must fail the same
way an unlimited one does when its program does not exist.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
import pytest
from isolationkit import require_bwrap

from atlante_eval.isolation.bwrap import Confinement
from atlante_eval.isolation.limits import ResourceLimits, TrialLimits
from atlante_eval.isolation.preflight import require_os_isolation
from atlante_eval.isolation.tmpfs import TmpfsWatch
from atlante_eval.trial import SpawnPlan, run_process


def test_a_plan_hands_down_descriptors_and_runs_both_steps(tmp_path: Path) -> None:
    """The child writes to an inherited pipe; the steps see its pid and its end, in order."""
    read_end, write_end = os.pipe()
    seen: list[str] = []

    def wrap(argv: Sequence[str], _cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        return SpawnPlan(
            list(argv),
            dict(env),
            pass_fds=(write_end,),
            after_spawn=lambda pid: seen.append(f"spawned {pid > 0}"),
            after_exit=lambda: seen.append("exited"),
            confined=False,
        )

    code = f"import os; os.write({write_end}, b'through the pipe')"
    result = anyio.run(
        lambda: run_process([sys.executable, "-c", code], cwd=tmp_path, env={}, wrap=wrap)
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"through the pipe"
    assert result.returncode == 0
    assert seen == ["spawned True", "exited"]


def test_a_failing_after_spawn_step_kills_the_child_and_still_runs_the_exit_step(
    tmp_path: Path,
) -> None:
    """The error propagates, the child is gone, the exit step ran."""
    seen: list[int] = []

    def fail(pid: int) -> None:
        seen.append(pid)
        raise RuntimeError("handshake failed")

    def wrap(argv: Sequence[str], _cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        return SpawnPlan(list(argv), dict(env), after_spawn=fail, after_exit=lambda: seen.append(0))

    with pytest.raises(RuntimeError, match="handshake failed"):
        anyio.run(
            lambda: run_process(
                [sys.executable, "-c", "import time; time.sleep(600)"],
                cwd=tmp_path,
                env={},
                wrap=wrap,
            )
        )
    pid, exited = seen
    assert exited == 0
    assert not Path(f"/proc/{pid}").exists()


def test_a_limited_spawn_of_a_missing_program_fails_like_an_unlimited_one(
    tmp_path: Path,
) -> None:
    """No group joined, no exit 127: the same spawn error as without limits."""
    limits = TrialLimits(ResourceLimits(pids=64), None)

    def wrap(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        return limits.plan("check", argv, cwd, env, confined=False)

    async def both() -> tuple[str | None, str | None]:
        plain = await run_process(["no-such-program-x"], cwd=tmp_path, env={"PATH": "/usr/bin"})
        limited = await run_process(
            ["no-such-program-x"], cwd=tmp_path, env={"PATH": "/usr/bin"}, wrap=wrap
        )
        return plain.spawn_error, limited.spawn_error

    plain, limited = anyio.run(both)
    assert plain is not None
    assert limited == plain
    (tmp_path / "data.txt").write_text("not a program")
    refused = anyio.run(lambda: run_process(["./data.txt"], cwd=tmp_path, env={}, wrap=wrap))
    assert refused.spawn_error is not None
    assert "Permission denied" in refused.spawn_error


def test_the_tmpfs_watch_lets_a_failing_bubblewrap_go_unwatched(tmp_path: Path) -> None:
    """bubblewrap refusing its command line: the handshake ends at once, nothing held."""
    require_bwrap()
    watch = TmpfsWatch(16 << 20)
    bwrap = require_os_isolation()
    process = subprocess.Popen(
        [bwrap, *watch.bwrap_options(), "--no-such-option"],
        pass_fds=watch.pass_fds,
        stderr=subprocess.DEVNULL,
    )
    watch.after_spawn(process.pid)
    assert process.wait() != 0
    assert watch.watched is False
    assert watch.full() is False
    watch.close()


def test_the_tmpfs_watch_holds_the_sandbox_mounts_not_the_engines(tmp_path: Path) -> None:
    """Every sized mount is held; filling /tmp shows as full, an untouched one does not."""
    require_bwrap()
    confine = Confinement(
        bwrap=require_os_isolation(), state_dir=tmp_path, writable=(tmp_path,), tmp_bytes=8 << 20
    )
    script = "head -c 16777216 /dev/zero > /tmp/fill; echo $?"
    plan = confine(["/bin/sh", "-c", script], tmp_path, {"PATH": "/usr/bin:/bin"})
    argv = list(plan.argv)
    watch = TmpfsWatch(8 << 20)
    argv[1:1] = watch.bwrap_options()
    fds = (*plan.pass_fds, *watch.pass_fds)
    process = subprocess.Popen(argv, env=plan.env, pass_fds=fds, stdout=subprocess.PIPE)
    watch.after_spawn(process.pid)
    if plan.after_exit is not None:
        plan.after_exit()  # the seccomp pipe: the child holds its own copy
    out, _ = process.communicate()
    assert watch.watched is True
    assert len(watch._held) == 4
    assert out.strip() != b"0", "the write did not run out of space"
    assert watch.full() is True
    statvfs = [os.fstatvfs(fd) for fd in watch._held]
    assert all(s.f_blocks * s.f_frsize == 8 << 20 for s in statvfs)
    assert sum(s.f_bfree == 0 for s in statvfs) == 1, "only /tmp was filled"
    watch.close()
