"""run_process: real subprocesses, process groups, timeouts, bounded output, cancellation."""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from proctools import (
    ESCAPER,
    PROGRAM_SLEEP_S,
    STUBBORN,
    kill_quietly,
    read_pids,
    wait_dead,
)

from atlante_eval.trial import kill_all_process_groups, run_process
from atlante_eval.trial import process as process_module
from atlante_eval.trial.groups import LIVE_GROUPS
from atlante_eval.trial.process import MAX_LINE_BYTES, HeadBuffer, TailBuffer

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio unless a test parametrizes the backend."""
    return "asyncio"


def _collector(lines: list[str]) -> Callable[[str], bool]:
    """An ``on_line`` that keeps every line and never aborts."""

    def on_line(line: str) -> bool:
        lines.append(line)
        return False

    return on_line


async def _py(
    code: str, tmp_path: Path, *args: str, **kwargs: object
) -> process_module.ProcessResult:
    return await run_process([PY, "-c", code, *args], cwd=tmp_path, env=ENV, **kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_exit_codes_are_reported(tmp_path: Path) -> None:
    """An exit status is returned as is, and a signal death has no exit code but a signal name."""
    ok = await _py("import sys; sys.exit(0)", tmp_path)
    three = await _py("import sys; sys.exit(3)", tmp_path)
    killed = await _py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", tmp_path)
    assert (ok.returncode, ok.exit, ok.timed_out, ok.spawn_error) == (0, 0, False, None)
    assert (three.returncode, three.exit, three.signal_name) == (3, 3, None)
    assert killed.exit is None
    assert killed.signal_name == "SIGKILL"
    assert killed.returncode == -9


@pytest.mark.anyio
async def test_missing_program_is_a_spawn_error(tmp_path: Path) -> None:
    """A program that cannot be started yields spawn_error naming it, not an exception."""
    result = await run_process(["atlante-no-such-program"], cwd=tmp_path, env=ENV)
    assert result.returncode is None
    assert result.exit is None
    assert result.spawn_error is not None
    assert "atlante-no-such-program" in result.spawn_error
    assert not result.timed_out


@pytest.mark.anyio
async def test_missing_working_directory_is_a_spawn_error(tmp_path: Path) -> None:
    """A working directory that does not exist is reported as a spawn error."""
    result = await run_process([PY, "-c", "pass"], cwd=tmp_path / "absent", env=ENV)
    assert result.spawn_error is not None
    assert result.returncode is None


@pytest.mark.anyio
async def test_output_streams_are_captured_separately(tmp_path: Path) -> None:
    """stdout and stderr are captured separately and decoded as UTF-8."""
    result = await _py("import sys; print('out ünïcode'); print('err', file=sys.stderr)", tmp_path)
    assert result.stdout == "out ünïcode\n"
    assert result.stderr == "err\n"
    assert result.stdout_bytes == len("out ünïcode\n".encode())


@pytest.mark.anyio
async def test_child_sees_exactly_the_given_environment(tmp_path: Path) -> None:
    """The child's environment is exactly the mapping passed in, nothing inherited."""
    os.environ["ATLANTE_TEST_SECRET"] = "leak"
    try:
        result = await run_process(
            [PY, "-c", "import os, json; print(json.dumps(sorted(os.environ)))"],
            cwd=tmp_path,
            env={**ENV, "ONLY_THIS": "1"},
        )
    finally:
        del os.environ["ATLANTE_TEST_SECRET"]
    names = set(result.stdout.strip().strip("[]").replace('"', "").split(", "))
    assert "ONLY_THIS" in names
    assert "ATLANTE_TEST_SECRET" not in names


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_timeout_ends_a_stubborn_group_within_timeout_plus_grace(tmp_path: Path) -> None:
    """A child ignoring SIGTERM with a grandchild holding the pipes is killed after the grace."""
    pid_file = tmp_path / "pids"
    started = time.monotonic()
    result = await _py(STUBBORN, tmp_path, str(pid_file), timeout_s=0.5, grace_s=0.3)
    elapsed = time.monotonic() - started
    pids = read_pids(pid_file, 2)
    try:
        assert result.timed_out
        assert result.signal_name == "SIGKILL"
        assert result.stdout == "ready\n"
        assert result.duration_ms / 1000 >= 0.45  # never before the deadline
        assert elapsed < PROGRAM_SLEEP_S  # ended, not waited out
        assert len(pids) == 2
        assert wait_dead(pids) == []
    finally:
        kill_quietly(pids)


