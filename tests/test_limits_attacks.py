"""A trial that reaches for too much ends with the limit as its cause; its sibling does not notice.

Each attack runs for real in one trial's command check (2,000 forks against
``pids: 256``, a 1 GiB allocation against ``memoryMb: 256``, a 2 GiB write to
``/tmp`` against ``tmpMb: 256``) while a sibling trial, started alongside, waits
until the hog holds half its limit and then reaches for a modest amount of the
same resource in its own check and passes. The same run without the limit
shows the breach the test would otherwise miss: the hog gets everything. After
every run, no process of the hog and no control group is left.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import release_fifo, require_bwrap, wait_for_file
from limitskit import HOG, groups_left, processes_with, require_cgroups, token
from standin import StandinHost, actions

from atlante_eval import RunReport, TrialFinished, TrialResult, run_eval

#: Generous bound on one run's orchestration; never reached on a working machine.
_DEADLINE_S = 300
#: What each attack reaches for, the limit it meets, and what its sibling takes.
_ATTACKS: dict[str, tuple[int, dict[str, int], int]] = {
    "pids": (2000, {"pids": 256}, 50),
    "memory": (1024, {"memoryMb": 256}, 64),
    "tmp": (2048, {"tmpMb": 256}, 64),
}


def _project(root: Path, kind: str, marker: str, *, where: str = "check") -> Path:
    amount, _limit, modest = _ATTACKS[kind]
    hog = [sys.executable, "hog.py", kind, str(amount), marker]
    if where == "check":
        bomb = scenario(
            "bomb",
            prompt=actions({"write": "a.txt", "content": "x"}),
            checks=[{"type": "command", "run": hog}],
        )
    else:
        bomb = scenario("bomb", prompt=actions({"write": "a.txt", "content": "x"}), setup=hog)
    sibling = scenario(
        "sibling",
        prompt=actions({"wait_fifo": "gate"}),
        checks=[
            {
                "type": "command",
                "run": [sys.executable, "hog.py", kind, str(modest), marker, "--no-wait"],
            }
        ],
    )
    return make_project(
        root,
        scenarios=[bomb, sibling],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "hog.py": HOG}},
    )


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    project: Path,
    *,
    mode: str,
    limits: Mapping[str, int | str],
    coordinated: bool = True,
) -> RunReport:
    """Run ``project``: the sibling's session waits until the hog holds half its limit."""
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(runs))
    report: list[RunReport] = []
    sibling_done = anyio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, TrialFinished) and event.scenario == "sibling":
            sibling_done.set()

    async def orchestrate() -> None:
        gate = await wait_for_file("*/sibling-trial-0-*/project/gate", runs)
        if coordinated:
            ready = await wait_for_file("*/bomb-trial-0-*/project/hog-ready", runs)
        await release_fifo(gate)
        await sibling_done.wait()
        if coordinated:
            (ready.parent / "hog-release").touch()

    async def main() -> None:
        with anyio.fail_after(_DEADLINE_S):
            async with anyio.create_task_group() as group:
                group.start_soon(orchestrate)
                report.append(
                    await run_eval(
                        project,
                        host=StandinHost(),
                        isolation=mode,
                        trials=1,
                        jobs=2,
                        limits=dict(limits),
                        on_event=on_event,
                    )
                )

    anyio.run(main)
    return report[0]


def _trials(report: RunReport) -> tuple[TrialResult, TrialResult]:
    return report.scenarios["bomb"].trials[0], report.scenarios["sibling"].trials[0]


def _assert_clean(marker: str) -> None:
    assert processes_with(marker) == [], "a hog process outlived its trial"
    assert groups_left() == [], "a control group outlived its run"


def _assert_sibling_untouched(sibling: TrialResult) -> None:
    assert sibling.verdict == "pass", sibling
    assert sibling.limits_reached is None
    assert sibling.checks is not None
    assert '"error": null' in sibling.checks[0].evidence["output"]


_CASES = [
    ("pids", "none"),
    ("pids", "os"),
    ("memory", "none"),
    ("memory", "os"),
    ("tmp", "os"),
]


