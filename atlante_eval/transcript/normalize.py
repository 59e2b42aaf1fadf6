"""Host-neutral pieces of turning a host's event stream into transcript entries.

Each host's normalizer lives with its host (:mod:`atlante_eval.hosts`): it is fed
one decoded event at a time, with the engine's clock, and returns the entries that
event completes, without I/O and without raising on any input (an event it does
not know becomes a :class:`~atlante_eval.transcript.models.RawEntry`). This module
holds the protocol they implement and the value coercions they share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..choices import TOKEN_CEILING
from .models import ToolKind, TranscriptEntry

__all__ = [
    "Normalizer",
    "PendingCall",
    "as_dict",
    "as_int",
    "as_str",
    "is_denied",
    "names_of",
    "result_text",
    "timestamp_of",
    "tool_kind",
]


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
    name: str
    input: dict[str, Any]
    t: int
    ts: str | None
    parent: str | None
