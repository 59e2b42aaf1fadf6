"""A trial's action path: its transcript's tool calls, skill loads and delegations as steps.

A step is what the agent *did*, normalised across hosts: a skill load
(``skill <name>``), a delegation (``subagent <name>``), or a tool call by its
host-neutral kind and host name (``shell Bash``). A host that runs a skill or a
subagent through a tool (Claude Code's ``Skill`` and ``Agent``, OpenCode's
``skill`` and ``task``) writes both the skill or subagent entry and that tool
call: the entry is the step, the call is not repeated.

Steps are ordered by the time their call started; a subagent's own steps follow
its delegation step one level deeper, whatever order the host wrote them in (an
OpenCode ``task`` call is written when it ends, after its subagent's calls).
Steps of a subagent whose delegation is not in the transcript hang under an
``(unknown)`` subagent step. :func:`fold` merges consecutive repeats for paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..report.behaviour import PathStep
from ..transcript import SkillEntry, SubagentEntry, ToolCallEntry, TranscriptEntry

__all__ = ["DETAIL_WIDTH", "StepKey", "fold", "step_key", "step_label", "trial_steps"]

#: Longest input summary kept on a step.
DETAIL_WIDTH = 120
#: What two steps must share to be the same step: enclosing subagents, kind, name.
StepKey = tuple[str, str, str]

_DETAIL_KEYS = (
    "command",
    "file_path",
    "filePath",
    "path",
    "notebook_path",
    "pattern",
    "query",
    "url",
    "description",
)
_UNKNOWN_AGENT = "(unknown)"


@dataclass(slots=True)
class _Item:
    """A step before nesting: where it came from and which call encloses it."""

    order: int
    t: int
    parent: str | None
    kind: str
    name: str
    call_id: str | None = None
    detail: str | None = None
    status: str | None = None


def step_key(step: PathStep) -> StepKey:
    """What makes two steps the same: the enclosing subagents, the kind and the name."""
    return (step.agent or "", step.kind, step.name)


def step_label(step: PathStep) -> str:
    """``shell Bash``, ``skill api-conventions``, ``subagent qa``, with ``x3`` for repeats."""
    repeat = f" x{step.count}" if step.count > 1 else ""
    return f"{step.kind} {step.name}{repeat}"


def _detail(arguments: dict[str, object]) -> str | None:
    for key in _DETAIL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            line = " ".join(value.split())
            return line if len(line) <= DETAIL_WIDTH else line[: DETAIL_WIDTH - 1] + "…"
    return None


def _items(entries: Iterable[TranscriptEntry]) -> list[_Item]:
    items: list[_Item] = []
    for order, entry in enumerate(entries):
        if isinstance(entry, SkillEntry):
            items.append(_Item(order, entry.t, entry.parent, "skill", entry.name))
        elif isinstance(entry, SubagentEntry):
            items.append(_Item(order, entry.t, entry.parent, "subagent", entry.name, entry.call_id))
        elif isinstance(entry, ToolCallEntry) and entry.tool_kind not in ("skill", "subagent"):
            status = None if entry.status == "ok" else entry.status
            items.append(
                _Item(
                    order,
                    entry.t,
                    entry.parent,
                    entry.tool_kind,
                    entry.name,
                    detail=_detail(entry.input),
                    status=status,
                )
            )
    items.sort(key=lambda item: (item.t, item.order))
    return items


def _adopt_orphans(items: list[_Item]) -> list[_Item]:
    """Give steps whose enclosing call is unknown an ``(unknown)`` subagent step."""
    known = {item.call_id for item in items if item.call_id is not None}
    first: dict[str, _Item] = {}
    for item in items:
        if item.parent is not None and item.parent not in known and item.parent not in first:
            first[item.parent] = item
    adopted = [
        _Item(child.order, child.t, None, "subagent", _UNKNOWN_AGENT, call_id=parent)
        for parent, child in first.items()
    ]
    return sorted(items + adopted, key=lambda item: (item.t, item.order, item.parent is not None))


def trial_steps(entries: Iterable[TranscriptEntry]) -> list[PathStep]:
    """Return a transcript's steps in order, each subagent's steps nested after it."""
    items = _adopt_orphans(_items(entries))
    children: dict[str | None, list[_Item]] = defaultdict(list)
    for item in items:
        children[item.parent].append(item)
    steps: list[PathStep] = []
    seen: set[str] = set()

    def walk(parent: str | None, agents: tuple[str, ...]) -> None:
        for item in children.get(parent, []):
            steps.append(
                PathStep.model_construct(  # built from validated entries: no second validation
                    kind=item.kind,
                    name=item.name,
                    depth=len(agents),
                    agent="/".join(agents) or None,
                    detail=item.detail,
                    status=item.status,
                    t=item.t,
                )
            )
            call = item.call_id
            if item.kind == "subagent" and call is not None and call not in seen:
                seen.add(call)  # a call id reused by the host is walked once
                walk(call, (*agents, item.name))

    walk(None, ())
    return steps


def fold(steps: Sequence[PathStep]) -> list[PathStep]:
    """Merge consecutive steps with the same key into one with their ``count``.

    Details and statuses of the merged steps are dropped (they differ per call).
    """
    folded: list[PathStep] = []
    for step in steps:
        if folded and step_key(folded[-1]) == step_key(step):
            last = folded[-1]
            folded[-1] = last.model_copy(
                update={"count": last.count + step.count, "detail": None, "status": None}
            )
        else:
            folded.append(step)
    return folded
