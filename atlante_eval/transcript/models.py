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

import errno
import functools
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from ..choices import ToolKind

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
    "TranscriptLine",
    "TranscriptLines",
    "TruncatedEntry",
    "UsageEntry",
    "decode_transcript",
    "load_transcript",
    "parse_entry",
    "parse_transcript",
    "read_transcript",
    "read_transcript_lines",
]

#: Name of the transcript file inside a trial's directory.
TRANSCRIPT_FILE = "transcript.jsonl"
#: Version of the entry format (the header's ``schema``).
TRANSCRIPT_SCHEMA = 1

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
        ser_json_inf_nan="null",
        defer_build=True,
    )
    __field_docs__: ClassVar[bool] = True
    """Field docstrings are read when a JSON Schema is generated (:mod:`.fielddocs`)."""

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


@functools.cache
def _adapter() -> TypeAdapter[TranscriptEntry]:
    """Build the entry validator the first time an entry is parsed, not at import."""
    return TypeAdapter(TranscriptEntry)


def parse_entry(value: object) -> TranscriptEntry:
    """Return the entry a decoded line holds; anything unreadable becomes a :class:`RawEntry`."""
    try:
        return _adapter().validate_python(value)
    except ValidationError:
        t = value.get("t") if isinstance(value, dict) else None
        return RawEntry(t=t if isinstance(t, int) and not isinstance(t, bool) else 0, event=value)


class TranscriptLine(NamedTuple):
    """One non-blank line of a transcript file, decoded as far as it goes."""

    value: object
    """The decoded JSON value, or the line's text when it is not JSON."""
    is_json: bool
    """Whether the line was JSON."""


class TranscriptLines(NamedTuple):
    """What :func:`read_transcript_lines` read, and what its caps left out."""

    lines: list[TranscriptLine]
    """The lines read, in file order."""
    truncated: TruncatedEntry | None
    """Set when a cap stopped reading: which (``entry limit``/``byte limit``) and how much."""


def _decode_line(text: str) -> TranscriptLine:
    try:
        return TranscriptLine(json.loads(text), True)
    except (ValueError, RecursionError):
        return TranscriptLine(text.rstrip("\r\n"), False)


def decode_transcript(
    data: bytes, *, max_bytes: int | None = None, max_entries: int | None = None
) -> TranscriptLines:
    """Split a transcript's bytes into decoded lines, tolerating anything they may hold.

    Bad UTF-8 is replaced, blank lines are skipped, and a line that is not JSON is
    kept as its text. Only the first ``max_bytes`` are used (a line cut there is
    dropped) and at most ``max_entries`` lines; ``truncated`` says what a cap left out.
    """
    cut_bytes = max_bytes is not None and len(data) > max_bytes
    raw_lines = (data[:max_bytes] if max_bytes is not None else data).splitlines()
    if cut_bytes and raw_lines:
        raw_lines.pop()  # the last line was cut mid-way
    lines: list[TranscriptLine] = []
    for number, raw in enumerate(raw_lines):
        if max_entries is not None and len(lines) >= max_entries:
            dropped = len(raw_lines) - number
            cut = TruncatedEntry(reason="entry limit", dropped=dropped, unit="entries")
            return TranscriptLines(lines, cut)
        if raw.strip():
            lines.append(_decode_line(raw.decode("utf-8", errors="replace")))
    if cut_bytes:
        assert max_bytes is not None
        cut = TruncatedEntry(reason="byte limit", dropped=len(data) - max_bytes, unit="bytes")
        return TranscriptLines(lines, cut)
    return TranscriptLines(lines, None)


def read_transcript_lines(
    path: Path | str, *, max_bytes: int | None = None, max_entries: int | None = None
) -> TranscriptLines:
    """Read a transcript file into decoded lines (:func:`decode_transcript`), within caps.

    The one reader of transcript files (``load_transcript``, ``show``, the HTML
    report; :func:`parse_transcript` decodes lines the same way): the file is
    opened without following a symbolic link.

    Raises:
        OSError: the file cannot be opened or read, or is not a regular file (a
            symlink, a FIFO or a device is never read).
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "a transcript must be a regular file", str(path))
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    return decode_transcript(data, max_bytes=max_bytes, max_entries=max_entries)


def read_transcript(
    path: Path | str, *, max_bytes: int | None = None, max_entries: int | None = None
) -> list[TranscriptEntry]:
    """Read a transcript into typed entries tolerantly (no header needed), within caps.

    Lines that are not known entries become :class:`RawEntry`; when a cap stopped
    reading, the last entry is a :class:`TruncatedEntry` saying what was left out.

    Raises:
        OSError: the file cannot be read (also when it is a symlink).
    """
    read = read_transcript_lines(path, max_bytes=max_bytes, max_entries=max_entries)
    entries = [parse_entry(line.value) for line in read.lines]
    if read.truncated is not None:
        entries.append(read.truncated)
    return entries


def load_transcript(path: Path | str) -> list[TranscriptEntry]:
    """Read a ``transcript.jsonl`` into typed entries, in file order.

    A line that is not a known entry (a newer kind, or damage) is returned as a
    :class:`RawEntry` holding what the line decoded to, so nothing is dropped.

    Raises:
        TranscriptError: the file does not start with a transcript header.
        OSError: the file cannot be read (also when it is a symlink).
    """
    source = Path(path)
    return _with_header(read_transcript(source), str(source))


def parse_transcript(lines: Iterable[str], *, source: str) -> list[TranscriptEntry]:
    """Turn a transcript's lines into typed entries (see :func:`load_transcript`).

    Args:
        lines: the file's lines; blank ones are skipped.
        source: names the transcript in errors.

    Raises:
        TranscriptError: the first line is no transcript header, or there is none.
    """
    decoded = (_decode_line(line) for line in lines if line.strip())
    return _with_header([parse_entry(line.value) for line in decoded], source)


def _with_header(entries: list[TranscriptEntry], source: str) -> list[TranscriptEntry]:
    if not entries:
        raise TranscriptError(f"{source} is not a transcript: it is empty")
    if not isinstance(entries[0], HeaderEntry):
        raise TranscriptError(f"{source} is not a transcript: its first line is no header")
    return entries
