"""Turn the hosts' own event streams into host-neutral transcript entries.

:class:`ClaudeNormalizer` reads ``claude -p --output-format stream-json --verbose``
events; :class:`OpenCodeNormalizer` reads ``opencode run --format json`` events of
both dialects (V2 spells event types with ``-``, V1 with ``_``). Each is fed one
decoded event at a time, with the engine's clock, and returns the entries that
event completes. Neither does any I/O, and neither raises on any input: a host
event it does not know becomes a :class:`~atlante_eval.transcript.RawEntry`.

Token and cost snapshots reuse the stream parsers the engine already enforces
budgets with (:mod:`atlante_eval.hosts.streams`), so the transcript's figures are
the report's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from .hosts.base import TOKEN_CEILING, SessionUsage
from .hosts.streams import ClaudeStream, OpenCodeStream, find_model
from .transcript import (
    ErrorEntry,
    RawEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    ToolKind,
    ToolStatus,
    TranscriptEntry,
    UsageEntry,
)

__all__ = [
    "CLAUDE_TOOL_KINDS",
    "OPENCODE_TOOL_KINDS",
    "ClaudeNormalizer",
    "Normalizer",
    "OpenCodeNormalizer",
    "tool_kind",
]

#: Claude Code's tools by host-neutral kind (anything else, e.g. ``mcp__*``, is ``other``).
CLAUDE_TOOL_KINDS: Mapping[str, ToolKind] = {
    "Bash": "shell",
    "BashOutput": "shell",
    "KillBash": "shell",
    "KillShell": "shell",
    "Monitor": "shell",
    "Read": "read",
    "NotebookRead": "read",
    "LS": "read",
    "Write": "write",
    "Edit": "write",
    "MultiEdit": "write",
    "NotebookEdit": "write",
    "Glob": "search",
    "Grep": "search",
    "ToolSearch": "search",
    "WebSearch": "search",
    "WebFetch": "search",
    "Skill": "skill",
    "Task": "subagent",
    "Agent": "subagent",
}
#: OpenCode's tools by host-neutral kind.
OPENCODE_TOOL_KINDS: Mapping[str, ToolKind] = {
    "bash": "shell",
    "read": "read",
    "list": "read",
    "write": "write",
    "edit": "write",
    "multiedit": "write",
    "patch": "write",
    "apply_patch": "write",
    "glob": "search",
    "grep": "search",
    "codesearch": "search",
    "websearch": "search",
    "webfetch": "search",
    "skill": "skill",
    "task": "subagent",
}

#: A budget no real session reaches: the normalizers' private usage never cancels anything.
_UNBOUNDED = TOKEN_CEILING * 2


def tool_kind(name: str, table: Mapping[str, ToolKind]) -> ToolKind:
    """Return the host-neutral kind of tool ``name`` (``other`` when unknown)."""
    return table.get(name, "other")


class Normalizer(Protocol):
    """Turns one host's events into transcript entries."""

    def feed(self, event: Mapping[str, Any], t: int) -> list[TranscriptEntry]:
        """Return the entries ``event`` (arrived at ``t`` ms) completes."""
        ...

    def finish(self, t: int) -> list[TranscriptEntry]:
        """Return what is still open when the session ends (e.g. calls with no result)."""
        ...


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return max(-TOKEN_CEILING, min(int(value), TOKEN_CEILING))


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: object) -> list[str]:
    """Names from a list of strings or of objects with a ``name``."""
    if not isinstance(value, list):
        return []
    names: list[str] = []
    for item in value:
        name = item if isinstance(item, str) else _dict(item).get("name")
        if isinstance(name, str) and name:
            names.append(name)
    return names


