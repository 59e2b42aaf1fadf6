"""Transcripts of the real ``claude`` and ``opencode`` CLIs, driven through atlante-eval offline.

One ``run_eval`` per host against the scripted mock model: a scenario whose model
writes a file, runs a shell command, loads a skill and delegates to a subagent
(which runs its own shell command), and a scenario whose model answers HTTP 400.
The stored transcripts must hold exactly those calls, in order, with their inputs
and outputs; ``activity`` must count them; the API error must be the transcript's
``error`` entry and the trial's error.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario

from atlante_eval import RunReport, TranscriptEntry, TrialResult, load_transcript, run_eval
from atlante_eval.transcript import (
    ErrorEntry,
    HeaderEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    ToolCallEntry,
)

from .environment import leftovers, real_host_environment
from .fixtures import require_hosts
from .hosts import PINNED
from .mock_model import CallTool, Fail, MockModelServer, Reply, RunBash, Script, WriteFile

pytestmark = pytest.mark.realhost

HOSTS = ("claude-code", "opencode")
SKILL = "python-tests"
SKILL_TEXT = "---\nname: python-tests\ndescription: Run the Python tests.\n---\nRun pytest.\n"
SUB_PROMPT = "Check hello.txt. [script:sub]"
AGENT = {"claude-code": "general-purpose", "opencode": "general"}


def scripts() -> list[Script]:
    """The conversations: the main agent's and its subagent's, and an API error."""
    return [
        Script(
            "tools",
            [
                WriteFile("hello.txt", "hello\n"),
                RunBash("cat hello.txt", description="Show the file"),
                CallTool(claude=("Skill", {"skill": SKILL}), opencode=("skill", {"name": SKILL})),
                CallTool(
                    claude=(
                        "Agent",
                        {
                            "description": "Check",
                            "prompt": SUB_PROMPT,
                            "subagent_type": AGENT["claude-code"],
                        },
                    ),
                    opencode=(
                        "task",
                        {
                            "description": "Check",
                            "prompt": SUB_PROMPT,
                            "subagent_type": AGENT["opencode"],
                        },
                    ),
                ),
                Reply("all done"),
            ],
        ),
        Script("sub", [RunBash("echo nested", description="Say nested"), Reply("sub done")]),
        Script("err", [Fail(400, "mock says no")]),
    ]


@dataclass
class Recorded:
    """One host's run and the transcripts it left."""

    host: str
    report: RunReport
    run_dir: Path
    project: Path
    pass_env: list[str]

    def trial(self, name: str) -> TrialResult:
        [trial] = self.report.scenarios[name].trials
        return trial

    def entries(self, name: str) -> list[TranscriptEntry]:
        trial = self.trial(name)
        assert trial.transcript is not None
        return load_transcript(self.run_dir / trial.transcript)


@pytest.fixture(scope="module", params=HOSTS)
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recorded]:
    host: str = request.param
    bin_dir = require_hosts()
    tmp = tmp_path_factory.mktemp(f"transcripts-{host}")
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
            scenarios=[
                scenario(
                    "tools",
                    prompt="Do it all. [script:tools]",
                    checks=[{"type": "file-contains", "path": "hello.txt", "pattern": "hello"}],
                ),
                scenario("err", prompt="Fail. [script:err]"),
            ],
            fixtures=fixtures,
            eval_extra={"model": model, "budget": {"trials": 1, "timeoutMs": 120_000}},
        )
        out = tmp / "out"
        report = anyio.run(
            lambda: run_eval(project, jobs=2, out=out, pass_env=pass_env, host_version=PINNED[host])
        )
        assert leftovers(marker) == []
        [run_dir] = [p for p in out.iterdir() if (p / "report.json").exists()]
        (tmp_path_factory.getbasetemp() / f"{host}-run").write_text(str(run_dir))
        yield Recorded(
            host=host, report=report, run_dir=run_dir, project=project, pass_env=pass_env
        )


def _calls(entries: list[TranscriptEntry]) -> list[ToolCallEntry]:
    return [e for e in entries if isinstance(e, ToolCallEntry)]


def _raw(recorded: Recorded, name: str) -> list[dict[str, Any]]:
    trial = recorded.trial(name)
    assert trial.transcript is not None
    path = recorded.run_dir / Path(trial.transcript).parent / "raw.jsonl.gz"
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _raw_calls(recorded: Recorded, name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, tool name, input) of every tool call in the host's own stream, in stream order."""
    calls: list[tuple[str, str, dict[str, Any]]] = []
    for event in _raw(recorded, name):
        if recorded.host == "claude-code" and event.get("type") == "assistant":
            for block in event["message"].get("content") or []:
                if block.get("type") == "tool_use":
                    calls.append((block["id"], block["name"], block["input"]))
        elif recorded.host == "opencode" and event.get("type") == "tool_use":
            part = event["part"]
            calls.append((part["callID"], part["tool"], part["state"]["input"]))
    return calls


