"""A canary in the kernel's session keyring, and a program that tries to read it.

``plant_canary`` runs in the CLI under test (``tests/standin_cli.py`` with
``ATLANTE_TEST_SESSION_CANARY``): it gives the process a session keyring of its
own holding a ``user`` key ``atlante-canary``. :data:`READER` is Python source a
confined process runs: it searches its session keyring for the canary and prints
(or writes to the file named by its first argument) what it found.
"""

from __future__ import annotations

import ctypes
import os
import platform

from atlante_eval.trial.keyring import KEYRING_SYSCALLS

#: ``add_key`` system call numbers, for the machines the tests run on.
_ADD_KEY = {"x86_64": 248, "aarch64": 217, "arm64": 217}
_KEY_SPEC_SESSION_KEYRING = -3
DESCRIPTION = b"atlante-canary"

READER = f"""
import ctypes, os, platform, sys
numbers = {KEYRING_SYSCALLS!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = ctypes.c_long(numbers[platform.machine()])
key = libc.syscall(nr, ctypes.c_long(10), ctypes.c_long(-3), b"user", {DESCRIPTION!r},
                   ctypes.c_long(0))
if key < 0:
    found = "keyring: " + os.strerror(ctypes.get_errno())
else:
    buf = ctypes.create_string_buffer(4096)
    size = libc.syscall(nr, ctypes.c_long(11), ctypes.c_long(key), buf, ctypes.c_long(4096))
    found = "keyring: read " + buf.raw[: max(0, size)].decode(errors="replace")
if len(sys.argv) > 1:
    open(sys.argv[1], "w").write(found + "\\n")
print(found)
"""


def _syscall(*args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(*args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def plant_canary(payload: str) -> None:
    """Join a new session keyring in this thread and add the canary key to it."""
    machine = platform.machine()
    _syscall(ctypes.c_long(KEYRING_SYSCALLS[machine]), ctypes.c_long(1), ctypes.c_void_p(None))
    data = payload.encode()
    _syscall(
        ctypes.c_long(_ADD_KEY[machine]),
        b"user",
        DESCRIPTION,
        data,
        ctypes.c_size_t(len(data)),
        ctypes.c_long(_KEY_SPEC_SESSION_KEYRING),
    )
