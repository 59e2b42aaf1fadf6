"""Read a host's stdout lines as JSON events so that no line can hide another.

The host's stdout is a pipe the agent's own processes can write into (through
``/proc/<host pid>/fd/1``). An unterminated fragment written there just before the
host's next line glues itself to it: the line no longer parses, and a reader that
drops unparsable lines loses the host's real event (a forbidden ``Write`` call
disappears). :class:`EventFraming` closes that:

* a line that parses as one JSON object is an event, as before (other whole JSON
  values and plain text lines are ignored, as before);
* a line that does not is searched, from its end, for a JSON object that ends the
  line: the host's own event, written after the foreign bytes. It is recovered
  and the foreign bytes are tampering evidence (``glued-line``). The search costs
  a bounded number of tries and characters (:data:`RECOVERY_TRIES`,
  :data:`RECOVERY_WORK`), whatever the line holds;
* a line that looks like an event (it holds ``{"``) but yields none is tampering
  evidence (``malformed-line``) once another line follows it: a real host prints
  whole JSON lines, and a fragment after which nothing came hid nothing (the last
  line of a session cut short by its timeout or budget is such a line);
* a line too long to read whole (over ``MAX_LINE_BYTES``) is searched the same way
  through its last bytes (:meth:`EventFraming.overlong`), so a flood cannot hide
  the line written after it either.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .._util.jsondoc import join_surrogates
from ..report import TamperKind

__all__ = ["RECOVERY_TRIES", "RECOVERY_WORK", "EventFraming", "TamperSink", "recover"]

#: Most candidate starts tried when searching one line for a host event.
RECOVERY_TRIES = 1024
#: Characters the search may parse per character of the line (plus a fixed allowance).
RECOVERY_WORK = 2
_WORK_ALLOWANCE = 1 << 20

#: Where tampering evidence goes: kind, detail, 1-based line number.
TamperSink = Callable[[TamperKind, str, int | None], None]

_DECODER = json.JSONDecoder()


_INVALID = object()


def _parse(text: str) -> object:
    """``text`` as one JSON value, or :data:`_INVALID`."""
    try:
        return join_surrogates(json.loads(text), text=text)
    except (ValueError, RecursionError):
        return _INVALID


def recover(line: str, *, first: int = 1) -> tuple[int, dict[str, Any]] | None:
    """Find a JSON object that ends ``line`` and starts at ``first`` or later.

    Candidates are tried from the end of the line: first the ``{"type"`` positions
    (every event of the built-in hosts starts so), then every ``{"``. The search
    stops after :data:`RECOVERY_TRIES` candidates or once it parsed
    :data:`RECOVERY_WORK` characters per character of the line. Returns where the
    object starts and the object.
    """
    budget = [RECOVERY_WORK * len(line) + _WORK_ALLOWANCE, RECOVERY_TRIES]
    for pattern in ('{"type"', '{"'):
        found = _search(line, pattern, first, budget)
        if found is not None:
            return found
    return None


def _search(
    line: str, pattern: str, first: int, budget: list[int]
) -> tuple[int, dict[str, Any]] | None:
    """:func:`recover` over the ``pattern`` positions; ``budget`` is [characters, tries] left."""
    position = len(line)
    while budget[0] > 0 and budget[1] > 0:
        position = line.rfind(pattern, 0, position)
        if position < first:
            return None
        budget[1] -= 1
        # Parse a copy from the candidate on, so a failure costs what was parsed (an
        # error on the whole line would count the line's newlines up to its position).
        rest = line[position:]
        budget[0] -= len(rest)
        try:
            value, end = _DECODER.raw_decode(rest)
        except json.JSONDecodeError as exc:
            budget[0] -= exc.pos + 1
            continue
        except (ValueError, RecursionError):
            budget[0] -= len(rest)
            continue
        if end == len(rest) and isinstance(value, dict):
            return position, join_surrogates(value, text=rest)
    return None


class EventFraming:
    """Decodes one session's stdout lines; tells ``on_tamper`` what looks forged."""

    def __init__(self, on_tamper: TamperSink | None = None) -> None:
        self._on_tamper = on_tamper
        self.lines = 0
        """Lines read so far (over-long ones included)."""
        self._suspect: tuple[int, str] | None = None
        """A line that looked like an event but gave none: evidence once a line follows."""

    def _tamper(self, kind: TamperKind, detail: str, line: int) -> None:
        if self._on_tamper is not None:
            self._on_tamper(kind, detail, line)

    def _next_line(self) -> int:
        self.lines += 1
        if self._suspect is not None:
            line, detail = self._suspect
            self._suspect = None
            self._tamper("malformed-line", detail, line)
        return self.lines

    def decode(self, line: str) -> tuple[str, dict[str, Any]] | None:
        """Return the event ``line`` holds, with the text it was read from, or ``None``.

        The text is the line itself, or the recovered event's part of a glued line.
        """
        number = self._next_line()
        value = _parse(line) if line.startswith(("{", "[")) else _INVALID
        if isinstance(value, dict):
            return line, value
        if value is not _INVALID or '{"' not in line:
            return None  # whole JSON that is no event, or a host's plain text line
        found = recover(line)
        if found is None:
            self._suspect = (number, f"a line of {len(line)} characters that is not one event")
            return None
        start, event = found
        self._tamper(
            "glued-line",
            f"{start} foreign characters written in front of a host event "
            f"({str(event.get('type'))[:40]})",
            number,
        )
        return line[start:], event

    def overlong(self, tail: bytes) -> tuple[str, dict[str, Any]] | None:
        """Return the event at the end of a line too long to read whole, if there is one."""
        number = self._next_line()
        text = tail.decode("utf-8", errors="replace").strip()
        found = recover(text, first=0) if text else None
        if found is None:
            self._suspect = (number, "an over-long line that was dropped unread")
            return None
        start, event = found
        self._tamper(
            "glued-line",
            f"an over-long line written in front of a host event ({str(event.get('type'))[:40]})",
            number,
        )
        return text[start:], event
