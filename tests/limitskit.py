"""Helpers for the resource-limit tests: a resource hog, and what a run may leave behind.

:data:`HOG` is a fixture program (``hog.py KIND AMOUNT TOKEN [--no-wait]``) that
reaches for ``AMOUNT`` of a resource: ``pids`` (forked processes, each blocked on
a pipe), ``memory`` (MiB held) or ``tmp`` (MiB written to ``/tmp``). Once it holds
:data:`READY_AT` of it, it creates ``hog-ready`` in its working directory and, unless
``--no-wait``, waits for ``hog-release`` (a test's go signal) before reaching for
the rest; so a test can run a sibling while the hog holds what it got. It prints
one JSON line ``{"kind", "done", "error"}`` and exits 1 when it was stopped short.
``TOKEN`` marks every process it starts (their command line), so a test can tell
whether one survived.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from atlante_eval.isolation.cgroups import CgroupUnavailable
from atlante_eval.isolation.hierarchies import V1Hierarchy, V2Hierarchy, find_hierarchy

#: How much of its resource a hog holds before it says it is ready (below every limit).
READY_AT = 128

HOG = """\
import json, os, sys, time

kind, amount, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
wait = "--no-wait" not in sys.argv
ready_at = min(amount, 128)


def ready():
    open("hog-ready", "w").close()
    deadline = time.monotonic() + 300  # a safety net: the test releases it long before
    while wait and not os.path.exists("hog-release") and time.monotonic() < deadline:
        time.sleep(0.01)


done, error = 0, None
if kind == "pids":
    gate_read, gate_write = os.pipe()
    try:
        for _ in range(amount):
            pid = os.fork()
            if pid == 0:
                os.close(gate_write)
                os.read(gate_read, 1)
                os._exit(0)
            done += 1
    except OSError as exc:
        error = str(exc)
    ready()
    os.close(gate_write)
    for _ in range(done):
        os.wait()
elif kind == "memory":
    held = []
    for _ in range(amount // 16):
        held.append(b"x" * (16 << 20))
        done += 16
        if done == ready_at:
            ready()
elif kind == "tmp":
    chunk = b"x" * (1 << 20)
    try:
        with open("/tmp/hog", "wb") as handle:
            for _ in range(amount):
                handle.write(chunk)
                handle.flush()
                done += 1
                if done == ready_at:
                    ready()
    except OSError as exc:
        error = str(exc)
print(json.dumps({"kind": kind, "done": done, "error": error}))
sys.exit(0 if error is None else 1)
"""


def token() -> str:
    """A fresh marker for the command lines of one test's hogs."""
    return f"hog-{secrets.token_hex(6)}"


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() not in (entry / "cmdline").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def own_groups() -> list[Path]:
    """This process's own group in each hierarchy limits use (to look for leftovers)."""
    try:
        hierarchy = find_hierarchy(frozenset({"memory", "pids", "cpu"}))
    except CgroupUnavailable:
        return []
    if isinstance(hierarchy, V1Hierarchy):
        return list(hierarchy.owns)
    assert isinstance(hierarchy, V2Hierarchy)
    return [hierarchy.own]


def groups_left() -> list[str]:
    """Run groups this process created that still exist (a run must remove its own)."""
    mine = f"atlante-eval-{os.getpid()}-"
    return [str(p) for own in own_groups() for p in own.iterdir() if p.name.startswith(mine)]


def require_cgroups() -> None:
    """Skip where this user cannot create groups; fail in CI, whose machines can."""
    try:
        find_hierarchy(frozenset({"memory", "pids", "cpu"}))
    except CgroupUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI machines run the limit tests on real cgroups: {exc}")
        pytest.skip(f"no control groups here: {exc}")


#: A fixture program: ``spin.py SECONDS`` says ``spin-ready``, waits for ``go``, spins
#: SECONDS of wall time, then prints the CPU time it got and its group's throttling count.
SPIN = """\
import json, os, sys, time


def cpu_stat():
    paths = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\\n").split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                paths[name] = path
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, right = line.split(" - ", 1)
            fields, (fstype, _source, options) = left.split(), right.split()[:3]
            key = "cpu" if fstype == "cgroup" and "cpu" in options.split(",") else None
            key = "unified" if fstype == "cgroup2" and key is None else key
            if key and key in paths:
                below = os.path.relpath(paths[key], fields[3])
                stat = os.path.join(fields[4], below, "cpu.stat")
                if os.path.exists(stat) and (key == "cpu" or "cpu" in open(
                        os.path.join(fields[4], below, "cgroup.controllers")).read().split()):
                    with open(stat) as stats:
                        return dict(line.split() for line in stats)
    return {}


open("spin-ready", "w").close()
while not os.path.exists("go"):
    time.sleep(0.005)
wall_start, cpu_start = time.monotonic(), time.process_time()
while time.monotonic() - wall_start < float(sys.argv[1]):
    pass
cpu, wall = time.process_time() - cpu_start, time.monotonic() - wall_start
print(json.dumps({"cpu": cpu, "wall": wall, "throttled": int(cpu_stat().get("nr_throttled", -1))}))
"""