@pytest.mark.anyio
async def test_timeout_returns_even_when_an_escaped_grandchild_holds_the_pipes(
    tmp_path: Path,
) -> None:
    """A grandchild that left the process group cannot hang the caller past the drain limit."""
    pid_file = tmp_path / "pids"
    started = time.monotonic()
    result = await _py(ESCAPER, tmp_path, str(pid_file), timeout_s=0.3, grace_s=0.2)
    elapsed = time.monotonic() - started
    pids = read_pids(pid_file, 2)
    try:
        assert result.timed_out
        assert elapsed < PROGRAM_SLEEP_S  # the drain stopped waiting for the pipes
        assert wait_dead(pids[:1]) == []
    finally:
        kill_quietly(pids)


@pytest.mark.anyio
async def test_timeout_still_reported_when_the_program_exits_zero_on_sigterm(
    tmp_path: Path,
) -> None:
    """A program that exits 0 on SIGTERM after the deadline is still timed out."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "time.sleep(30)\n"
    )
    result = await _py(code, tmp_path, timeout_s=0.3, grace_s=2)
    assert result.timed_out
    assert result.returncode == 0


@pytest.mark.anyio
async def test_grace_default_is_read_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DEFAULT_GRACE_S is looked up when a process is ended, so it can be shortened."""
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.2)
    graces: list[float] = []
    end_group = process_module._end_group

    async def recording(process: process_module.Process, grace_s: float) -> None:
        graces.append(grace_s)
        await end_group(process, grace_s)

    monkeypatch.setattr(process_module, "_end_group", recording)
    pid_file = tmp_path / "pids"
    result = await _py(STUBBORN, tmp_path, str(pid_file), timeout_s=0.3)
    pids = read_pids(pid_file, 2)
    kill_quietly(pids)
    assert result.timed_out
    assert graces == [0.2]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_hundred_megabytes_of_output_stay_bounded_in_memory(tmp_path: Path) -> None:
    """100 MB on stdout and stderr keep only the tails and little memory."""
    code = (
        "import sys\n"
        "block = b'y' * (1 << 20)\n"
        "for _ in range(100): sys.stdout.buffer.write(block)\n"
        "sys.stdout.buffer.write(b'END')\n"
        "for _ in range(20): sys.stderr.buffer.write(block)\n"
        "sys.stderr.buffer.write(b'ERR')\n"
    )
    tracemalloc.start()
    try:
        result = await _py(code, tmp_path, capture_bytes=4096)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.returncode == 0
    assert result.stdout_bytes == 100 * (1 << 20) + 3
    assert len(result.stdout) == 4096
    assert result.stdout.endswith("yyyEND")
    assert result.stderr.endswith("yyyERR")
    assert len(result.stderr) == 4096
    assert peak < 16 * (1 << 20)


@pytest.mark.anyio
async def test_hundred_megabyte_line_without_newline_is_dropped_not_buffered(
    tmp_path: Path,
) -> None:
    """A 100 MB line is skipped by the line reader (memory bounded); the next line still arrives."""
    code = (
        "import sys\n"
        "block = b'z' * (1 << 20)\n"
        "for _ in range(100): sys.stdout.buffer.write(block)\n"
        "sys.stdout.buffer.write(b'\\n{\"after\": 1}\\nlast-unterminated')\n"
    )
    lines: list[str] = []

    def on_line(line: str) -> bool:
        lines.append(line)
        return False

    tracemalloc.start()
    try:
        result = await _py(code, tmp_path, on_line=on_line, capture_bytes=1024)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.returncode == 0
    assert lines == ['{"after": 1}', "last-unterminated"]
    assert peak < MAX_LINE_BYTES + 16 * (1 << 20)


