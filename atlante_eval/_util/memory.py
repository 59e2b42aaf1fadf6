"""The process's memory allocator: fewer arenas for a run, free pages handed back.

glibc's ``malloc`` gives every thread that allocates its own arena (up to eight
per CPU), and an arena's freed pages stay resident. A run's worker threads (file
copies, hashing, process starts, tree walks: up to ``--jobs`` trials at once)
each allocate a little, so on a 48-trial run at ``--jobs 16`` the arenas alone
held about 4.5 MiB of the peak resident memory. Python's own small objects do not
use them, and the interpreter lock already serialises most allocation, so two
arenas cost no measurable time. Only the CLI calls this: a library does not
change the allocator of the process that imported it.

:func:`release_free_memory` (glibc's ``malloc_trim``) returns the free pages of
every arena to the system; the run calls it after its last session, before it
renders ``report.html``, so that the page's modules and templates reuse the
memory the sessions left instead of adding to the peak (about 2 MiB on the
48-trial run; well under a millisecond).
"""

from __future__ import annotations

import sys

__all__ = ["MALLOC_ARENAS", "cap_malloc_arenas", "release_free_memory"]

#: Arenas a run's process keeps: the main thread's and one for every worker thread.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas (before threads start); False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt, nothing to cap
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))


def release_free_memory() -> None:
    """Hand the allocator's free pages back to the system (glibc's ``malloc_trim``)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = (ctypes.c_size_t,)
    trim(0)
