"""Behaviour checks: verdicts and evidence over transcripts, through the engine too."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from clikit import report_dirs
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from pydantic import TypeAdapter
from standin import StandinHost, actions
from typer.testing import CliRunner

from atlante_eval import (
    CheckResult,
    SessionEnd,
    SessionUsage,
    TranscriptEntry,
    TrialContext,
    run_eval,
)
from atlante_eval._util.patterns import PATTERN_TIMEOUT_MS
from atlante_eval.checks import CheckContext, run_checks
from atlante_eval.cli import app
from atlante_eval.project import AnyCheck
from atlante_eval.transcript import (
    HeaderEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    TruncatedEntry,
)

CHECK: TypeAdapter[AnyCheck] = TypeAdapter(AnyCheck)


def _entries() -> list[TranscriptEntry]:
    """A session that loads one skill, delegates once, runs pytest and writes one file."""
    return [
        HeaderEntry(host="claude-code", scenario="s", trial=0),
        SessionStartEntry(host="claude-code", skills=["python-tests", "release"], agents=["qa"]),
        SkillEntry(t=5, name="python-tests"),
        SubagentEntry(t=6, name="qa", call_id="task-1"),
        ToolCallEntry(t=7, id="c1", name="Bash", tool_kind="shell", input={"command": "pytest"}),
        ToolCallEntry(
            t=8,
            id="c2",
            name="Read",
            tool_kind="read",
            input={"file_path": "a.py"},
            parent="task-1",
        ),
        ToolCallEntry(t=9, id="c3", name="Write", tool_kind="write", input={"file_path": "b.py"}),
        TextEntry(t=10, text="All tests pass now."),
        ResultEntry(t=11, status="success", text="Done: fixed median.", turns=4),
    ]


async def _judge(
    check: dict[str, Any], entries: Sequence[TranscriptEntry] | None = None
) -> CheckResult:
    context = CheckContext(
        root=Path("/nonexistent"),
        snapshot={},
        changes=None,
        transcript=_entries() if entries is None else entries,
        transcript_error=None if entries is None or entries else "no usable transcript",
    )
    [result] = await run_checks([CHECK.validate_python(check)], context)
    return result


PASSING: list[dict[str, Any]] = [
    {"type": "skill-used", "skill": "python-tests"},
    {"type": "skill-used", "skill": "python-tests", "min": 1, "max": 1},
    {"type": "subagent-used", "agent": "qa"},
    {"type": "tool-used", "tool": "bash"},  # host-native names compare case-insensitively
    {"type": "tool-used", "kind": "shell", "inputMatches": "pytest"},
    {"type": "tool-used", "kind": "read", "min": 1, "max": 1},  # a subagent's call counts
    {"type": "tool-not-used", "kind": "search"},
    {"type": "tool-not-used", "kind": "shell", "inputMatches": r"rm\s+-rf"},
    {"type": "max-tool-calls", "max": 3},
    {"type": "max-turns", "max": 4},
    {"type": "transcript-contains", "pattern": "tests pass"},
    {"type": "transcript-contains", "pattern": r"fixed \w+\.", "regex": True},
]
FAILING: list[dict[str, Any]] = [
    {"type": "skill-used", "skill": "release"},
    {"type": "skill-used", "skill": "python-tests", "min": 2},
    {"type": "subagent-used", "agent": "reviewer"},
    {"type": "subagent-used", "agent": "qa", "max": 0, "min": 0},
    {"type": "tool-used", "tool": "Grep"},
    {"type": "tool-used", "kind": "shell", "inputMatches": "ruff"},
    {"type": "tool-not-used", "tool": "Write"},
    {"type": "tool-not-used", "kind": "shell", "inputMatches": "pytest"},
    {"type": "max-tool-calls", "max": 2},
    {"type": "max-turns", "max": 3},
    {"type": "transcript-contains", "pattern": "TESTS PASS"},
    {"type": "transcript-contains", "pattern": r"^Done$", "regex": True},
]


@pytest.mark.anyio
@pytest.mark.parametrize("check", PASSING, ids=lambda c: json.dumps(c))
async def test_a_behaviour_check_passes_on_what_the_transcript_shows(check: dict[str, Any]) -> None:
    """Each check type passes when the session did what it asks."""
    result = await _judge(check)
    assert result.verdict == "pass", result.evidence


@pytest.mark.anyio
@pytest.mark.parametrize("check", FAILING, ids=lambda c: json.dumps(c))
async def test_a_behaviour_check_fails_when_the_transcript_does_not_show_it(
    check: dict[str, Any],
) -> None:
    """Each check type fails when the session did something else."""
    result = await _judge(check)
    assert result.verdict == "fail", result.evidence


@pytest.mark.anyio
async def test_evidence_names_the_matching_or_the_closest_entries() -> None:
    """A failure explains itself: what was used instead, what came close."""
    wrong_skill = await _judge({"type": "skill-used", "skill": "python-test"})
    assert wrong_skill.evidence["count"] == 0
    assert wrong_skill.evidence["skillsUsed"] == {"python-tests": 1}
    assert wrong_skill.evidence["closest"][0] == "python-tests"
    assert wrong_skill.evidence["available"] == ["python-tests", "release"]
    no_ruff = await _judge({"type": "tool-used", "kind": "shell", "inputMatches": "ruff"})
    assert [c["id"] for c in no_ruff.evidence["closest"]] == ["c1"]
    assert no_ruff.evidence["closest"][0]["input"] == '{"command": "pytest"}'
    wrote = await _judge({"type": "tool-not-used", "tool": "Write"})
    assert [c["id"] for c in wrote.evidence["matches"]] == ["c3"]
    too_many = await _judge({"type": "max-tool-calls", "max": 2})
    assert too_many.evidence["count"] == 3
    assert too_many.evidence["byName"] == {"Bash": 1, "Read": 1, "Write": 1}
    turns = await _judge({"type": "max-turns", "max": 3})
    assert turns.evidence == {"max": 3, "turns": 4, "countedFrom": "result"}
    said = await _judge({"type": "transcript-contains", "pattern": "fixed median"})
    assert said.evidence["text"] == "Done: fixed median."
    unsaid = await _judge({"type": "transcript-contains", "pattern": "nope"})
    assert unsaid.evidence["textsSearched"] == 2
    assert unsaid.evidence["lastText"] == "Done: fixed median."


@pytest.mark.anyio
@pytest.mark.parametrize("check", [*PASSING, *FAILING], ids=lambda c: json.dumps(c))
async def test_without_a_usable_transcript_every_behaviour_check_is_an_error(
    check: dict[str, Any],
) -> None:
    """No transcript never passes silently (nor fails): the check reaches no verdict."""
    result = await _judge(check, entries=[])
    context = CheckContext(root=Path("/nonexistent"), snapshot={}, changes=None)
    [missing] = await run_checks([CHECK.validate_python(check)], context)
    assert (result.verdict, missing.verdict) == ("error", "error")
    assert "no usable transcript" in missing.evidence["cause"]


@pytest.mark.anyio
async def test_a_truncated_transcript_decides_only_what_the_lost_entries_cannot_change() -> None:
    """Entries cut at the cap may hold a forbidden call: absences and upper bounds are errors."""
    cut = [*_entries(), TruncatedEntry(reason="cap", dropped=40, unit="entries")]
    assert (await _judge({"type": "skill-used", "skill": "python-tests"}, cut)).verdict == "pass"
    assert (await _judge({"type": "max-tool-calls", "max": 2}, cut)).verdict == "fail"
    for unknowable in (
        {"type": "tool-not-used", "kind": "search"},
        {"type": "max-tool-calls", "max": 3},
        {"type": "skill-used", "skill": "release"},
        {"type": "transcript-contains", "pattern": "nope"},
    ):
        result = await _judge(unknowable, cut)
        assert result.verdict == "error", unknowable
        assert result.evidence["droppedEntries"] == 40


# --- through the engine, with the stand-in host (OpenCode's dialect) -------------------


def _tool(call: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    state = {
        "status": "completed",
        "input": arguments,
        "output": "ok",
        "time": {"start": 1, "end": 2},
    }
    return {"event": {"type": "tool_use", "part": {"tool": tool, "callID": call, "state": state}}}


SESSION = actions(
    _tool("k1", "skill", {"name": "python-tests"}),
    _tool("t1", "task", {"subagent_type": "qa", "prompt": "check it", "description": "qa"}),
    _tool("b1", "bash", {"command": "python -m pytest -q"}),
    {"write": "out.txt", "content": "done"},
)
BEHAVIOUR: list[dict[str, Any]] = [
    {"type": "skill-used", "skill": "python-tests"},
    {"type": "subagent-used", "agent": "qa"},
    {"type": "tool-used", "kind": "shell", "inputMatches": "pytest"},
    {"type": "tool-not-used", "kind": "write"},
    {"type": "max-tool-calls", "max": 5},
    {"type": "transcript-contains", "pattern": "done"},
]


def _extended(name: str, prompt: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    return scenario(name, prompt=prompt, checks=checks, **{"$schema": EXTENDED_SCENARIO_URI})


@pytest.mark.anyio
async def test_the_engine_grades_behaviour_checks_on_the_recorded_transcript(
    tmp_path: Path,
) -> None:
    """A trial passes or fails its behaviour checks from its own transcript.jsonl."""
    project = make_project(
        tmp_path / "p",
        scenarios=[
            _extended("good", SESSION, [{"type": "file-exists", "path": "out.txt"}, *BEHAVIOUR]),
            _extended(
                "bad",
                SESSION,
                [
                    {"type": "skill-used", "skill": "release"},
                    {"type": "tool-not-used", "kind": "shell"},
                ],
            ),
        ],
    )
    report = await run_eval(project, host=StandinHost(), jobs=2, trials=1)
    [good] = report.scenarios["good"].trials
    assert good.verdict == "pass", good.checks
    [bad] = report.scenarios["bad"].trials
    assert bad.verdict == "fail"
    assert [c.verdict for c in bad.checks or []] == ["fail", "fail"]
    assert (bad.checks or [])[0].evidence["skillsUsed"] == {"python-tests": 1}
    assert [c["id"] for c in (bad.checks or [])[1].evidence["matches"]] == ["b1"]


class SilentHost(StandinHost):
    """A host whose session succeeds but streams nothing: no usable transcript."""

    name = "silent"

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Write the file the core check wants, and stream no event."""
        (context.sandbox / "out.txt").write_text("done", encoding="utf-8")
        return SessionEnd()


