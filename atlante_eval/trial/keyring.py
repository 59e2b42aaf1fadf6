"""A fresh anonymous session keyring for every confined process.

The kernel's session keyring is inherited across ``fork`` and ``exec``, and
namespaces do not hide it: a process confined by bubblewrap still possesses the
engine's session keyring and can read the keys in it (``keyctl read @s``), where
Kerberos ``KEYRING:`` caches or aws-vault's keyctl backend keep secrets. Before
each confined spawn, the spawning thread joins a new, empty, anonymous session
keyring (``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``); since Linux 3.4 a session
keyring belongs to the thread, so the engine's other threads keep theirs, and
the child starts with only the new one. A system that denies keyring calls
altogether (``EPERM``/``ENOSYS``, as Docker's default seccomp profile does) denies
them to the confined process too; any other failure stops the spawn.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

__all__ = ["KEYRING_SYSCALLS", "join_fresh_session_keyring"]

#: ``keyctl`` system call numbers by machine (``uname -m``), for the ABIs Python runs on.
KEYRING_SYSCALLS: dict[str, int] = {
    "x86_64": 250,
    "i386": 288,
    "i686": 288,
    "aarch64": 219,
    "arm64": 219,
    "armv7l": 311,
    "armv6l": 311,
    "riscv64": 219,
    "loongarch64": 219,
    "ppc64le": 271,
    "ppc64": 271,
    "s390x": 280,
}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_DENIED = (errno.EPERM, errno.ENOSYS)


def _syscall_number() -> int | None:
    machine = platform.machine()
    if machine == "x86_64" and struct.calcsize("P") == 4:
        machine = "i386"  # a 32-bit Python on a 64-bit kernel uses the i386 numbers
    return KEYRING_SYSCALLS.get(machine)


def join_fresh_session_keyring() -> None:
    """Make the calling thread's session keyring a new, empty, anonymous one.

    A no-op off Linux and on a machine whose system call number is unknown; a
    machine that denies keyring calls denies them to the confined process as well.

    Raises:
        OSError: the kernel refused for another reason (e.g. ``EDQUOT``: the user's
            key quota is used up); nothing may be spawned with the old keyring.
    """
    number = _syscall_number() if sys.platform.startswith("linux") else None
    if number is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(
        ctypes.c_long(number), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None)
    )
    if result >= 0:
        return
    code = ctypes.get_errno()
    if code in _DENIED:
        return
    raise OSError(code, f"cannot start a fresh session keyring: {os.strerror(code)}")
