"""Host-neutral pieces of turning a host's event stream into transcript entries.

Each host's normalizer lives with its host (:mod:`atlante_eval.hosts`): it is fed
one decoded event at a time, with the engine's clock, and returns the entries that
event completes, without I/O and without raising on any input (an event it does
not know becomes a :class:`~atlante_eval.transcript.models.RawEntry`). This module
holds the protocol they implement and the value coercions they share.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar

from ..choices import TOKEN_CEILING
from .models import ToolKind, TranscriptEntry

__all__ = [
    "NAME_CHARS",
    "OPEN_LIMIT",
    "PENDING_INPUT_CHARS",
    "Bounded",
    "Normalizer",
    "PendingCall",
    "as_count",
    "as_dict",
    "as_int",
    "as_name",
    "as_str",
    "cap_json",
    "cap_text",
    "is_denied",
    "names_of",
    "result_text",
    "timestamp_of",
    "tool_kind",
]


#: Most open items (tool calls awaiting a result, subagents, denials) a normalizer keeps.
OPEN_LIMIT = 1000
#: Longest tool input (as JSON) an open tool call keeps (the transcript keeps no more).
PENDING_INPUT_CHARS = 4 * 1024
#: Longest name or id (tool, skill, agent, call) a normalizer keeps.
NAME_CHARS = 256

K = TypeVar("K")
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """An insertion-ordered table of at most ``limit`` items; the oldest go first.

    What an agent can write into a host's stream must not grow the engine: every
    per-session table a normalizer keeps is one of these. :meth:`put` returns the
    item it pushed out, so the caller can still record it; :attr:`overflow` counts them.
    """

    def __init__(self, limit: int = OPEN_LIMIT) -> None:
        self.limit = limit
        self.overflow = 0
        """How many items were pushed out by newer ones."""
        self._items: OrderedDict[K, V] = OrderedDict()

    def put(self, key: K, value: V) -> tuple[K, V] | None:
        """Store ``value`` under ``key``; return the oldest item if it had to go."""
        self._items.pop(key, None)
        self._items[key] = value
        if len(self._items) <= self.limit:
            return None
        self.overflow += 1
        return self._items.popitem(last=False)

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def drain(self) -> list[tuple[K, V]]:
        """Remove and return every item, oldest first."""
        items = list(self._items.items())
        self._items.clear()
        return items


def cap_text(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated {len(text) - limit} characters]"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _cap_value(value: Any, limit: int) -> Any:
    """Cut every string inside a JSON value to ``limit`` characters."""
    if isinstance(value, str):
        return cap_text(value, limit)
    if isinstance(value, dict):
        return {str(k): _cap_value(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap_value(v, limit) for v in value]
    return value


def cap_json(value: Any, limit: int) -> tuple[Any, bool]:
    """Return ``value`` within ``limit`` characters of JSON, and whether it was cut."""
    try:
        text = _json(value)
    except (ValueError, RecursionError):
        return {"truncated": True, "preview": "unserialisable value"}, True
    if len(text) <= limit:
        return value, False
    shortened = _cap_value(value, max(64, limit // 8))
    if len(_json(shortened)) <= limit:
        return shortened, True
    return {"truncated": len(text), "preview": cap_text(text, limit)}, True


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


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def as_name(value: object) -> str | None:
    """A non-empty string cut to :data:`NAME_CHARS` (a name or id from the host's stream)."""
    return value[:NAME_CHARS] if isinstance(value, str) and value else None


def as_count(value: object) -> int | None:
    """A non-negative integer count (a negative or non-numeric one is ``None``)."""
    number = as_int(value)
    return number if number is not None and number >= 0 else None


def as_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return max(-TOKEN_CEILING, min(int(value), TOKEN_CEILING))


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def names_of(value: object) -> list[str]:
    """Names from a list of strings or of objects with a ``name``."""
    if not isinstance(value, list):
        return []
    names: list[str] = []
    for item in value:
        name = item if isinstance(item, str) else as_dict(item).get("name")
        if isinstance(name, str) and name:
            names.append(name)
    return names


def result_text(value: object) -> str | None:
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


def timestamp_of(value: object) -> str | None:
    """The host's timestamp as a string: ISO text as given, epoch milliseconds converted."""
    if isinstance(value, str) and value:
        return value[:64]
    number = as_int(value)
    if number is None or not 0 < number < 10**14:
        return None
    moment = datetime.fromtimestamp(number / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_DENIED_MARKERS = ("requested permissions", "haven't granted", "permission denied", "rejected")


def is_denied(text: str | None) -> bool:
    lowered = (text or "").lower()
    return any(marker in lowered for marker in _DENIED_MARKERS)


@dataclass
class PendingCall:
    """A tool call awaiting its result, with its input capped (:data:`PENDING_INPUT_CHARS`)."""

    name: str
    input: dict[str, Any]
    t: int
    ts: str | None
    parent: str | None

    @classmethod
    def capped(
        cls, name: str, arguments: dict[str, Any], t: int, ts: str | None, parent: str | None
    ) -> PendingCall:
        kept, _ = cap_json(arguments, PENDING_INPUT_CHARS)
        return cls(name, kept if isinstance(kept, dict) else {}, t, ts, parent)
