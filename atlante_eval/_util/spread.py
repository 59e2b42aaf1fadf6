"""Tell the file system that a directory's subdirectories are unrelated trees.

ext2, ext3 and ext4 place a new directory near its parent unless the parent is
marked as the top of directory hierarchies (``chattr +T``, ``FS_TOPDIR_FL``):
then their Orlov allocator spreads its subdirectories over the block groups with
the most free inodes and blocks. Each trial's directory under a run's root is
such an unrelated tree. Spread apart, a trial's files are allocated in block
groups that the removal of earlier trials has not filled with recently freed
inodes, which ext4 without a journal walks past one by one for every new file
(docs/performance.md, "Round 4").

A hint only: on any other file system, or when the kernel refuses it, the
directory stays as it was and nothing else changes.
"""

from __future__ import annotations

import array
import os
import sys
from pathlib import Path

__all__ = ["spread_subdirectories"]

# <linux/fs.h>: the ioctls take a pointer to an int, whatever their encoded size.
_FS_IOC_GETFLAGS = 0x80086601
_FS_IOC_SETFLAGS = 0x40086602
_FS_TOPDIR_FL = 0x00020000


def spread_subdirectories(path: Path) -> bool:
    """Mark ``path`` (a directory this process owns) as a top of directory hierarchies.

    Returns whether the mark is set (it was already, or is now); never raises.
    """
    if not sys.platform.startswith("linux"):
        return False
    import fcntl  # Linux only, like the ioctls

    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        current = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, current, True)
        if current[0] & _FS_TOPDIR_FL:
            return True
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, array.array("i", [current[0] | _FS_TOPDIR_FL]))
        return True
    except OSError:  # not ext2/3/4 (ENOTTY, EOPNOTSUPP, EINVAL), or not allowed
        return False
    finally:
        os.close(fd)
