"""OpenCode's transcript: ``opencode run --format json`` events (V1 and V2 dialects) as entries.

V2 spells event types with ``-``, V1 with ``_``. Token and cost snapshots reuse the
stream parser the engine enforces budgets with (:mod:`atlante_eval.hosts.streams`).
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
    as_dict,
    as_int,
    as_name,
    as_str,
    is_denied,
    result_text,
    timestamp_of,
    tool_kind,
)
from .streams import OpenCodeStream, UsageSnapshots, find_model

__all__ = ["OPENCODE_TOOL_KINDS", "OpenCodeNormalizer"]

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


class OpenCodeNormalizer:
    """Normalizes ``opencode run --format json`` events (V1 and V2 dialects)."""

    def __init__(
        self, *, version: str | None = None, model: str | None = None, host: str = "opencode"
    ) -> None:
        self.version = version
        self.model = model
        self.host = host
        """The host the session start names (a stand-in speaking this dialect names itself)."""
        self._snapshots = UsageSnapshots()
        self._stream = OpenCodeStream(self._snapshots.usage)
        self._started = False
        self._session: str | None = None
        self._steps = 0
        self._last_reason: str | None = None
        self._last_text: str | None = None
        self._stop: tuple[int, str | None] | None = None
        self._failed = False
        self._children: Bounded[str, str] = Bounded()
        """Task call ids by the child session they ran in."""

    def feed(self, event: Mapping[str, Any], t: int) -> list[TranscriptEntry]:
        """Return the entries ``event`` completes."""
        self._stream.feed(event)  # fuzzed on its own (tests/test_fuzz_parsers.py)
        ts = timestamp_of(event.get("timestamp"))
        entries = self._start(event, t, ts)
        kind = event.get("type")
        kind = kind.replace("-", "_") if isinstance(kind, str) else None
        part = as_dict(event.get("part"))
        parent = self._parent(event, part)
        if kind == "step_start":
            pass
        elif kind == "step_finish":
            self._steps += 1
            self._last_reason = as_str(part.get("reason"))
            self._stop = (t, ts) if self._last_reason == "stop" else None
        elif kind == "text" and isinstance(part.get("text"), str):
            self._last_text = part["text"]
            entries.append(TextEntry(t=t, ts=ts, text=part["text"], parent=parent))
        elif kind == "tool_use" and as_str(part.get("tool")):
            entries += self._tool(part, t, ts, parent)
        elif kind == "error":
            error = as_dict(event.get("error"))
            data = as_dict(error.get("data"))
            self._failed = True
            entries.append(
                ErrorEntry(
                    t=t,
                    ts=ts,
                    message=self._stream.error or as_str(data.get("message")) or "host error",
                    status=as_int(error.get("statusCode")) or as_int(data.get("statusCode")),
                )
            )
        else:
            entries.append(RawEntry(t=t, ts=ts, event=dict(event)))
        return entries + self._snapshots.snapshot(t, ts)

    def _start(self, event: Mapping[str, Any], t: int, ts: str | None) -> list[TranscriptEntry]:
        if self._started:
            return []
        self._started = True
        self._session = as_name(event.get("sessionID"))
        found = find_model(event)
        model = f"{found[0]}/{found[1]}" if found else self.model
        return [SessionStartEntry(t=t, ts=ts, host=self.host, version=self.version, model=model)]

    def _parent(self, event: Mapping[str, Any], part: Mapping[str, Any]) -> str | None:
        session = as_name(event.get("sessionID")) or as_name(part.get("sessionID"))
        if session is None or session == self._session:
            return None
        return self._children.get(session) or f"session:{session}"

    def _tool(
        self, part: Mapping[str, Any], t: int, ts: str | None, parent: str | None
    ) -> list[TranscriptEntry]:
        name = as_name(part["tool"]) or "unknown"
        call = as_name(part.get("callID")) or as_name(part.get("id")) or f"call-{t}"
        state = as_dict(part.get("state"))
        arguments = as_dict(state.get("input"))
        kind = tool_kind(name, OPENCODE_TOOL_KINDS)
        entries: list[TranscriptEntry] = []
        status, error = _status(state)
        if kind == "skill" and status not in ("error", "denied"):
            # A skill call that errored (``ripgrep execution failed``) loaded nothing: not a use.
            skill = as_name(arguments.get("name")) or as_name(arguments.get("skill")) or "unknown"
            entries.append(SkillEntry(t=t, ts=ts, name=skill, parent=parent))
        elif kind == "subagent":
            agent = (
                as_name(arguments.get("subagent_type"))
                or as_name(arguments.get("agent"))
                or "general"
            )
            child = as_name(as_dict(state.get("metadata")).get("sessionId"))
            if child is not None:
                self._children.put(child, call)
            entries.append(SubagentEntry(t=t, ts=ts, name=agent, call_id=call, parent=parent))
        timing = as_dict(state.get("time"))
        start, end = as_int(timing.get("start")), as_int(timing.get("end"))
        output = state.get("output")
        entries.append(
            ToolCallEntry(
                t=t,
                ts=ts,
                id=call,
                name=name,
                tool_kind=kind,
                input=arguments,
                output=result_text(output) if output is not None else None,
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


def _status(state: Mapping[str, Any]) -> tuple[ToolStatus, str | None]:
    """Return a tool part's host-neutral status and its error text."""
    raw_status = state.get("status")
    error = result_text(state.get("error")) if state.get("error") is not None else None
    if raw_status == "error" or error is not None:
        return ("denied" if is_denied(error) else "error"), error
    if raw_status in ("pending", "running"):
        return "pending", error
    return "ok", error
