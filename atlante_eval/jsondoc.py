"""Read JSON and JSONC documents with exact error positions.

``.json`` files are parsed as strict JSON, ``.jsonc`` files with json5 (comments and
trailing commas). Both reject duplicate keys. :func:`locate_pointers` maps every
JSON pointer of a parsed text to the line and column where its value (or, for an
object member, its key) starts, so schema errors point at the exact spot.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "DocumentParseError",
    "DocumentReadError",
    "ParsedDocument",
    "escape_pointer",
    "locate_pointers",
    "parse_document",
    "pointer_from_loc",
    "read_document",
]

#: Largest document this tool reads (configuration, scenario, manifest): 1 MiB.
MAX_DOCUMENT_BYTES = 1024 * 1024


class DocumentReadError(Exception):
    """Raised by :func:`read_document` when a file cannot be read as UTF-8 text."""


class DocumentParseError(Exception):
    """Raised by :func:`parse_document` for malformed text; carries a 1-based position."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A document's text and parsed value."""

    text: str
    value: Any


def read_document(
    path: Path, *, max_bytes: int = MAX_DOCUMENT_BYTES, follow_symlinks: bool = False
) -> str:
    """Read ``path`` as UTF-8 text, by default without following a final symlink.

    Raises:
        DocumentReadError: the path is a symlink or not a regular file, is larger
            than ``max_bytes``, is not valid UTF-8, or cannot be read.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            raise DocumentReadError("is a symbolic link") from exc
        raise DocumentReadError(exc.strerror or str(exc)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentReadError("is not a regular file")
        if info.st_size > max_bytes:
            raise DocumentReadError(
                f"is {info.st_size} bytes, larger than the {max_bytes}-byte limit"
            )
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise DocumentReadError(exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise DocumentReadError(f"is larger than the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentReadError(f"is not valid UTF-8 (byte offset {exc.start})") from exc
    return text.removeprefix("\ufeff")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_JSON5_POSITION = re.compile(r"<string>:(\d+) (.*?) at column (\d+)$")


def parse_document(text: str, *, jsonc: bool) -> Any:
    """Parse ``text`` as strict JSON, or as JSONC when ``jsonc`` is true.

    Raises:
        DocumentParseError: malformed text, a duplicate key, or an empty document.
    """
    if not text.strip():
        raise DocumentParseError("the document is empty", 1, 1)
    try:
        if jsonc:
            return json5.loads(text, object_pairs_hook=_reject_duplicates)
        return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as exc:
        line, column = _find_key(text, exc.key)
        raise DocumentParseError(f'duplicate key "{exc.key}"', line, column) from exc
    except json.JSONDecodeError as exc:
        raise DocumentParseError(exc.msg, exc.lineno, exc.colno) from exc
    except (ValueError, RecursionError) as exc:
        message = str(exc)
        match = _JSON5_POSITION.search(message)
        if match:
            raise DocumentParseError(
                match.group(2), int(match.group(1)), int(match.group(3))
            ) from exc
        raise DocumentParseError(message or type(exc).__name__, 1, 1) from exc


def _find_key(text: str, key: str) -> tuple[int, int]:
    """Return the position of the second occurrence of a quoted key (best effort)."""
    needle = json.dumps(key)
    first = text.find(needle)
    second = text.find(needle, first + 1) if first >= 0 else -1
    offset = second if second >= 0 else max(first, 0)
    return _line_column(text, offset)


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def escape_pointer(token: str | int) -> str:
    """Escape one RFC 6901 reference token."""
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer_from_loc(loc: tuple[str | int, ...]) -> str:
    """Build an RFC 6901 pointer from a sequence of keys and indexes."""
    return "".join(f"/{escape_pointer(part)}" for part in loc)


class _Scanner:
    """A tolerant scanner recording where each value of a JSON/JSONC text starts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.values: dict[str, int] = {}
        self.keys: dict[str, int] = {}

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n\ufeff\u00a0\u2028\u2029":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = n if end < 0 else end + 2
            else:
                return

    def string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos + 1
        self.pos = start
        while self.pos < len(self.text) and self.text[self.pos] != quote:
            self.pos += 2 if self.text[self.pos] == "\\" else 1
        raw = self.text[start : self.pos]
        self.pos += 1
        if quote != '"':
            return raw
        try:
            return str(json.loads(f'"{raw}"'))
        except ValueError:
            return raw

    def bare(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",:]}/ \t\r\n":
            self.pos += 1
        return self.text[start : self.pos]

    def value(self, pointer: str, depth: int) -> None:
        self.skip()
        if self.pos >= len(self.text) or depth > 200:
            return
        self.values[pointer] = self.pos
        ch = self.text[self.pos]
        if ch == "{":
            self.pos += 1
            while True:
                self.skip()
                if self.pos >= len(self.text):
                    return
                if self.text[self.pos] == "}":
                    self.pos += 1
                    return
                key_pos = self.pos
                key = self.string() if self.text[self.pos] in "\"'" else self.bare()
                child = f"{pointer}/{escape_pointer(key)}"
                self.keys[child] = key_pos
                self.skip()
                if self.pos < len(self.text) and self.text[self.pos] == ":":
                    self.pos += 1
                before = self.pos
                self.value(child, depth + 1)
                self.skip()
                if self.pos < len(self.text) and self.text[self.pos] == ",":
                    self.pos += 1
                elif self.pos == before:
                    return
        elif ch == "[":
            self.pos += 1
            index = 0
            while True:
                self.skip()
                if self.pos >= len(self.text):
                    return
                if self.text[self.pos] == "]":
                    self.pos += 1
                    return
                before = self.pos
                self.value(f"{pointer}/{index}", depth + 1)
                index += 1
                self.skip()
                if self.pos < len(self.text) and self.text[self.pos] == ",":
                    self.pos += 1
                elif self.pos == before:
                    return
        elif ch in "\"'":
            self.string()
        else:
            if not self.bare():
                self.pos += 1


def locate_pointers(text: str) -> dict[str, tuple[int, int]]:
    """Map JSON pointers of ``text`` to 1-based (line, column) positions.

    Object members map to their key's position, other values to the value's start;
    the root is ``""``. The scan is tolerant: on malformed text it returns what it
    found so far.
    """
    scanner = _Scanner(text)
    scanner.value("", 0)
    offsets = {**scanner.values, **scanner.keys}
    return {pointer: _line_column(text, offset) for pointer, offset in offsets.items()}