def _result_text(value: object) -> str | None:
    """The text of a tool result's ``content`` (a string or a list of blocks)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                parts.append(text if isinstance(text, str) else f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return None if value is None else str(value)


def _timestamp(value: object) -> str | None:
    """The host's timestamp as a string: ISO text as given, epoch milliseconds converted."""
    if isinstance(value, str) and value:
        return value[:64]
    number = _int(value)
    if number is None or not 0 < number < 10**14:
        return None
    moment = datetime.fromtimestamp(number / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_DENIED_MARKERS = ("requested permissions", "haven't granted", "permission denied", "rejected")


def _denied(text: str | None) -> bool:
    lowered = (text or "").lower()
    return any(marker in lowered for marker in _DENIED_MARKERS)


class _UsageSnapshots:
    """Emit a :class:`UsageEntry` whenever the shared stream parser's figures change."""

    def __init__(self) -> None:
        self.usage = SessionUsage(_UNBOUNDED)
        self._last: tuple[int | None, float | None] = (None, None)

    def snapshot(self, t: int, ts: str | None) -> list[TranscriptEntry]:
        current = (self.usage.tokens, self.usage.cost)
        if current == self._last or current == (None, None):
            return []
        self._last = current
        return [UsageEntry(t=t, ts=ts, tokens=current[0], cost_usd=current[1])]


@dataclass
class _Pending:
    name: str
    input: dict[str, Any]
    t: int
    ts: str | None
    parent: str | None


class ClaudeNormalizer:
    """Normalizes Claude Code's ``stream-json`` events."""

    def __init__(self, *, version: str | None = None) -> None:
        self.version = version
        self._snapshots = _UsageSnapshots()
        self._stream = ClaudeStream(self._snapshots.usage)
        self._pending: dict[str, _Pending] = {}
        self._agents: dict[str, str] = {}
        """Subagent names by the id of the call that started them."""
        self._denied: set[str] = set()
        self._errors = 0

    def feed(self, event: Mapping[str, Any], t: int) -> list[TranscriptEntry]:
        """Return the entries ``event`` completes."""
        self._stream.feed(event)  # fuzzed on its own (tests/test_fuzz_parsers.py)
        ts = _timestamp(event.get("timestamp"))
        kind = event.get("type")
        parent = _str(event.get("parent_tool_use_id"))
        entries: list[TranscriptEntry]
        if kind == "system":
            entries = self._system(event, t, ts)
        elif kind == "assistant":
            entries = self._assistant(event, t, ts, parent)
        elif kind == "user":
            entries = self._user(event, t, ts)
        elif kind == "result":
            entries = self._result(event, t, ts)
        elif kind == "stream_event":
            entries = []  # partial deltas repeat what the assistant event carries
        else:
            entries = [RawEntry(t=t, ts=ts, event=dict(event))]
        return entries + self._snapshots.snapshot(t, ts)

    def _system(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        subtype = event.get("subtype")
        if subtype == "init":
            skills = _names(event.get("skills"))
            return [
                SessionStartEntry(
                    t=t,
                    ts=ts,
                    host="claude-code",
                    version=_str(event.get("claude_code_version")) or self.version,
                    model=_str(event.get("model")),
                    tools=_names(event.get("tools")),
                    agents=_names(event.get("agents")),
                    skills=skills,
                )
            ]
        if subtype == "permission_denied":
            call = _str(event.get("tool_use_id"))
            if call is not None:
                self._denied.add(call)
        return [RawEntry(t=t, ts=ts, event=dict(event))]

    def _assistant(
        self, event: Mapping[str, Any], t: int, ts: str | None, parent: str | None
    ) -> list[TranscriptEntry]:
        message = _dict(event.get("message"))
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if event.get("is_api_error_message") is True or (
            _str(event.get("error")) and not any(_dict(b).get("type") == "tool_use" for b in blocks)
        ):
            said = [_dict(b).get("text") for b in blocks]
            text = "; ".join(s for s in said if isinstance(s, str) and s) or _str(
                event.get("error")
            )
            self._errors += 1
            return [
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=text or "API error",
                    status=_int(event.get("api_error_status")),
                )
            ]
        if not isinstance(content, list):
            return [RawEntry(t=t, ts=ts, event=dict(event))]
        agent = self._agents.get(parent) if parent is not None else None
        entries: list[TranscriptEntry] = []
        for block in blocks:
            data = _dict(block)
            btype = data.get("type")
            if btype == "text" and isinstance(data.get("text"), str):
                entries.append(TextEntry(t=t, ts=ts, text=data["text"], agent=agent, parent=parent))
            elif btype == "tool_use":
                entries += self._tool_use(data, t, ts, parent)
            else:
                entries.append(RawEntry(t=t, ts=ts, event={"block": block, "parent": parent}))
        return entries

    def _tool_use(
        self, block: Mapping[str, Any], t: int, ts: str | None, parent: str | None
    ) -> list[TranscriptEntry]:
        call = _str(block.get("id")) or f"call-{len(self._pending)}-{t}"
        name = _str(block.get("name")) or "unknown"
        arguments = _dict(block.get("input"))
        self._pending[call] = _Pending(name, arguments, t, ts, parent)
        kind = tool_kind(name, CLAUDE_TOOL_KINDS)
        if kind == "skill":
            skill = _str(arguments.get("skill")) or _str(arguments.get("name")) or "unknown"
            return [SkillEntry(t=t, ts=ts, name=skill, parent=parent)]
        if kind == "subagent":
            agent = (
                _str(arguments.get("subagent_type"))
                or _str(arguments.get("agent"))
                or _str(arguments.get("name"))
                or "general-purpose"
            )
            self._agents[call] = agent
            return [SubagentEntry(t=t, ts=ts, name=agent, call_id=call, parent=parent)]
        return []

    def _user(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        content = _dict(event.get("message")).get("content")
        if isinstance(content, str):
            return []  # a prompt (e.g. the one handed to a subagent): the agent's own input
        if not isinstance(content, list):
            return [RawEntry(t=t, ts=ts, event=dict(event))]
        entries: list[TranscriptEntry] = []
        for block in content:
            data = _dict(block)
            if data.get("type") == "tool_result":
                entries.append(self._tool_result(data, t, ts))
            elif data.get("type") != "text":
                entries.append(RawEntry(t=t, ts=ts, event={"block": block}))
        return entries

    def _tool_result(self, block: Mapping[str, Any], t: int, ts: str | None) -> ToolCallEntry:
        call = _str(block.get("tool_use_id")) or "unknown"
        pending = self._pending.pop(call, None) or _Pending("unknown", {}, t, ts, None)
        text = _result_text(block.get("content"))
        failed = block.get("is_error") is True
        status: ToolStatus = "ok"
        if failed:
            status = "denied" if call in self._denied or _denied(text) else "error"
        return ToolCallEntry(
            t=pending.t,
            ts=pending.ts,
            id=call,
            name=pending.name,
            tool_kind=tool_kind(pending.name, CLAUDE_TOOL_KINDS),
            input=pending.input,
            output=None if failed else text,
            error=(text or "tool failed") if failed else None,
            status=status,
            duration_ms=max(0, t - pending.t),
            parent=pending.parent,
        )

    def _result(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        entries: list[TranscriptEntry] = []
        failed = event.get("is_error") is True
        subtype = _str(event.get("subtype")) or "unknown"
        if (failed or subtype != "success") and self._errors == 0:
            self._errors += 1
            entries.append(
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=self._stream.error or f"claude run {subtype}",
                    status=_int(event.get("api_error_status")),
                )
            )
        usage = self._snapshots.usage
        entries.append(
            ResultEntry(
                t=t,
                ts=ts,
                status="error" if failed else subtype,
                text=_str(event.get("result")),
                turns=_int(event.get("num_turns")),
                tokens=usage.tokens,
                cost_usd=usage.cost,
            )
        )
        return entries

    def finish(self, t: int) -> list[TranscriptEntry]:
        """Return the calls that never got a result, as ``pending``."""
        entries: list[TranscriptEntry] = [
            ToolCallEntry(
                t=p.t,
                ts=p.ts,
                id=call,
                name=p.name,
                tool_kind=tool_kind(p.name, CLAUDE_TOOL_KINDS),
                input=p.input,
                status="pending",
                duration_ms=None,
                parent=p.parent,
            )
            for call, p in self._pending.items()
        ]
        self._pending.clear()
        return entries


class OpenCodeNormalizer:
    """Normalizes ``opencode run --format json`` events (V1 and V2 dialects)."""

    def __init__(
        self, *, version: str | None = None, model: str | None = None, host: str = "opencode"
    ) -> None:
        self.version = version
        self.model = model
        self.host = host
        """The host the session start names (a stand-in speaking this dialect names itself)."""
        self._snapshots = _UsageSnapshots()
        self._stream = OpenCodeStream(self._snapshots.usage)
        self._started = False
        self._session: str | None = None
        self._steps = 0
        self._last_reason: str | None = None
        self._last_text: str | None = None
        self._stop: tuple[int, str | None] | None = None
        self._failed = False
        self._children: dict[str, str] = {}
        """Task call ids by the child session they ran in."""

    def feed(self, event: Mapping[str, Any], t: int) -> list[TranscriptEntry]:
        """Return the entries ``event`` completes."""
        self._stream.feed(event)  # fuzzed on its own (tests/test_fuzz_parsers.py)
        ts = _timestamp(event.get("timestamp"))
        entries = self._start(event, t, ts)
        kind = event.get("type")
        kind = kind.replace("-", "_") if isinstance(kind, str) else None
        part = _dict(event.get("part"))
        parent = self._parent(event, part)
        if kind == "step_start":
            pass
        elif kind == "step_finish":
            self._steps += 1
            self._last_reason = _str(part.get("reason"))
            self._stop = (t, ts) if self._last_reason == "stop" else None
        elif kind == "text" and isinstance(part.get("text"), str):
            self._last_text = part["text"]
            entries.append(TextEntry(t=t, ts=ts, text=part["text"], parent=parent))
        elif kind == "tool_use" and _str(part.get("tool")):
            entries += self._tool(part, t, ts, parent)
        elif kind == "error":
            error = _dict(event.get("error"))
            data = _dict(error.get("data"))
            self._failed = True
            entries.append(
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=self._stream.error or _str(data.get("message")) or "host error",
                    status=_int(error.get("statusCode")) or _int(data.get("statusCode")),
                )
            )
        else:
            entries.append(RawEntry(t=t, ts=ts, event=dict(event)))
        return entries + self._snapshots.snapshot(t, ts)

    def _start(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        if self._started:
            return []
        self._started = True
        self._session = _str(event.get("sessionID"))
        found = find_model(event)
        model = f"{found[0]}/{found[1]}" if found else self.model
        return [SessionStartEntry(t=t, ts=ts, host=self.host, version=self.version, model=model)]

    def _parent(self, event: Mapping[str, Any], part: Mapping[str, Any]) -> str | None:
        session = _str(event.get("sessionID")) or _str(part.get("sessionID"))
        if session is None or session == self._session:
            return None
        return self._children.get(session, f"session:{session}")

    def _tool(
        self, part: Mapping[str, Any], t: int, ts: str | None, parent: str | None
    ) -> list[TranscriptEntry]:
        name = str(part["tool"])
        call = _str(part.get("callID")) or _str(part.get("id")) or f"call-{t}"
        state = _dict(part.get("state"))
        arguments = _dict(state.get("input"))
        kind = tool_kind(name, OPENCODE_TOOL_KINDS)
        entries: list[TranscriptEntry] = []
        if kind == "skill":
            skill = _str(arguments.get("name")) or _str(arguments.get("skill")) or "unknown"
            entries.append(SkillEntry(t=t, ts=ts, name=skill, parent=parent))
        elif kind == "subagent":
            agent = (
                _str(arguments.get("subagent_type")) or _str(arguments.get("agent")) or "general"
            )
            child = _str(_dict(state.get("metadata")).get("sessionId"))
            if child is not None:
                self._children[child] = call
            entries.append(SubagentEntry(t=t, ts=ts, name=agent, call_id=call, parent=parent))
        raw_status = state.get("status")
        status: ToolStatus = "ok"
        error = _result_text(state.get("error")) if state.get("error") is not None else None
        if raw_status == "error" or error is not None:
            status = "denied" if _denied(error) else "error"
        elif raw_status in ("pending", "running"):
            status = "pending"
        timing = _dict(state.get("time"))
        start, end = _int(timing.get("start")), _int(timing.get("end"))
        output = state.get("output")
        entries.append(
            ToolCallEntry(
                t=t,
                ts=ts,
                id=call,
                name=name,
                tool_kind=kind,
                input=arguments,
                output=_result_text(output) if output is not None else None,
                error=(error or "tool failed") if status in ("error", "denied") else None,
                status=status,
                duration_ms=max(0, end - start) if start is not None and end is not None else None,
                parent=parent,
            )
        )
        return entries

    def finish(self, t: int) -> list[TranscriptEntry]:
        """Return the session's result (OpenCode prints none): after a final ``stop`` step."""
        if self._stop is None and not self._failed:
            return []
        when, ts = self._stop if self._stop is not None else (t, None)
        usage = self._snapshots.usage
        return [
            ResultEntry(
                t=when,
                ts=ts,
                status="error" if self._failed else "success",
                text=self._last_text,
                turns=self._steps,
                tokens=usage.tokens,
                cost_usd=usage.cost,
            )
        ]