@pytest.mark.anyio
async def test_a_host_without_a_transcript_makes_the_trial_an_infra_error(tmp_path: Path) -> None:
    """Behaviour checks on a host that left no transcript are errors: infra-error, never pass."""
    project = make_project(
        tmp_path / "p",
        scenarios=[
            _extended(
                "s",
                "unused",
                [
                    {"type": "file-exists", "path": "out.txt"},
                    {"type": "tool-not-used", "kind": "shell"},
                ],
            )
        ],
    )
    report = await run_eval(project, host=SilentHost(), trials=1)
    [trial] = report.scenarios["s"].trials
    assert trial.verdict == "infra-error"
    assert [c.verdict for c in trial.checks or []] == ["pass", "error"]
    assert "no usable transcript" in (trial.error or "")
    assert report_dirs(project)


def test_schema_scenario_extended_prints_the_schema_extended_documents_declare() -> None:
    """``schema scenario --extended`` has the extension's $id and every check type."""
    plain = json.loads(CliRunner().invoke(app, ["schema", "scenario"]).stdout)
    result = CliRunner().invoke(app, ["schema", "scenario", "--extended"])
    assert result.exit_code == 0
    extended = json.loads(result.stdout)
    assert extended["$id"] == EXTENDED_SCENARIO_URI
    assert "SkillUsedCheck" in extended["$defs"]
    assert "SkillUsedCheck" not in plain["$defs"]
    assert set(plain["$defs"]) < set(extended["$defs"])
    refused = CliRunner().invoke(app, ["schema", "config", "--extended"])
    assert refused.exit_code == 2
    assert "invalid-option" in refused.stderr