def test_the_transcript_holds_exactly_the_scripted_calls_in_order(  # noqa: PLR0915 - one scripted session, entry by entry
    recorded: Recorded,
) -> None:
    trial = recorded.trial("tools")
    assert trial.verdict == "pass", (trial.error, trial.checks)
    entries = recorded.entries("tools")
    header, start = entries[0], entries[1]
    assert isinstance(header, HeaderEntry)
    assert (header.host, header.scenario, header.trial) == (recorded.host, "tools", 0)
    assert isinstance(start, SessionStartEntry)
    assert start.host == recorded.host
    assert start.version in ("2.1.332", "1.18.33")
    calls = _calls(entries)
    claude = recorded.host == "claude-code"
    expected = (
        [
            ("Write", "write"),
            ("Bash", "shell"),
            ("Skill", "skill"),
            ("Agent", "subagent"),
            ("Bash", "shell"),
        ]
        if claude
        else [("write", "write"), ("bash", "shell"), ("skill", "skill"), ("task", "subagent")]
    )
    assert [(c.name, c.tool_kind) for c in calls] == expected
    # Exactly the host's calls, in the host's order, with the host's inputs.
    assert [(c.id, c.name, c.input) for c in calls] == _raw_calls(recorded, "tools")
    write, shell, skill, delegate = calls[:4]
    path_key = "file_path" if claude else "filePath"
    assert str(write.input[path_key]).endswith("/hello.txt")
    assert write.input["content"] == "hello\n"
    assert shell.input["command"] == "cat hello.txt"
    assert skill.input == ({"skill": SKILL} if claude else {"name": SKILL})
    assert delegate.input["prompt"] == SUB_PROMPT
    assert delegate.input["subagent_type"] == AGENT[recorded.host]
    if claude:
        assert write.output is not None
        assert write.output.startswith("File created successfully")
        assert shell.output == "hello"
        assert skill.status == "ok"
        assert skill.output is not None
        assert SKILL in skill.output
        nested = calls[4]
        assert nested.input["command"] == "echo nested"
        assert nested.output == "nested"
        assert nested.parent == delegate.id
        assert all(c.parent is None for c in calls[:4])
        assert all(c.status == "ok" for c in calls)
    else:
        assert write.output == "Wrote file successfully."
        assert shell.output == "hello\n"
        assert delegate.output is not None
        assert "sub done" in delegate.output
        # The skill tool needs ripgrep, which OpenCode cannot fetch offline: whatever it
        # answered, the transcript says what the host said.
        [raw_skill] = [
            e["part"]["state"]
            for e in _raw(recorded, "tools")
            if e.get("type") == "tool_use" and e["part"]["tool"] == "skill"
        ]
        if raw_skill["status"] == "completed":
            assert (skill.status, skill.output) == ("ok", raw_skill["output"])
        else:
            assert (skill.status, skill.error) == ("error", raw_skill["error"])
    assert all(c.duration_ms is not None and c.duration_ms >= 0 for c in calls)
    skills = [e.name for e in entries if isinstance(e, SkillEntry)]
    assert skills == [SKILL]
    [subagent] = [e for e in entries if isinstance(e, SubagentEntry)]
    assert (subagent.name, subagent.call_id) == (AGENT[recorded.host], delegate.id)
    results = [e for e in entries if isinstance(e, ResultEntry)]
    assert results
    assert results[-1].status == "success"
    assert results[-1].text == "all done"


def test_activity_counts_the_calls(recorded: Recorded) -> None:
    activity = recorded.trial("tools").activity
    assert activity is not None
    claude = recorded.host == "claude-code"
    assert activity.tool_calls.total == (5 if claude else 4)
    assert activity.tool_calls.by_kind == {
        "shell": 2 if claude else 1,
        "skill": 1,
        "subagent": 1,
        "write": 1,
    }
    assert activity.tool_calls.by_name == (
        {"Agent": 1, "Bash": 2, "Skill": 1, "Write": 1}
        if claude
        else {"bash": 1, "skill": 1, "task": 1, "write": 1}
    )
    assert activity.skills == {SKILL: 1}
    assert activity.subagents == {AGENT[recorded.host]: 1}
    assert activity.files_written == ["hello.txt"]
    assert activity.first_error is None
    assert activity.turns >= 5
    scenario = recorded.report.scenarios["tools"].activity
    assert scenario is not None
    assert scenario.trials == 1
    assert scenario.skills == {SKILL: 1}
    assert scenario.subagents == {AGENT[recorded.host]: 1}
    assert scenario.tool_calls.by_kind == activity.tool_calls.by_kind


def test_the_api_error_is_the_error_entry_and_the_trials_error(recorded: Recorded) -> None:
    trial = recorded.trial("err")
    assert trial.verdict == "infra-error"
    assert trial.error is not None
    assert "mock says no" in trial.error
    entries = recorded.entries("err")
    errors = [e for e in entries if isinstance(e, ErrorEntry)]
    assert len(errors) == 1
    assert errors[0].status == 400
    assert "mock says no" in errors[0].message
    assert _calls(entries) == []
    assert trial.activity is not None
    assert trial.activity.first_error is not None
    assert "mock says no" in trial.activity.first_error


def test_no_credential_is_stored(recorded: Recorded) -> None:
    """The test key the host received never appears in a stored file."""
    for path in recorded.run_dir.rglob("*"):
        if path.is_file():
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            assert b"test-key" not in data, path


def test_the_api_error_is_the_cause_on_the_terminal(recorded: Recorded, tmp_path: Path) -> None:
    """``atlante-eval run`` names the API error on the trial's progress line and in the summary."""
    cli = shutil.which("atlante-eval")
    assert cli is not None
    argv = [cli, "run", str(recorded.project), "--scenario", "err", "--jobs", "1"]
    argv += ["--out", str(tmp_path)]
    for name in recorded.pass_env:
        argv += ["--pass-env", name]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("trial 0: infra-error")]
    assert " — " in line
    assert "mock says no" in line.split(" — ", 1)[1]
    assert "err: no graded trials (1 infra-error)" in done.stdout
    [summary] = [x for x in done.stdout.splitlines() if x.strip().startswith("infra-error 1/1:")]
    assert "mock says no" in summary
