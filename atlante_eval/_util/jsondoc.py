"""Read JSON and JSONC documents with exact error positions.

``.json`` files are parsed as strict JSON; ``.jsonc`` files are parsed with json5,
so they may hold ``//`` and ``/* */`` comments and trailing commas. Both report
errors with their line and column, and reject duplicate keys and the non-JSON
constants ``NaN`` and ``Infinity``.
:func:`locate_pointers` maps every JSON pointer of a parsed text to the line and
column where its value (or, for an object member, its key) starts, so schema
errors point at the exact spot.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "DocumentParseError",
    "DocumentReadError",
    "ParsedDocument",
    "escape_pointer",
    "join_surrogates",
    "json_depth",
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
    # O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then rejects it).
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if Path(path).is_symlink():
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


def _reject_duplicates(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
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


class _BadConstant(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _reject_constant(name: str) -> Any:
    raise _BadConstant(name)


_JSON5_POSITION = re.compile(r"<string>:(\d+) (.*) at column (\d+)$", re.DOTALL)
_BARE_CONSTANT = re.compile(r'"(?:[^"\\\n]|\\.)*+"?|(-?Infinity|NaN)', re.DOTALL)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """Return how deeply the arrays and objects of JSON ``text`` nest, without parsing it.

    Brackets inside strings do not count; malformed text gives a number that the
    parser then rejects anyway. Linear in the text, no recursion.
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        depth += _BRACKET_STEP[char]
        deepest = max(deepest, depth)
    return deepest


def join_surrogates(value: Any, *, text: str | None = None) -> Any:
    """Make every string of a parsed JSON value encodable as UTF-8.

    ``\\ud83d\\ude00``-style escape pairs (which json5 leaves apart) are joined, and
    a lone surrogate escape becomes U+FFFD, so nothing read from a document or a
    host stream can break writing the report. With ``text``, the walk is skipped
    when the source holds no surrogate escape.
    """
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return value
    return _join_surrogates(value)


def _join_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, list):
        return [_join_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_join_surrogates(k): _join_surrogates(v) for k, v in value.items()}
    return value


_JSON5_DUPLICATE = re.compile(r'^Duplicate key "(.*)" found in object$', re.DOTALL)


def _parse_jsonc(text: str) -> Any:
    """Parse JSONC with json5 (a superset: comments, trailing commas, JSON5 syntax).

    json5 re-raises errors from hooks as plain ``ValueError``; they are turned back
    into the duplicate-key and constant errors here.

    Most documents are plain JSON: the json module reads them first (a hundred times
    faster than json5's parser, which took about 3 ms for a ten-line
    ``atlante.jsonc``; the same values once surrogates are joined), and whatever it
    refuses (comments, trailing commas, any error) is read by json5 as before, so
    every error is json5's (imported then: a plain document never needs it).
    """
    with contextlib.suppress(ValueError, RecursionError):
        return join_surrogates(
            json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant),
            text=text,
        )
    import json5

    def constant(name: str) -> Any:
        raise ValueError(f"\0constant:{name}")

    try:
        return join_surrogates(
            json5.loads(text, parse_constant=constant, allow_duplicate_keys=False), text=text
        )
    except ValueError as exc:
        message = str(exc)
        if message.startswith("\0constant:"):
            raise _BadConstant(message.removeprefix("\0constant:")) from exc
        duplicate = _JSON5_DUPLICATE.match(message)
        if duplicate:
            raise _DuplicateKey(duplicate.group(1)) from exc
        match = _JSON5_POSITION.search(message)
        if match is None:
            raise DocumentParseError(message or "malformed JSONC", 1, 1) from exc
        detail = match.group(2).replace("\n", "end of line").replace("\r", "end of line")
        raise DocumentParseError(detail, int(match.group(1)), int(match.group(3))) from exc


_JSON_WHITESPACE = " \t\n\r"


