"""Scripted sessions for behaviour-delta tests: the stand-in host prints either host's events.

A session is a list of steps: ``skill(name)``, ``shell(command)``, ``write(path)`` (the
file is really written, so checks can see it) and ``subagent(name, *steps)``.
:func:`session` turns them into a stand-in prompt whose printed events are
OpenCode's (``tool_use``) or Claude Code's (``assistant`` tool_use blocks, then
``user`` tool_result blocks; a subagent's calls carry ``parent_tool_use_id``), so
the engine's real normalizers write the transcripts.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from clikit import cleaned_up, report_dirs, start_cli
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from standin import StandinHost

from atlante_eval import RunReport, run_eval

DIALECTS = ("opencode", "claude-code")


@dataclass(frozen=True)
class Step:
    """One scripted action of the agent."""

    kind: str
    name: str
    argument: str = ""
    nested: tuple[Step, ...] = field(default_factory=tuple)


def skill(name: str) -> Step:
    """Load a skill."""
    return Step("skill", name)


def shell(command: str) -> Step:
    """Run a shell command."""
    return Step("shell", "bash", command)


def write(path: str) -> Step:
    """Write a file (for real, and as a write tool call)."""
    return Step("write", "write", path)


def subagent(name: str, *steps: Step) -> Step:
    """Delegate to a subagent that performs ``steps``."""
    return Step("subagent", name, nested=steps)


_CLAUDE_TOOLS = {"skill": "Skill", "shell": "Bash", "write": "Write", "subagent": "Agent"}
_OPENCODE_TOOLS = {"skill": "skill", "shell": "bash", "write": "write", "subagent": "task"}


def _input(step: Step, dialect: str) -> dict[str, Any]:
    claude = dialect == "claude-code"
    if step.kind == "skill":
        return {"skill": step.name} if claude else {"name": step.name}
    if step.kind == "shell":
        return {"command": step.argument}
    if step.kind == "write":
        return {"file_path" if claude else "filePath": step.argument, "content": "x"}
    return {"subagent_type": step.name, "prompt": "help", "description": "delegate"}


def _opencode(step: Step, call: str) -> list[dict[str, Any]]:
    state = {
        "status": "completed",
        "input": _input(step, "opencode"),
        "output": "ok",
        "time": {"start": 1, "end": 2},
    }
    part = {"tool": _OPENCODE_TOOLS[step.kind], "callID": call, "state": state}
    return [{"event": {"type": "tool_use", "part": part}}]


def _claude(step: Step, calls: Iterator[int], parent: str | None) -> list[dict[str, Any]]:
    call = f"toolu_{next(calls)}"
    use = {
        "type": "tool_use",
        "id": call,
        "name": _CLAUDE_TOOLS[step.kind],
        "input": _input(step, "claude-code"),
    }
    message = {"role": "assistant", "content": [use]}
    events: list[dict[str, Any]] = [
        {"event": {"type": "assistant", "message": message, "parent_tool_use_id": parent}}
    ]
    for nested in step.nested:
        events += _claude(nested, calls, call)
    result = {"type": "tool_result", "tool_use_id": call, "content": "ok"}
    reply = {"role": "user", "content": [result]}
    events.append({"event": {"type": "user", "message": reply, "parent_tool_use_id": parent}})
    return events


def actions(dialect: str, steps: Sequence[Step], *, turns: int = 3) -> list[dict[str, Any]]:
    """Stand-in actions that perform ``steps`` and print them as ``dialect``'s events."""
    calls = itertools.count()
    done: list[dict[str, Any]] = []
    for step in steps:
        if step.kind == "write":
            done.append({"write": step.argument, "content": "x"})
        if dialect == "claude-code":
            done += _claude(step, calls, None)
        else:
            done += _opencode(step, f"call_{next(calls)}")
    if dialect == "claude-code":
        result = {"type": "result", "subtype": "success", "num_turns": turns, "result": "done"}
        done.append({"event": result})
    else:
        done += [{"usage": 100}] * turns
    return done


def session(dialect: str, *steps: Step, turns: int = 3) -> str:
    """A stand-in prompt: every trial performs ``steps``."""
    return json.dumps({"actions": actions(dialect, steps, turns=turns)})


def per_trial(dialect: str, plan: Mapping[Iterable[int], Sequence[Step]], *, turns: int = 3) -> str:
    """A stand-in prompt: the trials of each key perform that key's steps."""
    groups = [
        {"trials": list(indices), "then": actions(dialect, steps, turns=turns)}
        for indices, steps in plan.items()
    ]
    return json.dumps({"actions": groups})


def project_of(root: Path, prompt: str, *, checks: list[dict[str, Any]], trials: int) -> Path:
    """A project with one scenario ``s`` run ``trials`` times."""
    return make_project(
        root,
        scenarios=[
            scenario("s", prompt=prompt, checks=checks, **{"$schema": EXTENDED_SCENARIO_URI})
        ],
        eval_extra={"budget": {"trials": trials}},
    )


def run_scenario_cli(root: Path, prompt: str, *, checks: list[dict[str, Any]], trials: int) -> Path:
    """Run scenario ``s`` through the CLI in a child process (OpenCode dialect); its run dir.

    For tests whose thread already runs an event loop (Playwright's), where
    ``anyio.run`` cannot be called.
    """
    project = project_of(root / "project", prompt, checks=checks, trials=trials)
    with cleaned_up(start_cli(["run", str(project), "--jobs", "2"], root)) as run:
        assert run.wait(timeout_s=180) in (0, 1), run.stderr
    [run_dir] = report_dirs(project)
    return run_dir


def run_scenario(
    root: Path, dialect: str, prompt: str, *, checks: list[dict[str, Any]], trials: int
) -> tuple[RunReport, Path]:
    """Run scenario ``s`` ``trials`` times with the stand-in in ``dialect``; return its run."""
    project = project_of(root, prompt, checks=checks, trials=trials)
    out = root / "out"
    report = anyio.run(
        lambda: run_eval(project, host=StandinHost(dialect=dialect), jobs=2, out=out)
    )
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return report, run_dir