@pytest.mark.anyio
async def test_lines_split_across_reads_are_delivered_whole(tmp_path: Path) -> None:
    """Lines are reassembled across pipe reads, stripped, and empty lines are skipped."""
    code = (
        "import sys, time\n"
        "sys.stdout.write('  first'); sys.stdout.flush(); time.sleep(0.05)\n"
        "sys.stdout.write(' half\\n\\n   \\n' + 'a' * 200000 + '\\nend'); sys.stdout.flush()\n"
    )
    lines: list[str] = []
    await _py(code, tmp_path, on_line=_collector(lines))
    assert lines == ["first half", "a" * 200000, "end"]


@pytest.mark.anyio
async def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    """Invalid UTF-8 on either stream becomes U+FFFD in captured text and delivered lines."""
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'ok \\xff\\xfe\\n')\n"
        "sys.stderr.buffer.write(b'bad \\xc3\\n')\n"
    )
    lines: list[str] = []
    result = await _py(code, tmp_path, on_line=_collector(lines))
    assert result.returncode == 0
    assert lines == ["ok \ufffd\ufffd"]
    assert result.stdout == "ok \ufffd\ufffd\n"
    assert result.stderr == "bad \ufffd\n"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_stdin_is_delivered_and_closed(tmp_path: Path) -> None:
    """Bytes given as stdin reach the child in full, followed by end of file."""
    payload = ("prompt ✓ " * 200_000).encode()
    code = "import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    result = await _py(code, tmp_path, stdin=payload)
    import hashlib

    assert result.stdout.strip() == hashlib.sha256(payload).hexdigest()


@pytest.mark.anyio
async def test_without_stdin_the_child_reads_end_of_file(tmp_path: Path) -> None:
    """Without stdin bytes the child's stdin is /dev/null, so a read returns at once."""
    result = await _py("import sys; print(repr(sys.stdin.read()))", tmp_path, timeout_s=5)
    assert result.stdout.strip() == "''"
    assert not result.timed_out


@pytest.mark.anyio
async def test_stdin_ignored_by_the_child_does_not_block(tmp_path: Path) -> None:
    """A child that never reads a large stdin still finishes without a deadlock."""
    result = await _py("print('done')", tmp_path, stdin=b"x" * (4 << 20), timeout_s=10)
    assert result.stdout == "done\n"
    assert not result.timed_out


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_on_line_can_abort_the_process_group(tmp_path: Path) -> None:
    """A true return from on_line ends the whole group at once and sets aborted."""
    pid_file = tmp_path / "pids"
    code = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(60); os._exit(0)\n"
        "open(sys.argv[1], 'w').write(f'{os.getpid()}\\n{pid}\\n')\n"
        "for i in range(1000000):\n"
        "    print(i, flush=True); time.sleep(0.001)\n"
    )
    seen: list[str] = []

    def on_line(line: str) -> bool:
        seen.append(line)
        return line == "20"

    result = await _py(code, tmp_path, str(pid_file), on_line=on_line, grace_s=1)
    pids = read_pids(pid_file, 2)
    try:
        assert result.aborted
        assert not result.timed_out
        assert seen[-1] == "20"
        assert len(seen) == 21  # nothing was read after the abort
        assert wait_dead(pids) == []
    finally:
        kill_quietly(pids)


