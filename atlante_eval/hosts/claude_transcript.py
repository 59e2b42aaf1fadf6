"""Claude Code's transcript: ``claude -p --output-format stream-json --verbose`` events as entries.

Token and cost snapshots reuse the stream parser the engine enforces budgets with
(:mod:`atlante_eval.hosts.streams`), so the transcript's figures are the report's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..transcript import (
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
)
from ..transcript.normalize import (
    Bounded,
    PendingCall,
    as_count,
    as_dict,
    as_int,
    as_name,
    as_str,
    is_denied,
    names_of,
    result_text,
    timestamp_of,
    tool_kind,
)
from .streams import ClaudeStream, UsageSnapshots

__all__ = ["CLAUDE_TOOL_KINDS", "ClaudeNormalizer"]

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


class ClaudeNormalizer:
    """Normalizes Claude Code's ``stream-json`` events."""

    def __init__(self, *, version: str | None = None) -> None:
        self.version = version
        self._snapshots = UsageSnapshots()
        self._stream = ClaudeStream(self._snapshots.usage)
        self._pending: Bounded[str, PendingCall] = Bounded()
        """Tool calls awaiting their result (past the cap, the oldest is written as pending)."""
        self._agents: Bounded[str, str] = Bounded()
        """Subagent names by the id of the call that started them."""
        self._denied: Bounded[str, None] = Bounded()
        """Ids of the calls the host reported denied."""
        self._calls = 0
        self._errors = 0

    def feed(self, event: Mapping[str, Any], t: int) -> list[TranscriptEntry]:
        """Return the entries ``event`` completes."""
        self._stream.feed(event)  # fuzzed on its own (tests/test_fuzz_parsers.py)
        ts = timestamp_of(event.get("timestamp"))
        kind = event.get("type")
        parent = as_name(event.get("parent_tool_use_id"))
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
            skills = names_of(event.get("skills"))
            return [
                SessionStartEntry(
                    t=t,
                    ts=ts,
                    host="claude-code",
                    version=as_str(event.get("claude_code_version")) or self.version,
                    model=as_str(event.get("model")),
                    tools=names_of(event.get("tools")),
                    agents=names_of(event.get("agents")),
                    skills=skills,
                )
            ]
        if subtype == "permission_denied":
            call = as_name(event.get("tool_use_id"))
            if call is not None:
                self._denied.put(call, None)
        return [RawEntry(t=t, ts=ts, event=dict(event))]

    def _assistant(
        self, event: Mapping[str, Any], t: int, ts: str | None, parent: str | None
    ) -> list[TranscriptEntry]:
        message = as_dict(event.get("message"))
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if event.get("is_api_error_message") is True or (
            as_str(event.get("error"))
            and not any(as_dict(b).get("type") == "tool_use" for b in blocks)
        ):
            said = [as_dict(b).get("text") for b in blocks]
            text = "; ".join(s for s in said if isinstance(s, str) and s) or as_str(
                event.get("error")
            )
            self._errors += 1
            return [
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=text or "API error",
                    status=as_int(event.get("api_error_status")),
                )
            ]
        if not isinstance(content, list):
            return [RawEntry(t=t, ts=ts, event=dict(event))]
        agent = self._agents.get(parent) if parent is not None else None
        entries: list[TranscriptEntry] = []
        for block in blocks:
            data = as_dict(block)
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
        self._calls += 1
        call = as_name(block.get("id")) or f"call-{self._calls}-{t}"
        name = as_name(block.get("name")) or "unknown"
        arguments = as_dict(block.get("input"))
        pushed = self._pending.put(call, PendingCall.capped(name, arguments, t, ts, parent))
        entries: list[TranscriptEntry] = [self._unanswered(*pushed)] if pushed else []
        kind = tool_kind(name, CLAUDE_TOOL_KINDS)
        if kind == "skill":
            skill = as_name(arguments.get("skill")) or as_name(arguments.get("name")) or "unknown"
            entries.append(SkillEntry(t=t, ts=ts, name=skill, parent=parent))
        elif kind == "subagent":
            agent = (
                as_name(arguments.get("subagent_type"))
                or as_name(arguments.get("agent"))
                or as_name(arguments.get("name"))
                or "general-purpose"
            )
            self._agents.put(call, agent)
            entries.append(SubagentEntry(t=t, ts=ts, name=agent, call_id=call, parent=parent))
        return entries

    def _user(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        content = as_dict(event.get("message")).get("content")
        if isinstance(content, str):
            return []  # a prompt (e.g. the one handed to a subagent): the agent's own input
        if not isinstance(content, list):
            return [RawEntry(t=t, ts=ts, event=dict(event))]
        entries: list[TranscriptEntry] = []
        for block in content:
            data = as_dict(block)
            if data.get("type") == "tool_result":
                entries.append(self._tool_result(data, t, ts))
            elif data.get("type") != "text":
                entries.append(RawEntry(t=t, ts=ts, event={"block": block}))
        return entries

    def _tool_result(self, block: Mapping[str, Any], t: int, ts: str | None) -> ToolCallEntry:
        call = as_name(block.get("tool_use_id")) or "unknown"
        pending = self._pending.pop(call) or PendingCall("unknown", {}, t, ts, None)
        text = result_text(block.get("content"))
        failed = block.get("is_error") is True
        status: ToolStatus = "ok"
        if failed:
            status = "denied" if call in self._denied or is_denied(text) else "error"
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
        subtype = as_str(event.get("subtype")) or "unknown"
        if (failed or subtype != "success") and self._errors == 0:
            self._errors += 1
            entries.append(
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=self._stream.error or f"claude run {subtype}",
                    status=as_int(event.get("api_error_status")),
                )
            )
        usage = self._snapshots.usage
        entries.append(
            ResultEntry(
                t=t,
                ts=ts,
                status="error" if failed else subtype,
                text=as_str(event.get("result")),
                turns=as_count(event.get("num_turns")),
                tokens=usage.tokens,
                cost_usd=usage.cost,
            )
        )
        return entries

    def _unanswered(self, call: str, pending: PendingCall) -> ToolCallEntry:
        return ToolCallEntry(
            t=pending.t,
            ts=pending.ts,
            id=call,
            name=pending.name,
            tool_kind=tool_kind(pending.name, CLAUDE_TOOL_KINDS),
            input=pending.input,
            status="pending",
            duration_ms=None,
            parent=pending.parent,
        )

    def finish(self, t: int) -> list[TranscriptEntry]:
        """Return the calls that never got a result, as ``pending``."""
        return [self._unanswered(call, pending) for call, pending in self._pending.drain()]