@pytest.mark.anyio
async def test_cause_lines_say_why_each_behaviour_check_failed() -> None:
    """The terminal's cause line (run, show) explains a behaviour failure in words."""
    from atlante_eval.views.causes import evidence_line

    lines = [evidence_line(await _judge(check)) for check in FAILING]
    assert lines[0] == "skill release: 0 found, expected at least 1"
    assert lines[3] == "subagent qa: 1 found, expected at most 0"
    assert lines[5] == 'shell calls matching "ruff": 0 found, expected at least 1'
    assert lines[6].startswith('tool Write: 1 found, e.g. {"file_path": "b.py"}')
    assert lines[8] == "3 tool calls, at most 2 allowed"
    assert lines[9] == "4 turns, at most 3 allowed"
    assert lines[10] == 'no assistant text contains "TESTS PASS"'


def test_patterns_name_every_regular_expression_a_check_holds() -> None:
    """What pattern validation (compile check, nested-quantifier warning) must look at."""

    def fields(check: dict[str, Any]) -> list[tuple[str, str]]:
        return CHECK.validate_python(check).patterns()

    assert fields({"type": "tool-used", "kind": "shell", "inputMatches": "(a+)+"}) == [
        ("inputMatches", "(a+)+")
    ]
    assert fields({"type": "tool-not-used", "tool": "Bash", "inputMatches": "rm"}) == [
        ("inputMatches", "rm")
    ]
    assert fields({"type": "transcript-contains", "pattern": "x+", "regex": True}) == [
        ("pattern", "x+")
    ]
    assert fields({"type": "transcript-contains", "pattern": "x+"}) == []
    assert fields({"type": "skill-used", "skill": "s"}) == []
    assert fields({"type": "command", "run": ["x"], "outputMatches": "ok"}) == [
        ("outputMatches", "ok")
    ]
    assert fields({"type": "file-contains", "path": "a", "pattern": "b+", "regex": True}) == [
        ("pattern", "b+")
    ]
    assert fields({"type": "file-contains", "path": "a", "pattern": "b+"}) == []


@pytest.mark.anyio
async def test_a_catastrophic_behaviour_pattern_times_out_as_a_failed_check() -> None:
    """``(a+)+$`` over a long tool input or assistant text fails its check, it never hangs."""
    text = "a" * 100_000 + "b"
    entries = [
        *_entries()[:2],
        ToolCallEntry(t=7, id="c1", name="Bash", tool_kind="shell", input={"command": text}),
        TextEntry(t=8, text=text),
    ]
    used = await _judge({"type": "tool-used", "kind": "shell", "inputMatches": "(a+)+$"}, entries)
    assert used.verdict == "fail"
    assert (
        used.evidence["cause"] == f"inputMatches: pattern timed out after {PATTERN_TIMEOUT_MS} ms"
    )
    said = await _judge(
        {"type": "transcript-contains", "pattern": "(a+)+$", "regex": True}, entries
    )
    assert said.verdict == "fail"
    assert said.evidence["cause"] == f"pattern timed out after {PATTERN_TIMEOUT_MS} ms"