def _trailing_comma_close(text: str, offset: int) -> int | None:
    """The offset of the bracket a trailing comma precedes, if the error is one.

    Python 3.11 and 3.12 report a trailing comma at the closing bracket; 3.13 and
    later report it at the comma itself. Both become the closing bracket.
    """
    if text.startswith(",", offset):
        rest = text[offset + 1 :]
        closing = offset + 1 + len(rest) - len(rest.lstrip(_JSON_WHITESPACE))
    elif text[:offset].rstrip(_JSON_WHITESPACE).endswith(","):
        closing = offset
    else:
        return None
    return closing if text.startswith(("}", "]"), closing) else None


def _strict_json_hint(text: str, offset: int, message: str) -> tuple[str, int]:
    """Explain an error that is JSONC syntax in a strict ``.json`` document.

    Returns:
        The message and the offset to report it at (the same on every Python).
    """
    if text.startswith(("//", "/*"), offset):
        return "comments are not allowed in strict JSON (use a .jsonc file for comments)", offset
    closing = _trailing_comma_close(text, offset)
    if closing is not None:
        return "trailing commas are not allowed in strict JSON (use a .jsonc file)", closing
    return message, offset


def parse_document(text: str, *, jsonc: bool) -> Any:
    """Parse ``text`` as strict JSON, or with json5 when ``jsonc`` is true.

    ``.jsonc`` documents are read by json5, so comments and trailing commas work
    (and, being JSON5, so do single-quoted strings, unquoted keys and hexadecimal
    numbers); ``NaN``, ``Infinity`` and duplicate keys are rejected in both modes.

    Raises:
        DocumentParseError: malformed text, a duplicate key, a non-JSON constant
            (``NaN``, ``Infinity``), or an empty document; with the 1-based line and
            column of the problem.
    """
    source = text
    if not source.strip():
        raise DocumentParseError("the document is empty", 1, 1)
    try:
        if jsonc:
            return _parse_jsonc(source)
        return join_surrogates(
            json.loads(
                source, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
            ),
            text=source,
        )
    except _DuplicateKey as exc:
        key, offset = _first_duplicate(source, exc.key)
        line, column = _line_column(source, offset)
        raise DocumentParseError(f'duplicate key "{key}"', line, column) from exc
    except _BadConstant as exc:
        offset = _constant_offset(source, exc.name)
        line, column = _line_column(source, offset)
        raise DocumentParseError(f"{exc.name} is not valid JSON", line, column) from exc
    except json.JSONDecodeError as exc:
        if jsonc:
            raise DocumentParseError(exc.msg, exc.lineno, exc.colno) from exc
        message, offset = _strict_json_hint(source, exc.pos, exc.msg)
        line, column = _line_column(source, offset)
        raise DocumentParseError(message, line, column) from exc
    except RecursionError as exc:
        raise DocumentParseError("the document is nested too deeply", 1, 1) from exc


def _constant_offset(text: str, name: str) -> int:
    """Return the offset of the first bare ``name`` constant outside strings."""
    for match in _BARE_CONSTANT.finditer(text):
        if match.group(1) == name:
            return match.start(1)
    return 0


def _first_duplicate(text: str, fallback: str) -> tuple[str, int]:
    """Return the first duplicate key in text order and its offset (best effort)."""
    scanner = _Scanner(text)
    scanner.value("", 0)
    if scanner.duplicate is not None:
        return scanner.duplicate
    return fallback, 0


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
        self.duplicate: tuple[str, int] | None = None
        """The first key repeated inside one object, and its offset."""

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

    def value(self, pointer: str, depth: int) -> None:  # noqa: C901 - a scanner's dispatch table
        self.skip()
        if self.pos >= len(self.text) or depth > 200:
            return
        self.values[pointer] = self.pos
        ch = self.text[self.pos]
        if ch == "{":
            self.pos += 1
            seen: set[str] = set()
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
                if key in seen and self.duplicate is None:
                    self.duplicate = (key, key_pos)
                seen.add(key)
                self.keys.setdefault(child, key_pos)
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
