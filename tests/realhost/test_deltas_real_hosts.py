"""Behaviour deltas on transcripts of the real ``claude`` and ``opencode`` CLIs.

Per host, two runs of the same scenario against the scripted mock model: BASE's
model writes a file, runs one shell command, loads a skill and delegates to a
subagent (which, on Claude Code, runs its own shell command); HEAD's skips the
skill and runs three shell commands. The scenario checks that the skill was used,
so HEAD regresses; the deltas must rank exactly those two changes first and name
them in the probable cause, the typical paths must part at the skill, and
``show --diff`` must align the two trials the same way.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from typer.testing import CliRunner

from atlante_eval import BehaviourDeltas, behaviour_deltas, run_eval
from atlante_eval.cli import app
from atlante_eval.stats.proportions import fisher_exact_two_sided

from .environment import HOSTS, leftovers, real_host_environment
from .fixtures import require_hosts
from .mock_model import CallTool, MockModelServer, Reply, RunBash, Script, WriteFile

pytestmark = pytest.mark.realhost

TRIALS = 4
SKILL = "python-tests"
SKILL_TEXT = "---\nname: python-tests\ndescription: Run the Python tests.\n---\nRun pytest.\n"
AGENT = {"claude-code": "general-purpose", "opencode": "general"}
SHELL = {"claude-code": "Bash", "opencode": "bash"}
SUB_PROMPT = "Check hello.txt. [script:sub]"


def _delegate(host: str) -> dict[str, Any]:
    return {"description": "Check", "prompt": SUB_PROMPT, "subagent_type": AGENT[host]}


def scripts() -> list[Script]:
    """BASE's conversation, HEAD's (no skill, three shell commands), and the subagent's."""
    delegate = CallTool(
        claude=("Agent", _delegate("claude-code")), opencode=("task", _delegate("opencode"))
    )
    load = CallTool(claude=("Skill", {"skill": SKILL}), opencode=("skill", {"name": SKILL}))
    return [
        Script(
            "base",
            [
                WriteFile("hello.txt", "hello\n"),
                RunBash("cat hello.txt"),
                load,
                delegate,
                Reply("all done"),
            ],
        ),
        Script(
            "head",
            [
                WriteFile("hello.txt", "hello\n"),
                RunBash("cat hello.txt"),
                RunBash("ls"),
                RunBash("wc -l hello.txt"),
                delegate,
                Reply("all done"),
            ],
        ),
        Script("sub", [RunBash("echo nested", description="Say nested"), Reply("sub done")]),
    ]


@dataclass
class Compared:
    """One host's two runs and their deltas."""

    host: str
    base: Path
    head: Path
    deltas: BehaviourDeltas


