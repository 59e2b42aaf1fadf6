"""The trial transcript: versioned, host-neutral entry models and :func:`load_transcript`.

A transcript is ``<run dir>/trials/<scenario>/<i>/transcript.jsonl``: one JSON
object per line, each an entry whose ``kind`` says what it is. The first line is
always a :class:`HeaderEntry`. Every entry has ``t`` (milliseconds since the
session started, on the engine's clock when the host's line arrived) and an
optional ``ts`` (the host's own timestamp, when it gave one). See
docs/transcripts.md for the format, its caps and its redaction.

The models read leniently (unknown keys are ignored) so a transcript written by a
newer engine, which may carry extra fields, still loads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "TRANSCRIPT_FILE",
    "TRANSCRIPT_SCHEMA",
    "ErrorEntry",
    "HeaderEntry",
    "RawEntry",
    "ResultEntry",
    "SessionStartEntry",
    "SkillEntry",
    "SubagentEntry",
    "TextEntry",
    "ToolCallEntry",
    "ToolKind",
    "ToolStatus",
    "TranscriptEntry",
    "TranscriptError",
    "TruncatedEntry",
    "UsageEntry",
    "load_transcript",
    "parse_entry",
    "parse_transcript",
]

#: Name of the transcript file inside a trial's directory.
TRANSCRIPT_FILE = "transcript.jsonl"
#: Version of the entry format (the header's ``schema``).
TRANSCRIPT_SCHEMA = 1

#: Host-neutral kinds of tool: what a call does, whatever the host calls the tool.
ToolKind = Literal["shell", "read", "write", "search", "skill", "subagent", "other"]
#: How a tool call ended (``pending``: no result arrived before the session ended).
ToolStatus = Literal["ok", "error", "denied", "pending"]


class TranscriptError(ValueError):
    """Raised by :func:`load_transcript` when a file is not a transcript.

    Missing or unreadable files raise :class:`OSError` as usual.
    """


class _Entry(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        ser_json_inf_nan="null",
    )

    t: int = 0
    """Milliseconds since the session started, when the line arrived."""
    ts: str | None = None
    """The host's own timestamp for the event, if it gave one."""


class HeaderEntry(_Entry):
    """The first line: what the transcript belongs to."""

    kind: Literal["header"] = "header"
    schema_: int = Field(default=TRANSCRIPT_SCHEMA, alias="schema")
    """Entry format version."""
    host: str
    """``opencode``, ``claude-code``, ``selftest`` (or a custom host's name)."""
    scenario: str
    """The scenario's name."""
    trial: int
    """0-based trial index."""


class SessionStartEntry(_Entry):
    """The host's session began; what it said it offers."""

    kind: Literal["session-start"] = "session-start"
    host: str
    """The host's name."""
    version: str | None = None
    """The host's version, when known."""
    model: str | None = None
    """The model the host said it uses."""
    tools: list[str] = Field(default_factory=list)
    """Tools the host offered the agent (when it says so)."""
    agents: list[str] = Field(default_factory=list)
    """Agents (subagent types) available (when it says so)."""
    skills: list[str] = Field(default_factory=list)
    """Skills available (when it says so)."""


class TextEntry(_Entry):
    """Text the agent wrote."""

    kind: Literal["text"] = "text"
    text: str
    """The text (capped)."""
    agent: str | None = None
    """The subagent the text belongs to (``None`` for the main agent)."""
    parent: str | None = None
    """Id of the enclosing subagent tool call."""


class ToolCallEntry(_Entry):
    """One tool call, written when its result arrived (or, ``pending``, when the session ended)."""

    kind: Literal["tool-call"] = "tool-call"
    id: str
    """The host's call id."""
    name: str
    """The host-native tool name (``Bash``, ``write``, ...)."""
    tool_kind: ToolKind = "other"
    """The host-neutral kind of tool (JSON ``toolKind``: ``kind`` is the entry's own)."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The call's arguments (capped)."""
    output: str | None = None
    """What the tool returned (capped)."""
    error: str | None = None
    """The tool's error text, when it failed."""
    status: ToolStatus = "ok"
    """How the call ended."""
    duration_ms: int | None = None
    """Time from the call to its result."""
    parent: str | None = None
    """Id of the enclosing subagent tool call."""


