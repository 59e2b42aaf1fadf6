"""The seccomp filter a confined tree runs under: no process may read or steer another.

Under ``--isolation os`` the agent's tools run as the same user, in the same
namespaces, as the host CLI that reports on them. With ``ptrace`` an agent could
make the host (or the namespace's main process) exit 0 right after a forged
result; with ``process_vm_readv``/``process_vm_writev`` it could read the host's
memory or rewrite what it is about to print. :func:`filter_program` returns a
classic BPF program that makes those three system calls fail with ``EPERM``,
for every system-call ABI the machine can run (x86-64 with its x32 and i386
ABIs; AArch64 with its 32-bit ARM ABI), and every other call pass. A call made
through an ABI the program does not know fails with ``ENOSYS``, so no ABI is a
way around it. Bubblewrap loads it (``--seccomp FD``) into the confined tree
before it runs anything, and the kernel keeps it for every descendant.

The program is built here, a few dozen instructions, rather than with
libseccomp: its Python bindings are Debian's ``python3-seccomp`` for the system
interpreter only, and ``pyseccomp`` on PyPI is unmaintained since 2021. Its tests
(``tests/test_isolation_seccomp.py``) run the real calls under the real filter.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Mapping

__all__ = ["DENIED_SYSCALLS", "filter_program"]

#: The system calls a confined tree may not make, by name (documentation and tests).
DENIED_SYSCALLS = ("ptrace", "process_vm_readv", "process_vm_writev")

# Audit architecture values (linux/audit.h) and each ABI's numbers of DENIED_SYSCALLS.
_X86_64 = 0xC000003E
_I386 = 0x40000003
_AARCH64 = 0xC00000B7
_ARM = 0x40000028
_X32_BIT = 0x40000000
_X86_64_CALLS = (101, 310, 311)
_X32_CALLS = (521, 539, 540)
_ABIS: Mapping[str, Mapping[int, tuple[int, ...]]] = {
    # x32 calls are x86-64 calls with the x32 bit set: deny both numberings with it.
    "x86_64": {
        _X86_64: (
            *_X86_64_CALLS,
            *(n | _X32_BIT for n in _X86_64_CALLS),
            *_X32_CALLS,
            *(n | _X32_BIT for n in _X32_CALLS),
        ),
        _I386: (26, 347, 348),
    },
    "aarch64": {_AARCH64: (117, 270, 271), _ARM: (26, 376, 377)},
}
_MACHINES = {"amd64": "x86_64", "arm64": "aarch64"}

# Classic BPF (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR_OFFSET = 0
_ARCH_OFFSET = 4


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """Return the compiled filter for ``machine`` (default: this one), ``None`` if unknown.

    The bytes are an array of ``struct sock_filter``, as ``bwrap --seccomp`` reads it.
    """
    abis = _ABIS.get(_MACHINES.get(machine or platform.machine(), machine or platform.machine()))
    if abis is None:
        return None
    # Layout: load arch; one test per ABI jumping to its block; unknown ABI -> ENOSYS;
    # each block: load nr; one test per denied number jumping to the shared EPERM
    # return; allow. Jumps are relative to the next instruction.
    blocks = [(arch, calls) for arch, calls in abis.items()]
    program = [_insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET)]
    sizes = [len(calls) + 2 for _, calls in blocks]
    for index, (arch, _) in enumerate(blocks):
        remaining_tests = len(blocks) - index - 1
        to_block = remaining_tests + 1 + sum(sizes[:index])
        program.append(_insn(_JEQ_K, to_block, 0, arch))
    program.append(_insn(_RET_K, 0, 0, _ERRNO | errno.ENOSYS))
    deny_at = 1 + len(blocks) + 1 + sum(sizes)
    for index, (_, calls) in enumerate(blocks):
        start = 1 + len(blocks) + 1 + sum(sizes[:index])
        program.append(_insn(_LD_W_ABS, 0, 0, _NR_OFFSET))
        for offset, number in enumerate(calls):
            here = start + 1 + offset
            program.append(_insn(_JEQ_K, deny_at - (here + 1), 0, number))
        program.append(_insn(_RET_K, 0, 0, _ALLOW))
    program.append(_insn(_RET_K, 0, 0, _ERRNO | errno.EPERM))
    return b"".join(program)
