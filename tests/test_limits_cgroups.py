"""The control-group layer of per-trial limits: discovery, the v2 and v1 protocols, cleanup.

cgroup v1 is what this machine (and CI) has for ``memory``, ``pids`` and ``cpu``,
so those tests create, limit, join and remove real groups. The v2 protocol is
pinned twice: against a simulated kernel that enforces v2's rules
(``tests/cgroupfake.py``), and against the real unified hierarchy mounted in a
private mount namespace, where groups are created, joined by real processes,
killed and removed (this machine's v2 has none of the three controllers, which
also makes the real choice of v1 over v2 testable).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cgroupfake import FakeV2Kernel

from atlante_eval.isolation.cgroups import (
    CgroupFS,
    CgroupUnavailable,
    Controller,
    GroupLimits,
    TrialGroup,
    parse_mounts,
)
from atlante_eval.isolation.hierarchies import (
    V1Hierarchy,
    V2Hierarchy,
    find_hierarchy,
    sweep_stale,
)
from atlante_eval.isolation.limits import ResourceLimits, TrialLimits

MiB = 1024 * 1024
ALL: frozenset[Controller] = frozenset({"memory", "pids", "cpu"})
LIMITS = GroupLimits(memory_bytes=256 * MiB, pids=256, cpu_quota_us=20_000)

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = """\
9:name=systemd:/user.slice
8:pids:/user.slice/user-1000.slice
4:memory:/process_api/abc
2:cpu,cpuacct:/
0::/user.slice/session-2.scope
"""


def test_mounts_of_a_hybrid_machine_name_our_own_group_in_each_hierarchy() -> None:
    """v1 controllers (one co-mounted pair) and the unified mount resolve to our groups."""
    mounts = {
        (m.version, ",".join(sorted(m.controllers))): m.own
        for m in parse_mounts(HYBRID_MOUNTINFO, HYBRID_CGROUP)
    }
    assert mounts == {
        ("v1", "cpu"): Path("/sys/fs/cgroup/cpu,cpuacct"),
        ("v1", "memory"): Path("/sys/fs/cgroup/memory/process_api/abc"),
        ("v1", "pids"): Path("/sys/fs/cgroup/pids/user.slice/user-1000.slice"),
        ("v2", ""): Path("/sys/fs/cgroup/unified/user.slice/session-2.scope"),
    }


def test_a_mount_whose_root_does_not_hold_our_group_is_skipped() -> None:
    """A bind mount of another subtree (or a foreign cgroup namespace) is not ours to use."""
    mountinfo = (
        "41 31 0:38 /other /mnt/cg rw - cgroup2 cgroup2 rw\n"
        "42 31 0:38 /mine /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    )
    [mount] = parse_mounts(mountinfo, "0::/mine/job\n")
    assert mount.own == Path("/sys/fs/cgroup/job")


# --- cgroup v2 against the simulated kernel ------------------------------------------


def _fake(tmp_path: Path, **kwargs: Any) -> FakeV2Kernel:
    return FakeV2Kernel(tmp_path / "cg", **kwargs)


def test_v2_in_the_root_writes_every_limit_and_reads_every_event(tmp_path: Path) -> None:
    """A trial group gets memory.max (no swap), pids.max and cpu.max; events become counters."""
    kernel = _fake(tmp_path)
    hierarchy = find_hierarchy(ALL, kernel)
    assert isinstance(hierarchy, V2Hierarchy)
    hierarchy.open()
    group = hierarchy.create("trial-1", LIMITS)
    [directory] = group.dirs
    values = kernel.groups[directory].values
    assert values["memory.max"] == str(256 * MiB)
    assert values["memory.swap.max"] == "0"
    assert values["pids.max"] == "256"
    assert values["cpu.max"] == "20000 100000"
    assert group.procs_files == (directory / "cgroup.procs",)
    values["memory.events"] = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n"
    values["pids.events"] = "max 3\n"
    counters = group.counters()
    assert (counters.oom_kills, counters.memory_max, counters.pids_max) == (1, 12, 3)
    assert group.remove() is None
    assert hierarchy.close() is None
    assert set(kernel.groups) == {kernel.root}, "the run left a group behind"


def test_v2_moves_the_engine_into_a_leaf_and_back(tmp_path: Path) -> None:
    """Alone in a delegated group, the engine leaves it for a leaf so its children get
    controllers (the no-internal-process rule), and is back where it was afterwards."""
    kernel = _fake(tmp_path, own="/user.slice/atlante.scope")
    hierarchy = find_hierarchy(ALL, kernel)
    assert isinstance(hierarchy, V2Hierarchy)
    hierarchy.open()
    engine_group = kernel.group_of(os.getpid())
    assert engine_group is not None
    assert engine_group.parent == kernel.own
    assert engine_group.name.startswith("atlante-eval-engine")
    assert kernel.groups[kernel.own].subtree == {"cpu", "memory", "pids"}
    group = hierarchy.create("trial-1", LIMITS)
    kernel.write(group.procs_files[0], "4242")  # a trial's process joins
    assert group.remove() is None
    assert 4242 in kernel.killed
    assert hierarchy.close() is None
    assert kernel.group_of(os.getpid()) == kernel.own
    assert kernel.groups[kernel.own].subtree == set()
    assert set(kernel.groups) == {kernel.root, kernel.own.parent, kernel.own}


def test_v2_refuses_a_group_shared_with_other_processes(tmp_path: Path) -> None:
    """The engine never moves processes it does not own: the group is unusable, and says why."""
    kernel = _fake(tmp_path, own="/user.slice/session-2.scope", others=(111, 222))
    hierarchy = find_hierarchy(ALL, kernel)
    assert isinstance(hierarchy, V2Hierarchy)
    with pytest.raises(CgroupUnavailable, match="holds 2 other process"):
        hierarchy.open()
    assert kernel.group_of(os.getpid()) == kernel.own
    assert set(kernel.groups) == {kernel.root, kernel.own.parent, kernel.own}


def test_v2_without_the_controllers_or_write_access_is_unavailable(tmp_path: Path) -> None:
    """Missing controllers and a read-only group are named; there is no v1 to fall back to."""
    with pytest.raises(CgroupUnavailable) as missing:
        find_hierarchy(ALL, _fake(tmp_path / "a", controllers=("cpu",)))
    assert "memory, pids are not delegated" in str(missing.value)
    assert "no cpu hierarchy is mounted" in str(missing.value)
    with pytest.raises(CgroupUnavailable, match="not writable by this user"):
        find_hierarchy(ALL, _fake(tmp_path / "b", writable=False))


def test_v2_remove_waits_for_the_group_to_empty_and_kills_stragglers(tmp_path: Path) -> None:
    """Without cgroup.kill (older kernels), every member is killed one by one, then removed."""
    kernel = _fake(tmp_path)
    hierarchy = find_hierarchy(ALL, kernel)
    hierarchy.open()
    group = hierarchy.create("trial-1", GroupLimits(pids=64))
    for pid in (7, 8, 9):
        kernel.write(group.procs_files[0], str(pid))

    class NoKillFile(FakeV2Kernel):
        def exists(self, path: Path) -> bool:
            return path.name != "cgroup.kill" and super().exists(path)

    kernel.__class__ = NoKillFile
    assert group.remove() is None
    assert sorted(kernel.killed) == [7, 8, 9]
    assert hierarchy.close() is None


# --- cgroup v1, for real ---------------------------------------------------------------


def _real_v1() -> V1Hierarchy:
    if os.geteuid() != 0 and not os.environ.get("CI"):
        pytest.skip("creating v1 groups needs root here")
    try:
        hierarchy = find_hierarchy(ALL)
    except CgroupUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI machines have cgroup v1 memory, pids and cpu: {exc}")
        pytest.skip(str(exc))
    if not isinstance(hierarchy, V1Hierarchy):
        pytest.skip("this machine has a usable cgroup v2 subtree: v1 is not used")
    return hierarchy


def _leftovers(hierarchy: V1Hierarchy) -> list[str]:
    """This process's run groups still in the hierarchies (other runs may share them)."""
    mine = f"atlante-eval-{os.getpid()}-"
    return [str(p) for own in hierarchy.owns for p in own.iterdir() if p.name.startswith(mine)]


