"""Two concurrent trials: one tries to solve the other's task by writing into its sandbox.

The victim's agent does nothing, so its truthful verdict is ``fail``. The attacker
(its agent, or its command check) writes ``solved.txt`` into every sandbox beside
its own while the victim's session is held open on a FIFO. Under ``none`` the
victim then passes (the breach, seen); under ``os`` the victim's sandbox is not
visible and the victim fails, as it should.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from factory import make_project, scenario
from isolationkit import ATTACK_SCRIPT, release_fifo, require_bwrap, wait_for_file
from standin import StandinHost, actions

from atlante_eval import RunReport, TrialFinished, run_eval

#: Generous bound on the whole orchestration; never reached on a working machine.
_DEADLINE_S = 300


def _scenarios(runner: str) -> list[dict[str, Any]]:
    attack = ["siblings", "stolen solution\n"]
    if runner == "agent":
        attacker = scenario(
            "attacker",
            prompt=actions(
                {"write": "hello.txt", "content": "hi\n"},
                {"wait_fifo": "gate"},
                {"attack": attack[0], "args": attack[1:]},
            ),
            checks=[{"type": "file-exists", "path": "hello.txt"}],
        )
    else:
        attacker = scenario(
            "attacker",
            prompt=actions({"write": "hello.txt", "content": "hi\n"}, {"wait_fifo": "gate"}),
            checks=[
                {"type": "file-exists", "path": "hello.txt"},
                {"type": "command", "run": [sys.executable, "attack.py", "--attack", *attack]},
            ],
        )
    victim = scenario(
        "victim",
        prompt=actions({"wait_fifo": "gate"}),
        checks=[{"type": "file-exists", "path": "solved.txt"}],
    )
    return [attacker, victim]


@pytest.mark.parametrize("runner", ["agent", "check"])
@pytest.mark.parametrize("mode", ["none", "os"])
def test_sibling_sandbox_write(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: Literal["none", "os"],
    runner: str,
) -> None:
    """The victim passes only when the attacker reached its sandbox (none)."""
    if mode == "os":
        require_bwrap()
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))  # where the run root is made
    project = make_project(
        tmp_path / "project",
        scenarios=_scenarios(runner),
        fixtures={
            "eval/fixtures/app": {
                "README.md": "hello\n",
                "attack.py": ATTACK_SCRIPT.read_text(encoding="utf-8"),
            }
        },
    )
    report: list[RunReport] = []
    attacker_done = anyio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, TrialFinished) and event.scenario == "attacker":
            attacker_done.set()  # after its session and its checks: the attack is over

    async def orchestrate() -> None:
        attacker_gate = await wait_for_file("*/attacker-trial-0-*/project/gate", runs)
        victim_gate = await wait_for_file("*/victim-trial-0-*/project/gate", runs)
        await release_fifo(attacker_gate)
        await attacker_done.wait()
        await release_fifo(victim_gate)

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
                        on_event=on_event,
                    )
                )

    anyio.run(main)
    [result] = report
    attacker = result.scenarios["attacker"].trials[0]
    victim = result.scenarios["victim"].trials[0]
    assert attacker.verdict == "pass", attacker
    assert '"breached": %s' % ("true" if mode == "none" else "false") in (
        (attacker.diff or "") + str([c.evidence for c in attacker.checks or []])
    )
    if mode == "none":
        assert victim.verdict == "pass", "the attacker's write into the sibling went unseen"
        return
    assert victim.verdict == "fail", victim
    assert victim.checks is not None
    assert victim.checks[0].verdict == "fail"