@pytest.mark.parametrize(("kind", "mode"), _CASES)
def test_a_hog_ends_its_trial_with_the_limit_as_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    """The hog's check fails with the limit leading its error; the sibling passes."""
    require_cgroups()
    if mode == "os":
        require_bwrap()
    marker = token()
    _amount, limit, _modest = _ATTACKS[kind]
    report = _run(
        tmp_path, monkeypatch, _project(tmp_path / "p", kind, marker), mode=mode, limits=limit
    )
    bomb, sibling = _trials(report)
    value = next(iter(limit.values()))
    unit = " MB" if kind != "pids" else ""
    cause = f"{kind} limit {value}{unit} reached (checks)"
    assert bomb.verdict == "fail", bomb
    assert bomb.error is not None
    assert bomb.error.startswith(cause), bomb.error
    assert [(r.phase, r.limit, r.value) for r in bomb.limits_reached or []] == [
        ("check", kind, value)
    ]
    assert bomb.checks is not None
    output = bomb.checks[0].evidence["output"]
    if kind == "pids":
        assert "Resource temporarily unavailable" in output, output
    elif kind == "tmp":
        assert "No space left on device" in output, output
    else:
        # Killed by SIGKILL: no exit status directly, 128 + 9 through bubblewrap's init.
        assert bomb.checks[0].evidence["exit"] in (None, 137), "the OOM killer ends the hog"
    _assert_sibling_untouched(sibling)
    record = report.meta.limits
    assert record is not None
    assert record.cgroup in ("v1", "v2")
    _assert_clean(marker)


@pytest.mark.parametrize(("kind", "mode"), [("pids", "none"), ("memory", "none"), ("tmp", "os")])
def test_without_the_limit_the_hog_gets_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    """The weakened run: with the limit off the same hog takes all it asked for."""
    if mode == "os":
        require_bwrap()
    marker = token()
    amount, limit, _modest = _ATTACKS[kind]
    off = dict.fromkeys(limit, "unlimited")
    report = _run(
        tmp_path, monkeypatch, _project(tmp_path / "p", kind, marker), mode=mode, limits=off
    )
    bomb, sibling = _trials(report)
    assert bomb.verdict == "pass", bomb
    assert bomb.checks is not None
    assert f'"done": {amount}' in bomb.checks[0].evidence["output"]
    assert bomb.limits_reached is None
    assert sibling.verdict == "pass"
    _assert_clean(marker)


def test_a_setup_that_forks_too_much_is_an_infra_error_with_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Setup under the same limits: its trial cannot start, and says which limit stopped it."""
    require_cgroups()
    marker = token()
    project = _project(tmp_path / "p", "pids", marker, where="setup")
    report = _run(tmp_path, monkeypatch, project, mode="none", limits={"pids": 256})
    bomb, sibling = _trials(report)
    assert bomb.verdict == "infra-error", bomb
    assert bomb.error is not None
    assert bomb.error.startswith("pids limit 256 reached (setup): setup failed: exit 1"), bomb.error
    _assert_sibling_untouched(sibling)
    _assert_clean(marker)


@pytest.mark.parametrize("mode", ["none", "os"])
def test_a_session_the_memory_limit_ends_is_budget_exceeded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Literal["none", "os"]
) -> None:
    """The host itself grows past memoryMb: the kernel kills it, like a token budget would."""
    require_cgroups()
    if mode == "os":
        require_bwrap()
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "bomb", prompt=actions({"allocate_mb": 1024}, {"write": "a.txt", "content": "x"})
            ),
            scenario(
                "sibling", prompt=actions({"allocate_mb": 64}, {"write": "a.txt", "content": "x"})
            ),
        ],
    )
    reports: list[RunReport] = []

    async def main() -> None:
        reports.append(
            await run_eval(
                project,
                host=StandinHost(),
                isolation=mode,
                trials=1,
                jobs=2,
                limits={"memoryMb": 256},
            )
        )

    anyio.run(main)
    bomb, sibling = _trials(reports[0])
    assert bomb.verdict == "budget-exceeded", bomb
    assert bomb.error is not None
    assert bomb.error.startswith("memory limit 256 MB reached (session): standin run exited")
    assert bomb.checks is None
    assert sibling.verdict == "pass", sibling
    assert groups_left() == []