def test_this_machine_picks_v1_because_its_unified_hierarchy_lacks_the_controllers() -> None:
    """The real choice: v2 is tried first and its missing controllers are why v1 is used."""
    hierarchy = _real_v1()
    controllers = set(Path("/sys/fs/cgroup/unified/cgroup.controllers").read_text().split())
    assert not controllers & ALL
    assert len(hierarchy.owns) == 3  # memory, pids and cpu each in their own hierarchy here


def test_v1_groups_carry_the_limits_and_vanish_with_their_processes() -> None:
    """A real group per hierarchy: limits written, a joined process (and its daemon) killed."""
    hierarchy = _real_v1()
    hierarchy.open()
    try:
        group = hierarchy.create("trial-test", LIMITS)
        memory, pids, cpu = (
            next(d for d in group.dirs if (d / name).exists())
            for name in ("memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us")
        )
        assert (memory / "memory.limit_in_bytes").read_text().strip() == str(256 * MiB)
        assert (pids / "pids.max").read_text().strip() == "256"
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "20000"
        # A process that joins, then leaves a daemon in its own session behind.
        script = "import os, time\nif os.fork() == 0:\n    os.setsid(); time.sleep(600)\n"
        plan = TrialLimits(ResourceLimits(pids=256), group).plan(
            "check", [sys.executable, "-c", script], Path.cwd(), dict(os.environ), confined=False
        )
        joined = subprocess.run(plan.argv, env=plan.env, check=False)
        assert joined.returncode == 0
        stray = group.members()
        assert len(stray) == 1, "the daemon should still be running in the group"
        assert group.remove() is None
        assert not Path(f"/proc/{stray[0]}").exists() or _zombie(stray[0])
        assert not any(d.exists() for d in group.dirs)
    finally:
        assert hierarchy.close() is None
    assert _leftovers(hierarchy) == []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- cgroup v2, for real, in a private mount namespace ----------------------------------

