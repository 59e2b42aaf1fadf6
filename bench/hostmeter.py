"""A metering wrapper for a host executable: CPU-seconds, peak RSS and wall of its process tree.

:func:`install_meter` writes an executable Python script that stands in for a host
binary (the engine finds it like the real one). For ``run`` / ``-p`` sessions it
becomes a child subreaper, runs the real host as its child, waits for it, then ends
and reaps every descendant the host left (as the engine's sweep would), and writes
one JSON record with the ``wait4`` rusage of the whole tree. Version probes and
other invocations ``exec`` the real binary unmetered. The wrapper's own start-up is
not in the figures: ``RUSAGE_CHILDREN`` counts only the reaped descendants.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["install_meter", "read_records"]

_WRAPPER = r"""#!{python}
import ctypes, json, os, resource, signal, sys, time
REAL = {real!r}
OUT = {out!r}
args = sys.argv[1:]
if not args or args[0] not in ("run", "-p"):
    os.execv(REAL, [REAL, *args])
started = time.time()
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
pid = os.fork()
if pid == 0:
    os.execv(REAL, [REAL, *args])
status = 0
while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        continue
ended = time.time()
leftover = 0
while True:
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{{entry}}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                children.append(int(entry))
    if not children:
        break
    for child in children:
        leftover += 1
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in children:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
record = {{
    "cwd": os.getcwd(), "argv": args, "started": started, "wall_s": ended - started,
    "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "maxrss_kib": usage.ru_maxrss,
    "leftover_processes": leftover, "returncode": os.waitstatus_to_exitcode(status),
}}
with open(os.path.join(OUT, f"{{os.getpid()}}-{{time.time_ns()}}.json"), "w") as handle:
    json.dump(record, handle)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def install_meter(real: Path, bin_dir: Path, records: Path) -> Path:
    """Write a metering wrapper for ``real`` as ``bin_dir/<real name>``; return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    path = bin_dir / real.name
    path.write_text(
        _WRAPPER.format(python=sys.executable, real=str(real), out=str(records)), encoding="utf-8"
    )
    path.chmod(0o755)
    return path


def read_records(records: Path) -> list[dict[str, Any]]:
    """Return the wrapper's session records, oldest first."""
    found = [json.loads(p.read_text(encoding="utf-8")) for p in records.glob("*.json")]
    return sorted(found, key=lambda r: float(r["started"]))
