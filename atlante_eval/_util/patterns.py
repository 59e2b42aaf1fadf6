"""Regular expressions of checks: one syntax, validated once, matched in bounded time.

Patterns use Python ``re`` syntax (what validation has always accepted). Matching
runs on the ``regex`` engine with a time limit and with the GIL released, in a
worker thread, so a catastrophic pattern such as ``(a+)+$`` can neither hang
grading nor block the event loop or signal handling: it ends after
:data:`PATTERN_TIMEOUT_MS` and its check fails with that as evidence.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

if TYPE_CHECKING:
    import regex

__all__ = [
    "PATTERN_TIMEOUT_MS",
    "CompiledPattern",
    "MatchOutcome",
    "PatternError",
    "compile_pattern",
    "has_nested_quantifier",
    "pattern_problem",
    "search",
    "search_sync",
    "timeout_message",
]

#: How long one search of one check may take before it counts as failed.
PATTERN_TIMEOUT_MS = 2000

MatchOutcome = Literal["match", "no-match", "timeout"]


class PatternError(ValueError):
    """Raised by :func:`compile_pattern` when a pattern is not a valid regular expression."""


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    """A validated pattern, compiled for bounded matching."""

    source: str
    """The pattern as the scenario wrote it."""
    compiled: regex.Pattern[str]


def pattern_problem(source: str) -> str | None:
    """Return why ``source`` is not an accepted pattern, or ``None`` when it is."""
    try:
        re.compile(source)
    except re.error as exc:
        return str(exc)
    except (RecursionError, OverflowError, ValueError) as exc:
        return f"pattern is too complex ({type(exc).__name__})"
    import regex  # the matcher loads with the first pattern: a run without one never pays for it

    try:
        regex.compile(source, regex.VERSION0)
    except (regex.error, RecursionError, OverflowError, ValueError) as exc:
        return f"unsupported by the matcher: {exc}"
    return None


def compile_pattern(source: str) -> CompiledPattern:
    """Compile ``source`` (Python ``re`` syntax) for :func:`search`; raise :class:`PatternError`."""
    problem = pattern_problem(source)
    if problem is not None:
        raise PatternError(problem)
    import regex

    return CompiledPattern(source, regex.compile(source, regex.VERSION0))


def timeout_message(timeout_ms: int | None = None) -> str:
    """Return the evidence text of a search that ran out of time."""
    return f"pattern timed out after {timeout_ms or PATTERN_TIMEOUT_MS} ms"


def search_sync(
    pattern: CompiledPattern, text: str, *, timeout_ms: int | None = None
) -> MatchOutcome:
    """Search ``text`` for ``pattern`` for at most ``timeout_ms``, releasing the GIL meanwhile."""
    limit_s = (timeout_ms or PATTERN_TIMEOUT_MS) / 1000
    try:
        found = pattern.compiled.search(text, concurrent=True, timeout=limit_s)
    except TimeoutError:
        return "timeout"
    return "match" if found is not None else "no-match"


async def search(
    pattern: CompiledPattern, text: str, *, timeout_ms: int | None = None
) -> MatchOutcome:
    """Search in a daemon thread; the caller's cancellation (Ctrl-C) returns at once.

    The thread signals completion through a pipe, so waiting needs no worker from
    the event loop's pool, and a cancelled search never delays the process's exit:
    the thread is a daemon and ends by itself when its time is up.
    """
    outcome: list[MatchOutcome | BaseException] = []
    read_fd, write_fd = os.pipe()

    def work() -> None:
        try:
            outcome.append(search_sync(pattern, text, timeout_ms=timeout_ms))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting task
            outcome.append(exc)
        finally:
            os.close(write_fd)

    try:
        threading.Thread(target=work, name="atlante-eval pattern", daemon=True).start()
    except BaseException:
        os.close(write_fd)
        os.close(read_fd)
        raise
    try:
        await anyio.wait_readable(read_fd)
    finally:
        os.close(read_fd)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


_UNBOUNDED = frozenset("*+")


def _quantifier_at(source: str, index: int) -> tuple[bool, int] | None:
    """Return (unbounded, length) of a quantifier starting at ``index``, if one does."""
    if index >= len(source):
        return None
    char = source[index]
    if char in _UNBOUNDED:
        return True, 1
    if char == "?":
        return False, 1
    if char == "{":
        match = re.match(r"\{(\d*)(,?)(\d*)\}", source[index:])
        if match and (match.group(1) or match.group(3)):
            unbounded = bool(match.group(2)) and not match.group(3)
            return unbounded, match.end()
    return None


def has_nested_quantifier(source: str) -> bool:
    """Whether a group holding an unbounded quantifier is itself repeated without bound.

    Such patterns (``(a+)+``, ``(?:x*y?)*``) can take exponential time on text that
    almost matches. This is a syntactic hint for validation, not a proof either way.
    """
    stack: list[bool] = []  # per open group: does it contain an unbounded quantifier?
    index = 0
    length = len(source)
    while index < length:
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _skip_class(source, index)
            continue
        if char == "(":
            stack.append(False)
            index += 1
            continue
        if char == ")" and stack:
            inner = stack.pop()
            quantifier = _quantifier_at(source, index + 1)
            if quantifier is not None:
                unbounded, size = quantifier
                if inner and unbounded:
                    return True
                if stack and (inner or unbounded):
                    stack[-1] = True
                index += 1 + size
                continue
            if stack and inner:
                stack[-1] = True
            index += 1
            continue
        quantifier = _quantifier_at(source, index)
        if quantifier is not None and index > 0:
            unbounded, size = quantifier
            if unbounded and stack:
                stack[-1] = True
            index += size
            continue
        index += 1
    return False


def _skip_class(source: str, start: int) -> int:
    """Return the index just past the character class opening at ``start``."""
    index = start + 1
    if index < len(source) and source[index] == "^":
        index += 1
    if index < len(source) and source[index] == "]":
        index += 1
    while index < len(source):
        if source[index] == "\\":
            index += 2
            continue
        if source[index] == "]":
            return index + 1
        index += 1
    return index
