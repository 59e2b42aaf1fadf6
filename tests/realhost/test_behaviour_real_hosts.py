"""Behaviour checks graded on transcripts of the real ``claude`` and ``opencode`` CLIs.

One ``run_eval`` per host against the scripted mock model, with the *same* two
scenario documents for both hosts: the model writes a file, runs a shell command,
loads a skill and delegates to the project's ``reviewer`` subagent, then answers.
``behaves`` asks for exactly that (every behaviour check passes); ``misbehaves``
asks for the opposite (every behaviour check fails), one check of each type.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from factory import EXTENDED_SCENARIO_URI, make_project, scenario

from atlante_eval import RunReport, TrialResult, run_eval

from .environment import leftovers, real_host_environment
from .fixtures import require_hosts
from .hosts import PINNED
from .mock_model import CallTool, MockModelServer, Reply, RunBash, Script, WriteFile

pytestmark = pytest.mark.realhost

HOSTS = ("claude-code", "opencode")
SKILL = "python-tests"
SKILL_TEXT = "---\nname: python-tests\ndescription: Run the Python tests.\n---\nRun pytest.\n"
SUBAGENT = "reviewer"  # the project's native agent, on both hosts
SUB_PROMPT = "Review hello.txt. [script:sub]"

#: One check of each behaviour type that the scripted session satisfies.
PASSING: list[dict[str, Any]] = [
    {"type": "skill-used", "skill": SKILL},
    {"type": "subagent-used", "agent": SUBAGENT, "max": 1},
    {"type": "tool-used", "kind": "shell", "inputMatches": "cat hello"},
    {"type": "tool-not-used", "kind": "search"},
    {"type": "max-tool-calls", "max": 10},
    {"type": "max-turns", "max": 50},
    {"type": "transcript-contains", "pattern": "all done"},
]
#: One check of each behaviour type that the same session violates.
FAILING: list[dict[str, Any]] = [
    {"type": "skill-used", "skill": "release-notes"},
    {"type": "subagent-used", "agent": "security-auditor"},
    {"type": "tool-used", "kind": "shell", "inputMatches": "pytest"},
    {"type": "tool-not-used", "kind": "write"},
    {"type": "max-tool-calls", "max": 2},
    {"type": "max-turns", "max": 1},
    {"type": "transcript-contains", "pattern": r"^nothing to do$", "regex": True},
]


def scripts() -> list[Script]:
    """The main agent's conversation and its subagent's."""
    delegate = {"description": "Review", "prompt": SUB_PROMPT, "subagent_type": SUBAGENT}
    return [
        Script(
            "act",
            [
                WriteFile("hello.txt", "hello\n"),
                RunBash("cat hello.txt", description="Show the file"),
                CallTool(claude=("Skill", {"skill": SKILL}), opencode=("skill", {"name": SKILL})),
                CallTool(claude=("Agent", delegate), opencode=("task", delegate)),
                Reply("all done"),
            ],
        ),
        Script("sub", [Reply("looks good")]),
    ]


def _document(name: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    return scenario(
        name,
        prompt="Do it all. [script:act]",
        checks=[{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}, *checks],
        **{"$schema": EXTENDED_SCENARIO_URI},
    )


#: The two documents, byte for byte the same for both hosts.
DOCUMENTS = [_document("behaves", PASSING), _document("misbehaves", FAILING)]


@dataclass
class Graded:
    """One host's run."""

    host: str
    report: RunReport

    def trial(self, name: str) -> TrialResult:
        [trial] = self.report.scenarios[name].trials
        return trial


@pytest.fixture(scope="module", params=HOSTS)
def graded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Graded]:
    host: str = request.param
    bin_dir = require_hosts()
    tmp = tmp_path_factory.mktemp(f"behaviour-{host}")
    marker = uuid.uuid4().hex
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    skill_dir = ".claude/skills" if host == "claude-code" else ".opencode/skills"
    fixtures = {
        "eval/fixtures/app": {"README.md": "hi\n", f"{skill_dir}/{SKILL}/SKILL.md": SKILL_TEXT}
    }
    with (
        MockModelServer(scripts()) as mock,
        real_host_environment(host, mock, tmp, bin_dir=bin_dir, marker=marker) as pass_env,
    ):
        project = make_project(
            tmp / "project",
            host=host,
            scenarios=DOCUMENTS,
            fixtures=fixtures,
            eval_extra={"model": model, "budget": {"trials": 1, "timeoutMs": 120_000}},
        )
        report = anyio.run(
            lambda: run_eval(
                project, jobs=2, out=tmp / "out", pass_env=pass_env, host_version=PINNED[host]
            )
        )
        assert leftovers(marker) == []
        yield Graded(host=host, report=report)


def test_every_behaviour_check_passes_on_the_session_that_did_it(graded: Graded) -> None:
    trial = graded.trial("behaves")
    checks = trial.checks or []
    assert [(c.type, c.verdict) for c in checks] == [("file-contains", "pass")] + [
        (c["type"], "pass") for c in PASSING
    ], (trial.error, [c.evidence for c in checks])
    assert trial.verdict == "pass"
    skill, subagent, shell = checks[1], checks[2], checks[3]
    assert skill.evidence["matches"][0]["name"] == SKILL
    assert subagent.evidence["subagentsUsed"] == {SUBAGENT: 1}
    assert "cat hello.txt" in shell.evidence["matches"][0]["input"]


def test_every_behaviour_check_fails_on_the_session_that_did_not(graded: Graded) -> None:
    trial = graded.trial("misbehaves")
    checks = trial.checks or []
    assert [(c.type, c.verdict) for c in checks] == [("file-contains", "pass")] + [
        (c["type"], "fail") for c in FAILING
    ], (trial.error, [c.evidence for c in checks])
    assert trial.verdict == "fail"
    skill, subagent, shell, write = checks[1], checks[2], checks[3], checks[4]
    # The evidence names what happened instead.
    assert skill.evidence["skillsUsed"] == {SKILL: 1}
    assert subagent.evidence["subagentsUsed"] == {SUBAGENT: 1}
    assert any("cat hello.txt" in c["input"] for c in shell.evidence["closest"])
    [wrote] = write.evidence["matches"]
    assert wrote["name"] == ("Write" if graded.host == "claude-code" else "write")