@pytest.mark.anyio
async def test_exception_in_on_line_propagates_and_kills_the_group(tmp_path: Path) -> None:
    """An error raised by on_line reaches the caller and the process group is gone."""
    pid_file = tmp_path / "pids"

    def on_line(line: str) -> bool:
        raise RuntimeError(f"bad line {line}")

    with pytest.raises(BaseException, match="bad line ready") as caught:
        await _py(STUBBORN, tmp_path, str(pid_file), on_line=on_line, grace_s=0.2)
    assert caught.value is not None
    pids = read_pids(pid_file, 2)
    try:
        assert wait_dead(pids) == []
    finally:
        kill_quietly(pids)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_cancellation_kills_every_descendant(tmp_path: Path) -> None:
    """Cancelling the caller ends the group (shielded), re-raises, and leaves no descendant."""
    pid_file = tmp_path / "pids"
    started = time.monotonic()
    with anyio.CancelScope() as scope:

        def on_line(line: str) -> bool:
            if line == "ready":  # the pids are written: cancel now (an event, not a delay)
                scope.cancel()
            return False

        await _py(STUBBORN, tmp_path, str(pid_file), on_line=on_line, grace_s=0.3)
    elapsed = time.monotonic() - started
    pids = read_pids(pid_file, 2)
    try:
        assert scope.cancelled_caught
        assert elapsed < PROGRAM_SLEEP_S  # ended, not waited out
        assert len(pids) == 2
        assert wait_dead(pids) == []
        assert LIVE_GROUPS.pids == set()
    finally:
        kill_quietly(pids)


@pytest.mark.anyio
async def test_cancelling_one_task_leaves_a_sibling_process_alone(tmp_path: Path) -> None:
    """Only the cancelled call's group is ended; a sibling call completes normally."""
    results: list[process_module.ProcessResult] = []

    async def sibling() -> None:
        results.append(await _py("import time; time.sleep(0.6); print('fine')", tmp_path))

    async with anyio.create_task_group() as group:
        group.start_soon(sibling)
        with anyio.move_on_after(0.2):
            await _py("import time; time.sleep(30)", tmp_path, grace_s=0.1)
    assert results[0].stdout == "fine\n"
    assert results[0].returncode == 0


@pytest.mark.anyio
async def test_stdout_head_keeps_the_first_bytes_and_stops_the_program(tmp_path: Path) -> None:
    """With stdout_head_bytes, the first bytes are kept and a flood is cut off."""
    code = "import sys\nsys.stdout.write('HEAD' + 'x' * 50_000_000)\n"
    result = await _py(code, tmp_path, stdout_head_bytes=1000, grace_s=0.2)
    assert result.aborted
    assert result.stdout.startswith("HEAD")
    assert len(result.stdout) == 1000


@pytest.mark.anyio
async def test_kill_all_process_groups_ends_running_groups(tmp_path: Path) -> None:
    """kill_all_process_groups SIGKILLs every live group started by run_process."""
    pid_file = tmp_path / "pids"
    results: list[process_module.ProcessResult] = []

    async def run() -> None:
        results.append(await _py(STUBBORN, tmp_path, str(pid_file)))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        pids = await anyio.to_thread.run_sync(read_pids, pid_file, 2)
        kill_all_process_groups()
    try:
        assert results[0].signal_name == "SIGKILL"
        assert wait_dead(pids) == []
    finally:
        kill_quietly(pids)


def test_tail_buffer_keeps_the_last_bytes() -> None:
    """TailBuffer keeps exactly the last ``limit`` bytes and counts everything written."""
    tail = TailBuffer(5)
    for piece in (b"abc", b"defg", b"", b"hi"):
        tail.write(piece)
    assert tail.value() == b"efghi"
    assert tail.total == 9
    big = TailBuffer(4)
    big.write(b"0123456789")
    assert big.value() == b"6789"
    assert TailBuffer(0).value() == b""


def test_head_buffer_keeps_the_first_bytes() -> None:
    """HeadBuffer keeps the first ``limit`` bytes and reports when more arrived."""
    head = HeadBuffer(5)
    head.write(b"abc")
    assert not head.full
    head.write(b"defg")
    assert head.value() == b"abcde"
    assert head.full
    assert head.total == 7