_V2_SCRIPT = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from pathlib import Path
    from atlante_eval.isolation.cgroups import GroupLimits
    from atlante_eval.isolation.hierarchies import V2Hierarchy

    mount = Path(sys.argv[1])
    own = mount / sys.argv[2]


    def running(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False


    def tidy():  # the hierarchy is the machine's: leave nothing behind, whatever happened
        (mount / "cgroup.procs").write_text(str(os.getpid()))
        if own.exists():
            for path in sorted(own.rglob("*"), key=lambda p: -len(p.parts)):
                if path.is_dir():
                    path.rmdir()
            own.rmdir()


    def main():
        own.mkdir()
        (own / "cgroup.procs").write_text(str(os.getpid()))  # the engine in a group of its own
        hierarchy = V2Hierarchy(own=own, controllers=frozenset())
        hierarchy.open()
        run = [p.name for p in own.iterdir() if p.name.startswith("atlante-eval-")]
        group = hierarchy.create("trial-real", GroupLimits())
        files = [str(f) for f in group.procs_files]
        child = subprocess.Popen(
            ["/bin/sh", "-c", 'echo $$ > "$1"; shift; exec "$@"', "join", *files,
             sys.executable, "-c",
             "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\ntime.sleep(600)"],
        )
        while len(group.members()) < 2:
            pass
        members = group.members()
        populated = (group.dirs[0] / "cgroup.events").read_text()
        problem = group.remove()
        child.wait()
        closed = hierarchy.close()
        left = sorted(p.name for p in own.iterdir() if p.is_dir())
        return {"run": run, "members": members, "child": child.pid, "populated": populated,
                "problem": problem, "closed": closed, "left": left,
                "alive": [m for m in members if running(m)]}


    try:
        print(json.dumps(main()))
    finally:
        tidy()
    """
)


def test_v2_groups_on_a_real_unified_hierarchy_are_joined_killed_and_removed(
    tmp_path: Path,
) -> None:
    """Real cgroup2 mounted in a private mount namespace: a run group and a trial group are
    made below the engine's own group, two real processes join (one a setsid daemon), and
    removal kills both through cgroup.kill and leaves no group behind."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting cgroup2 in a private mount namespace needs root and unshare")
    mount = tmp_path / "cgroup2"
    mount.mkdir()
    command = (
        f'mount -t cgroup2 none "{mount}" && exec "{sys.executable}" -c "$0" '
        f'"{mount}" atlante-test-{os.getpid()}'
    )
    result = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", command, _V2_SCRIPT],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    if result.returncode != 0 and "mount" in result.stderr and not os.environ.get("CI"):
        pytest.skip(f"cannot mount cgroup2 here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert len(outcome["run"]) == 1
    assert outcome["run"][0].startswith("atlante-eval-")
    assert outcome["child"] in outcome["members"]
    assert len(outcome["members"]) == 2
    assert "populated 1" in outcome["populated"]
    assert outcome["problem"] is None
    assert outcome["closed"] is None
    assert outcome["left"] == [], "a group was left behind"
    assert outcome["alive"] == [], "a trial's process survived the group's removal"


def test_trial_group_protocol_reads_nothing_from_an_unlimited_group(tmp_path: Path) -> None:
    """Counters of a group without controllers are zero, never an error."""
    kernel = _fake(tmp_path, controllers=())
    group = TrialGroup("v2", (kernel.root,), kernel)
    assert group.counters().pids_max == 0
    assert group.cpu_stat() == {}
    assert isinstance(kernel, CgroupFS)


def test_groups_of_an_engine_killed_outright_are_removed_by_the_next_run() -> None:
    """SIGKILL of the engine itself leaves its (empty) groups; the next run removes them."""
    hierarchy = _real_v1()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    stale = [own / f"atlante-eval-{dead.stdout.strip()}-0000" for own in hierarchy.owns]
    for group in stale:
        group.mkdir()
        (group / "trial-abc").mkdir()
    live = [own / f"atlante-eval-{os.getpid()}-live" for own in hierarchy.owns]
    for group in live:
        group.mkdir()
    try:
        hierarchy.open()
        assert hierarchy.close() is None
        assert not any(group.exists() for group in stale), "a dead engine's groups stayed"
        assert all(group.exists() for group in live), "a live engine's groups were touched"
    finally:
        for group in [*stale, *live]:
            for child in (group / "trial-abc", group):
                if child.exists():
                    child.rmdir()


def test_v2_sweeps_a_dead_engines_leaf_and_run_group(tmp_path: Path) -> None:
    """The same under v2: the dead engine's leaf and run group go, a live one's stay."""
    kernel = _fake(tmp_path)
    for name in ("atlante-eval-engine-999999999", "atlante-eval-999999999-ab", "other"):
        kernel.mkdir(kernel.own / name)
    kernel.mkdir(kernel.own / "atlante-eval-999999999-ab" / "trial-1")
    assert sweep_stale(kernel, kernel.own) == 2
    assert sorted(p.name for p in kernel.groups if p.parent == kernel.own) == ["other"]