def _project(root: Path, host: str, script: str) -> Path:
    skill_dir = ".claude/skills" if host == "claude-code" else ".opencode/skills"
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    checks = [
        {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
        {"type": "skill-used", "skill": SKILL},
    ]
    return make_project(
        root,
        host=host,
        scenarios=[
            scenario(
                "s",
                prompt=f"Do it. [script:{script}]",
                checks=checks,
                **{"$schema": EXTENDED_SCENARIO_URI},
            )
        ],
        fixtures={
            "eval/fixtures/app": {"README.md": "hi\n", f"{skill_dir}/{SKILL}/SKILL.md": SKILL_TEXT}
        },
        eval_extra={"model": model, "budget": {"trials": TRIALS, "timeoutMs": 120_000}},
    )


def _run(tmp: Path, host: str, side: str, pass_env: list[str]) -> Path:
    project = _project(tmp / side, host, side)
    out = tmp / f"{side}-out"
    anyio.run(lambda: run_eval(project, jobs=2, out=out, pass_env=pass_env))
    [run_dir] = [p for p in out.iterdir() if (p / "report.json").exists()]
    return run_dir


@pytest.fixture(scope="module", params=HOSTS)
def compared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compared:
    host: str = request.param
    bin_dir = require_hosts()
    tmp = tmp_path_factory.mktemp(f"deltas-{host}")
    marker = uuid.uuid4().hex
    with (
        MockModelServer(scripts()) as mock,
        real_host_environment(host, mock, tmp, bin_dir=bin_dir, marker=marker) as pass_env,
    ):
        runs = {side: _run(tmp, host, side, pass_env) for side in ("base", "head")}
        assert leftovers(marker) == []
    return Compared(host, runs["base"], runs["head"], behaviour_deltas(runs["base"], runs["head"]))


def test_the_dropped_skill_and_extra_shell_calls_rank_first_and_make_the_cause(
    compared: Compared,
) -> None:
    """On real transcripts: exactly the skill and the shell tool, then the probable cause."""
    s = compared.deltas.scenarios["s"]
    assert (s.base.transcripts, s.head.transcripts) == (TRIALS, TRIALS), s.notes
    assert s.verdict == "regressed"
    assert s.usage is not None
    top = s.usage[:2]
    assert [(u.item, u.name) for u in top] == [("skill", SKILL), ("tool", SHELL[compared.host])]
    skill, shell = top
    assert (skill.base_used, skill.head_used) == (TRIALS, 0)
    assert skill.summary == f"skill {SKILL}: no longer used (4/4 → 0/4)"
    nested = 1 if compared.host == "claude-code" else 0  # the subagent's own shell command
    assert (shell.base_calls, shell.head_calls) == (1 + nested, 3 + nested)
    for row in top:
        assert row.p_value == pytest.approx(fisher_exact_two_sided(4, 4, 0, 4))
    assert all(u.p_value == 1.0 for u in s.usage[2:]), [u.summary for u in s.usage]
    assert s.probable_cause == (
        f"regressed: {skill.summary}; {shell.summary}; check 1 skill-used now fails 4/4 (BASE 0/4)"
    )


def test_the_real_typical_paths_part_at_the_skill(compared: Compared) -> None:
    """Every trial follows its side's path; aligned, the skill is where they part."""
    paths = compared.deltas.scenarios["s"].paths
    assert paths is not None
    assert (paths.base.followed, paths.head.followed) == (TRIALS, TRIALS)
    shell = SHELL[compared.host]
    base = [(st.kind, st.name, st.depth, st.count) for st in paths.base.steps]
    head = [(st.kind, st.name, st.depth, st.count) for st in paths.head.steps]
    write = ("write", "Write" if compared.host == "claude-code" else "write", 0, 1)
    delegation = ("subagent", AGENT[compared.host], 0, 1)
    inside = [("shell", shell, 1, 1)] if compared.host == "claude-code" else []
    assert base == [write, ("shell", shell, 0, 1), ("skill", SKILL, 0, 1), delegation, *inside]
    assert head == [write, ("shell", shell, 0, 3), delegation, *inside]
    assert [row.op for row in paths.alignment] == [
        "same",
        "same",
        "removed",
        "same",
        *["same"] * len(inside),
    ]
    assert paths.first_divergence == 2
    assert (paths.base_following, paths.head_following) == (TRIALS, 0)


def test_show_diff_aligns_two_real_trials(compared: Compared) -> None:
    """show --diff on the real runs: the skill load is the first divergence, unfolded calls."""
    result = CliRunner().invoke(
        app,
        ["show", "--diff", str(compared.base), str(compared.head), "s:0:0", "--json"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    view = json.loads(result.stdout)
    inside = ["same"] if compared.host == "claude-code" else []
    # write, shell, then the skill replaced by a shell call and one more shell call added
    assert [row["op"] for row in view["rows"]] == [
        "same",
        "same",
        "changed",
        "added",
        "same",
        *inside,
    ]
    changed = view["rows"][2]
    assert (changed["base"]["kind"], changed["base"]["name"]) == ("skill", SKILL)
    assert changed["head"]["detail"] == "ls"
    assert (view["firstDivergence"], view["distance"]) == (2, 2)
