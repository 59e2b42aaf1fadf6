"""Terminal conventions shared by the CLI and the progress printer (import-light)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic

__all__ = ["first_line", "printable", "safe_diagnostic", "shorten", "use_color"]

# C0 controls (newline and tab handled apart), DEL, C1 controls, the Unicode
# bidirectional overrides and isolates that reorder what a terminal shows, and
# lone surrogates (the undecodable bytes of a non-UTF-8 path, which could not
# even be encoded for the terminal).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_DIAGNOSTIC_TEXT = frozenset({"message", "source", "pointer", "expected", "next", "cause"})
_LINE_BREAKS = re.compile("\r\n|[\n\r\t]")


def use_color(stream: object) -> bool:
    """Colour only an interactive stream, and only when ``NO_COLOR`` is unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    r"""Return untrusted ``text`` safe for a terminal: control characters shown as ``\xNN``.

    Escape sequences (``ESC[...``) therefore print as text instead of acting. Unless
    ``multiline``, line breaks and tabs become spaces, so the result is one line.
    """
    if not multiline:
        text = _LINE_BREAKS.sub(" ", text)
    else:
        text = text.replace("\r\n", "\n").replace("\r", "\\r")
    return _CONTROL.sub(_escape, text)


def safe_diagnostic(diagnostic: Diagnostic) -> Diagnostic:
    """Return ``diagnostic`` with every text field made :func:`printable` (lines kept)."""
    texts = diagnostic.model_dump(include=set(_DIAGNOSTIC_TEXT))
    return diagnostic.model_copy(
        update={k: printable(v, multiline=True) for k, v in texts.items() if isinstance(v, str)}
    )


def shorten(text: str, width: int) -> str:
    """Cut ``text`` to at most ``width`` characters, marking the cut with ``…``."""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)].rstrip() + "…"


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (stripped), or ``""``."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