class SkillEntry(_Entry):
    """The agent loaded a skill."""

    kind: Literal["skill"] = "skill"
    name: str
    """The skill's name."""
    parent: str | None = None
    """Id of the enclosing subagent tool call."""


class SubagentEntry(_Entry):
    """The agent delegated to a subagent."""

    kind: Literal["subagent"] = "subagent"
    name: str
    """The subagent's type or name."""
    call_id: str | None = None
    """Id of the tool call that started it (nested entries name it as ``parent``)."""
    parent: str | None = None
    """Id of the enclosing subagent tool call."""


class UsageEntry(_Entry):
    """A token and cost snapshot (cumulative)."""

    kind: Literal["usage"] = "usage"
    tokens: int | None = None
    """Cumulative tokens so far."""
    cost_usd: float | None = None
    """Cumulative cost in USD so far."""


class ErrorEntry(_Entry):
    """An error the host reported (API errors, failed sessions)."""

    kind: Literal["error"] = "error"
    message: str
    """What went wrong (capped)."""
    status: int | None = None
    """The HTTP status, when known."""


class ResultEntry(_Entry):
    """The host's final result."""

    kind: Literal["result"] = "result"
    status: str
    """The host's final status (``success``, ``error``, ...)."""
    text: str | None = None
    """The final answer, if any (capped)."""
    turns: int | None = None
    """Turns the host counted."""
    tokens: int | None = None
    """Total tokens the host reported."""
    cost_usd: float | None = None
    """Total cost in USD the host reported."""


class RawEntry(_Entry):
    """A host event the normalizer does not know, kept as it came (capped)."""

    kind: Literal["raw"] = "raw"
    event: Any = None
    """The host event (a JSON value; a preview object when it was too large)."""


class TruncatedEntry(_Entry):
    """Something was cut: what, and how much."""

    kind: Literal["truncated"] = "truncated"
    reason: str
    """Which cap was reached."""
    dropped: int
    """How many entries or bytes were left out."""
    unit: Literal["entries", "bytes"]
    """What ``dropped`` counts."""


TranscriptEntry = Annotated[
    HeaderEntry
    | SessionStartEntry
    | TextEntry
    | ToolCallEntry
    | SkillEntry
    | SubagentEntry
    | UsageEntry
    | ErrorEntry
    | ResultEntry
    | RawEntry
    | TruncatedEntry,
    Field(discriminator="kind"),
]
"""One transcript line; ``kind`` says which model it is."""

_ADAPTER: TypeAdapter[TranscriptEntry] = TypeAdapter(TranscriptEntry)


def parse_entry(value: object) -> TranscriptEntry:
    """Return the entry a decoded line holds; anything unreadable becomes a :class:`RawEntry`."""
    try:
        return _ADAPTER.validate_python(value)
    except ValidationError:
        t = value.get("t") if isinstance(value, dict) else None
        return RawEntry(t=t if isinstance(t, int) and not isinstance(t, bool) else 0, event=value)


def _lines(path: Path) -> Iterator[str]:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        yield from handle


def load_transcript(path: Path | str) -> list[TranscriptEntry]:
    """Read a ``transcript.jsonl`` into typed entries, in file order.

    A line that is not a known entry (a newer kind, or damage) is returned as a
    :class:`RawEntry` holding what the line decoded to, so nothing is dropped.

    Raises:
        TranscriptError: the file does not start with a transcript header.
        OSError: the file cannot be read.
    """
    source = Path(path)
    return parse_transcript(_lines(source), source=str(source))


def parse_transcript(lines: Iterable[str], *, source: str) -> list[TranscriptEntry]:
    """Turn a transcript's lines into typed entries (see :func:`load_transcript`).

    Args:
        lines: the file's lines; blank ones are skipped.
        source: names the transcript in errors.

    Raises:
        TranscriptError: the first line is no transcript header, or there is none.
    """
    entries: list[TranscriptEntry] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            value: object = json.loads(line)
        except (ValueError, RecursionError):
            value = line.rstrip("\n")
        entry = parse_entry(value)
        if not entries and not isinstance(entry, HeaderEntry):
            raise TranscriptError(f"{source} is not a transcript: its first line is no header")
        entries.append(entry)
    if not entries:
        raise TranscriptError(f"{source} is not a transcript: it is empty")
    return entries
