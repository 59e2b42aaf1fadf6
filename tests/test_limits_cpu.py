"""A CPU limit caps a spinner's share: measured against an unlimited spinner in the same window.

Two spinners start on the same signal and spin for the same stretch of their own
wall time: one in a trial's command check under ``cpus: 0.2``, one in a group of
its own without a quota. The kernel lets a group with a 20 ms quota per 100 ms
period run at most a fifth of a CPU per period, so the limited spinner's CPU
time over its window is bounded by that ratio (plus one period), its group
records throttled periods, and the unlimited spinner in the same window gets
more. On a shared machine a spinner's share also depends on everyone else's
load, so both groups get the highest scheduling weight for the test: then
only the quota can hold the limited one back. Kept short: one second of spinning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario
from limitskit import SPIN, require_cgroups
from standin import StandinHost, actions

from atlante_eval import RunReport, run_eval
from atlante_eval.isolation import hierarchies
from atlante_eval.isolation.cgroups import GroupLimits, TrialGroup
from atlante_eval.isolation.hierarchies import find_hierarchy
from atlante_eval.isolation.limits import ResourceLimits, TrialLimits

_DEADLINE_S = 300
_WINDOW_S = 1.0
_CPUS = 0.2
#: One CFS period: the most a group can run past its quota within a window.
_PERIOD_S = 0.1
#: The scheduling weight files (v1, v2) and their highest values.
_WEIGHTS = {"cpu.shares": "262144", "cpu.weight": "10000"}


def _heaviest(group: TrialGroup) -> TrialGroup:
    """Give ``group`` (and its run group) the highest CPU weight: load cannot starve it."""
    for directory in group.dirs:
        for level in (directory.parent, directory):
            for name, value in _WEIGHTS.items():
                if (level / name).exists():
                    (level / name).write_text(value)
    return group


async def _sandbox_file(pattern: str, root: Path) -> Path:
    while True:
        found = [Path(p) async for p in anyio.Path(root).glob(pattern)]
        if found:
            return found[0]
        await anyio.sleep(0.01)


def test_a_cpu_limit_caps_a_spinner_against_an_unlimited_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cpus 0.2: at most a fifth of the window in CPU time, throttled, below the free spinner."""
    require_cgroups()
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    for kind in (hierarchies.V1Hierarchy, hierarchies.V2Hierarchy):
        create = kind.create
        monkeypatch.setattr(
            kind, "create", lambda self, name, limits, c=create: _heaviest(c(self, name, limits))
        )
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "spinner",
                prompt=actions({"write": "a.txt", "content": "x"}),
                checks=[{"type": "command", "run": [sys.executable, "spin.py", str(_WINDOW_S)]}],
            )
        ],
        fixtures={"eval/fixtures/app": {"README.md": "hi\n", "spin.py": SPIN}},
    )
    free_dir = tmp_path / "free"
    free_dir.mkdir()
    (free_dir / "spin.py").write_text(SPIN, encoding="utf-8")
    hierarchy = find_hierarchy(frozenset({"cpu"}))
    hierarchy.open()
    free_group = hierarchy.create("free-spinner", GroupLimits())
    plan = TrialLimits(ResourceLimits(), free_group).plan(
        "check",
        [sys.executable, "spin.py", str(_WINDOW_S)],
        free_dir,
        dict(os.environ),
        confined=False,
    )
    free = subprocess.Popen(plan.argv, cwd=free_dir, env=plan.env, stdout=subprocess.PIPE)
    reports: list[RunReport] = []

    async def start_together() -> None:
        limited = await _sandbox_file("*/spinner-trial-0-*/project/spin-ready", runs)
        await _sandbox_file("spin-ready", free_dir)
        (free_dir / "go").touch()
        (limited.parent / "go").touch()

    async def main() -> None:
        with anyio.fail_after(_DEADLINE_S):
            async with anyio.create_task_group() as group:
                group.start_soon(start_together)
                reports.append(
                    await run_eval(project, host=StandinHost(), trials=1, limits={"cpus": _CPUS})
                )

    try:
        anyio.run(main)
        free_out, _ = free.communicate(timeout=_DEADLINE_S)
    finally:
        free.kill()
        free.wait()
        free_group.remove()
        hierarchy.close()
    [trial] = reports[0].scenarios["spinner"].trials
    assert trial.verdict == "pass", trial
    assert trial.checks is not None
    limited = json.loads(trial.checks[0].evidence["output"].splitlines()[-1])
    unlimited = json.loads(free_out.decode().splitlines()[-1])
    assert limited["throttled"] > 0, limited
    assert limited["cpu"] <= _CPUS * limited["wall"] + _PERIOD_S, limited
    assert unlimited["throttled"] == 0, unlimited
    assert unlimited["cpu"] > 2 * limited["cpu"], (unlimited, limited)
    assert reports[0].meta.limits is not None
    assert reports[0].meta.limits.cpus == _CPUS
