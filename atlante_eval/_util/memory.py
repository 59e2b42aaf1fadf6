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

:func:`pause_collection` holds Python's cyclic garbage collector while the CLI
starts: the imports, the models' schemas and the project's documents allocate
some 90,000 long-lived objects and almost no garbage, and the collector walked
them all again and again (about 55 ms, a tenth of ``run``'s launch, one full
collection alone about 30 ms). :func:`resume_collection` turns it back on:
``run`` when its first trial starts, every other command before its work. It
first freezes what start-up built (:func:`gc.freeze`), so later collections, a
run's included, never walk those objects again; the few start-up cycles frozen
with them (about a thousand objects) stay allocated.
"""

from __future__ import annotations

import gc
import sys

__all__ = [
    "MALLOC_ARENAS",
    "cap_malloc_arenas",
    "pause_collection",
    "release_free_memory",
    "resume_collection",
]

#: Arenas a run's process keeps: the main thread's and one for every worker thread.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h
#: Whether :func:`pause_collection` holds the collector (only what it paused is resumed).
_paused = False


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


def pause_collection() -> None:
    """Hold the cyclic garbage collector while the CLI starts (see the module's docstring)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collection() -> None:
    """Turn the collector back on after :func:`pause_collection`, past what start-up built."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
