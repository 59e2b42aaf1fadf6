"""The seccomp filter of ``--isolation os``: the program itself, and the attacks it stops.

The program is checked by running it (a small classic-BPF interpreter) over every
system-call ABI the machine has. Then the real thing: a confined process that
ptraces or reads the memory of its sibling gets ``EPERM``; and the issue's attack,
an agent making its host exit 0 right after it printed a small usage (so that the
budget-exceeding usage it was about to report never comes), fails. Each also runs
with the filter switched off (the weakened engine), where the attack gets through.
"""

from __future__ import annotations

import errno
import json
import platform
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import ATTACK_SCRIPT, require_bwrap
from standin import StandinHost, actions

from atlante_eval import run_eval
from atlante_eval.isolation import bwrap
from atlante_eval.isolation.bwrap import Confinement
from atlante_eval.isolation.seccomp import DENIED_SYSCALLS, filter_program
from atlante_eval.trial import run_process

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS
X86_64, I386, X32_BIT = 0xC000003E, 0x40000003, 0x40000000
AARCH64, ARM = 0xC00000B7, 0x40000028
#: Each ABI's numbers of ptrace, process_vm_readv, process_vm_writev (from the kernel's tables).
DENIED = {
    X86_64: {101, 310, 311, 521, 539, 540} | {n | X32_BIT for n in (101, 310, 311, 521, 539, 540)},
    I386: {26, 347, 348},
    AARCH64: {117, 270, 271},
    ARM: {26, 376, 377},
}


def run_filter(program: bytes, arch: int, nr: int) -> int:
    """Run a classic BPF seccomp program on one system call; return its action."""
    steps = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(steps)):
        code, jt, jf, k = steps[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = {0: nr, 4: arch}[k]
            pc += 1
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return int(k)
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
    raise AssertionError("the program does not end")


@pytest.mark.parametrize(
    ("machine", "abis"),
    [("x86_64", (X86_64, I386)), ("amd64", (X86_64, I386)), ("aarch64", (AARCH64, ARM))],
)
def test_the_program_denies_exactly_the_three_calls_on_every_abi(
    machine: str, abis: tuple[int, ...]
) -> None:
    """EPERM for ptrace and process_vm_readv/writev on each ABI, ENOSYS off them, else allow."""
    program = filter_program(machine)
    assert program is not None
    assert DENIED_SYSCALLS == ("ptrace", "process_vm_readv", "process_vm_writev")
    for arch in abis:
        numbers = set(range(0, 1024)) | {n | X32_BIT for n in range(0, 1024)} | DENIED[arch]
        for nr in numbers:
            expected = EPERM if nr in DENIED[arch] else ALLOW
            assert run_filter(program, arch, nr) == expected, (hex(arch), nr)
    for stranger in (0, 0xC00000F3, 0x4000003E):
        assert run_filter(program, stranger, 101) == ENOSYS


def test_no_program_for_an_unknown_machine() -> None:
    """A machine whose numbers are not known gets no filter rather than a wrong one."""
    assert filter_program("riscv64") is None


SIBLING_ATTACK = r"""
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buffer = ctypes.create_string_buffer(8)  # before the forks: at the same address in both
vec = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 8)
none = ctypes.c_ulong(0)
read_end, write_end = os.pipe()
victim = os.fork()
if victim == 0:
    os.read(read_end, 1)
    os._exit(0)
attacker = os.fork()
if attacker == 0:
    found = {}
    if libc.ptrace(16, victim, None, None) == 0:  # PTRACE_ATTACH
        os.waitpid(victim, 0x40000000)
        libc.ptrace(17, victim, None, None)  # PTRACE_DETACH
        found["ptrace"] = 0
    else:
        found["ptrace"] = ctypes.get_errno()
    for name in ("process_vm_readv", "process_vm_writev"):
        call = getattr(libc, name)
        done = call(victim, ctypes.byref(vec), 1, ctypes.byref(vec), 1, none)
        found[name] = 0 if done >= 0 else ctypes.get_errno()
    print(json.dumps(found), flush=True)
    os._exit(0)
os.waitpid(attacker, 0)
os.write(write_end, b"x")
os.waitpid(victim, 0)
"""


@pytest.mark.parametrize("weakened", [False, True])
def test_a_confined_process_cannot_ptrace_or_read_its_sibling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """ptrace(PTRACE_ATTACH) and process_vm_readv/writev on a sibling fail with EPERM."""
    require_bwrap()
    if filter_program() is None:
        pytest.skip(f"no seccomp filter for {platform.machine()}")
    if weakened:
        monkeypatch.setattr(bwrap, "filter_program", lambda: None)
    binary = shutil.which("bwrap") or "bwrap"
    confine = Confinement(bwrap=binary, state_dir=tmp_path, writable=(tmp_path,))
    result = anyio.run(
        lambda: run_process(
            [sys.executable, "-c", SIBLING_ATTACK],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            wrap=confine,
        )
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, int] = json.loads(result.stdout.strip().splitlines()[-1])
    expected = 0 if weakened else errno.EPERM
    assert found == dict.fromkeys(DENIED_SYSCALLS, expected)


def _exit_zero_doc() -> dict[str, Any]:
    attack = [sys.executable, "attack.py", "--attack", "exit0", "parent"]
    steps: list[dict[str, Any]] = [
        {"write": "hello.txt", "content": "hello\n"},
        {"usage": 50},
        {"run": attack},  # the agent's tool makes its host exit 0 here
        {"usage": 1_000_000},  # what the host was about to report
    ]
    return scenario(
        "exit-zero", prompt=actions(*steps), checks=[{"type": "file-exists", "path": "hello.txt"}]
    )


@pytest.mark.skipif(platform.machine() not in ("x86_64", "amd64"), reason="x86-64 injection")
@pytest.mark.parametrize("weakened", [False, True])
def test_the_agent_cannot_make_its_host_exit_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """Under os, the ptrace attack fails: the session goes on and exceeds its budget."""
    require_bwrap()
    if weakened:
        monkeypatch.setattr(bwrap, "filter_program", lambda: None)
    project = make_project(
        tmp_path / "project",
        scenarios=[_exit_zero_doc()],
        fixtures={
            "eval/fixtures/app": {
                "README.md": "hello\n",
                "attack.py": ATTACK_SCRIPT.read_text(encoding="utf-8"),
            }
        },
        eval_extra={"budget": {"trials": 1, "maxTokens": 100_000}},
    )
    report = anyio.run(
        lambda: run_eval(project, host=StandinHost(), isolation="os", out=tmp_path / "out")
    )
    [trial] = report.scenarios["exit-zero"].trials
    if weakened:
        assert (trial.verdict, trial.tokens) == ("pass", 50), trial.error
        return
    assert trial.verdict == "budget-exceeded", trial.error
    assert trial.tokens == 1_000_050
