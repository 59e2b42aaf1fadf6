"""Tell, after a confined process ended, whether one of its private tmpfs mounts filled up.

Bubblewrap makes the sandbox's ``/tmp``, ``/var``, ``/run`` and ``/dev/shm``
fresh tmpfs mounts of ``tmpMb`` each (``--size``); they vanish with the
sandbox's mount namespace, so the engine holds them open from outside for the
process's lifetime. :class:`TmpfsWatch` adds ``--info-fd`` and ``--block-fd``
to the bubblewrap command: bubblewrap reports the sandbox's first process and
then waits, mounts made, until the engine has opened those mounts through
``/proc/<pid>/root`` (telling its own ``/tmp`` from the sandbox's by device and
size) and lets it go. Nothing the sandboxed program does can swap what is held:
it runs only after the mounts are open, and without the capability to mount.
When it has ended, a held mount with no free block is a ``tmpMb`` limit reached.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import time

__all__ = ["TMPFS_MOUNTS", "TmpfsWatch"]

#: The sandbox's sized tmpfs mounts (bwrap.py mounts each with ``--size``).
TMPFS_MOUNTS = ("/tmp", "/var", "/run", "/dev/shm")  # noqa: S108 - paths inside the sandbox
#: How long the handshake waits for bubblewrap before letting the sandbox run unwatched.
_HANDSHAKE_S = 10.0
_INFO_BYTES = 4096
#: How often the handshake looks whether bubblewrap has finished the sandbox's mounts.
_POLL_S = 0.001


class TmpfsWatch:
    """One confined spawn's handshake with bubblewrap and the tmpfs mounts it holds."""

    def __init__(self, size_bytes: int) -> None:
        self.size_bytes = size_bytes
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        self._fds = {
            "info_read": info_read,
            "info_write": info_write,
            "block_read": block_read,
            "block_write": block_write,
        }
        self._held: list[int] = []
        self.watched = False
        """Whether the mounts were opened (otherwise :meth:`full` knows nothing)."""

    @property
    def pass_fds(self) -> tuple[int, int]:
        """The descriptors bubblewrap inherits."""
        return (self._fds["info_write"], self._fds["block_read"])

    def bwrap_options(self) -> list[str]:
        """The bubblewrap options that report its child and make it wait."""
        info, block = self.pass_fds
        return ["--info-fd", str(info), "--block-fd", str(block)]

    def after_spawn(self, _pid: int) -> None:
        """Open the sandbox's tmpfs mounts while bubblewrap waits, then let it run.

        Whatever goes wrong (bubblewrap died, no report in time), the sandbox is
        released all the same, unwatched: a missed cause is better than a frozen trial.
        """
        self._close("info_write", "block_read")
        try:
            child = self._child_pid()
            if child is not None:
                self._hold(child)
        finally:
            with contextlib.suppress(OSError):
                os.write(self._fds["block_write"], b"1")
            self._close("block_write", "info_read")

    def _child_pid(self) -> int | None:
        """The sandbox's first process, from bubblewrap's ``--info-fd`` report."""
        deadline = time.monotonic() + _HANDSHAKE_S
        info = self._fds["info_read"]
        data = b""
        while b"}" not in data and len(data) < _INFO_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([info], [], [], left)[0]:
                return None
            chunk = os.read(info, _INFO_BYTES)
            if not chunk:
                break
            data += chunk
        try:
            pid = json.loads(data.decode("utf-8", "replace")).get("child-pid")
        except (ValueError, AttributeError):
            return None
        return pid if isinstance(pid, int) and pid > 0 else None

    def _hold(self, child: int) -> None:
        """Wait until ``child``'s root is the finished sandbox, then open its tmpfs mounts."""
        root = f"/proc/{child}/root"
        own = os.stat("/tmp").st_dev  # noqa: S108 - the engine's own /tmp, to tell it apart
        deadline = time.monotonic() + _HANDSHAKE_S
        while time.monotonic() < deadline:
            try:
                if self._is_sandbox_tmp(root + TMPFS_MOUNTS[0], own):
                    break
            except FileNotFoundError:
                pass  # between bubblewrap's two pivots: no /tmp yet
            except OSError:
                return  # bubblewrap is gone (it failed): nothing to watch
            time.sleep(_POLL_S)  # a few stat calls a millisecond while bubblewrap sets up
        else:
            return
        for mount in TMPFS_MOUNTS:
            with contextlib.suppress(OSError):
                self._held.append(os.open(root + mount, os.O_RDONLY | os.O_DIRECTORY))
        self.watched = bool(self._held)

    def _is_sandbox_tmp(self, path: str, own_device: int) -> bool:
        if os.stat(path).st_dev == own_device:
            return False
        stats = os.statvfs(path)
        return abs(stats.f_blocks * stats.f_frsize - self.size_bytes) < max(stats.f_frsize, 1)

    def full(self) -> bool:
        """Whether a held mount has no free block left (its writer got ENOSPC)."""
        for fd in self._held:
            with contextlib.suppress(OSError):
                if os.fstatvfs(fd).f_bfree == 0:
                    return True
        return False

    def close(self) -> None:
        """Let go of every descriptor (the mounts then vanish with their namespace)."""
        held, self._held = self._held, []
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._close(*list(self._fds))

    def _close(self, *names: str) -> None:
        """Close the named pipe ends, once each."""
        for name in names:
            fd = self._fds.pop(name, None)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
