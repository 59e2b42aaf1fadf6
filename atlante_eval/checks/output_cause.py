"""Why a command check's program failed, in one line, chosen as a person reads its output.

A person looks at the *end* of a test run's output for the line that says what
went wrong: pytest's ``FAILED test - AssertionError: ...``, the last line of a
Python traceback, a ``--- FAIL`` of ``go test`` and the message under it, jest's
and vitest's ``●``/``FAIL`` block, bun's ``error: expect(...)``, node's test
runner's ``not ok`` or ``✖`` with its ``AssertionError``. :func:`output_cause`
tries each runner's shape, from the end of the output backwards; when none
matches, it takes the last line that names an error, and else the last
non-blank line. :attr:`OutputCause.source` says which rule chose the line, so a
cause never passes a guess off as a runner's verdict.

Each runner is one function in :data:`RUNNERS` (tried in order); adding one is
a function and a line. The output is untrusted text: callers escape the line
before it reaches a terminal or a page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["RUNNERS", "OutputCause", "output_cause"]


@dataclass(frozen=True, slots=True)
class OutputCause:
    """The line of a program's output that says why it failed, and who said it."""

    line: str
    """The message (stripped), e.g. ``AssertionError: assert 1.0 == 1.25``."""
    source: str
    """The runner whose shape matched (``pytest``, ``go test``, ...), ``error line``,
    ``last line``, or ``output`` when the output is that one line."""
    test: str | None = None
    """The failing test, when the runner names it."""
    more: int = 0
    """Further failures the runner reported."""

    def describe(self) -> str:
        """``pytest: AssertionError: assert 1 == 2 · tests/test_x.py::test_y (+1 more failed)``.

        The source leads, so a shortened line still says who chose it.
        """
        if self.source == "output":
            return self.line
        where = f" · {self.test}" if self.test else ""
        more = f" (+{self.more} more failed)" if self.more else ""
        return f"{self.source}: {self.line}{where}{more}"


def _clean(lines: Sequence[str]) -> list[str]:
    """The lines without trailing blanks (and without carriage returns)."""
    return [line.rstrip().replace("\r", "") for line in lines]


_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+\.py(?:::\S+)?)(?: - (.+))?$")
_PYTEST_E = re.compile(r"^E\s{2,}(\S.*)$")
_PYTEST_SUMMARY = re.compile(r"^=*\s*(?:\d+ \w+, )*\d+ (?:failed|errors?)\b.* in [\d.]+s")


def _pytest(lines: list[str]) -> OutputCause | None:
    """pytest: the short summary's ``FAILED test - message`` lines, else the last ``E`` line."""
    failed = [m for m in map(_PYTEST_FAILED.match, lines) if m]
    errors = [m.group(1) for m in map(_PYTEST_E.match, lines) if m]
    if not failed and not (errors and any(_PYTEST_SUMMARY.match(x) for x in lines)):
        return None
    if failed:
        first = failed[0]
        message = first.group(2) or _error_of(errors) or "failed"
        return OutputCause(message, "pytest", first.group(1), len(failed) - 1)
    return OutputCause(_error_of(errors) or errors[-1], "pytest")


def _error_of(candidates: Sequence[str]) -> str | None:
    """The first candidate naming an exception (``AssertionError: ...``), if any."""
    return next((c for c in candidates if _EXCEPTION.match(c)), None)


_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Failure)\b")
_TRACEBACK = "Traceback (most recent call last):"
_UNITTEST_TEST = re.compile(r"^(?:FAIL|ERROR): (\S+)(?: \((.+)\))?")


def _python(lines: list[str]) -> OutputCause | None:
    """A Python traceback (unittest's too): the exception line that ends it."""
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    if not starts:
        return None
    for line in lines[starts[-1] + 1 :]:
        if _EXCEPTION.match(line.strip()) and not line.startswith(" "):
            tests = [m for m in map(_UNITTEST_TEST.match, lines) if m]
            if tests:
                test = tests[0].group(2) or tests[0].group(1)
                return OutputCause(line.strip(), "unittest", test, len(tests) - 1)
            return OutputCause(line.strip(), "python")
    return None


_GO_FAIL = re.compile(r"^\s*--- FAIL: (\S+)")
_GO_PANIC = re.compile(r"^panic: (.+)")
_GO_MESSAGE = re.compile(r"^\s+(\S+_test\.go:\d+: .+)$")
_GO_BOUNDARY = re.compile(r"^\s*(?:---|===) ")


def _go_message(lines: Sequence[str], index: int) -> str:
    """The ``x_test.go:N: message`` of the failure at ``index``: after it, else (``-v``) before."""
    for line in lines[index + 1 :]:
        if _GO_BOUNDARY.match(line):
            break
        if match := _GO_MESSAGE.match(line):
            return match.group(1)
    for line in reversed(lines[:index]):
        if _GO_BOUNDARY.match(line):
            break
        if match := _GO_MESSAGE.match(line):
            return match.group(1)
    return "failed"


def _go(lines: list[str]) -> OutputCause | None:
    """go test: the message of the first ``--- FAIL: Test``, or a ``panic:``."""
    for line in lines:
        if panic := _GO_PANIC.match(line):
            return OutputCause(f"panic: {panic.group(1)}", "go test")
    failures = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _GO_FAIL.match(line))]
    if not failures:
        return None
    index, test = failures[0]
    return OutputCause(_go_message(lines, index), "go test", test, len(failures) - 1)


_JEST_BULLET = re.compile(r"^\s*\u25cf (.+)$")
_JEST_SEPARATOR = "\u203a"  # jest's "Suite > test" separator
_EXPECTED = re.compile(r"^\s*(Expected|Received)(?: [\w ]+)?:\s*(.*)$")


def _expectation(lines: Sequence[str]) -> str:
    """`` — Expected: 2, Received: 1`` from the lines after a failed ``expect``."""
    found = [f"{m.group(1)}: {m.group(2).strip()}" for m in map(_EXPECTED.match, lines[:12]) if m]
    return f" — {', '.join(found[:2])}" if found else ""


def _jest(lines: list[str]) -> OutputCause | None:
    """jest: the first bulleted ``Suite > test`` block: its first line and Expected/Received."""
    bullets = [
        i
        for i, line in enumerate(lines)
        if (m := _JEST_BULLET.match(line)) and _JEST_SEPARATOR in m.group(1)
    ]
    if not bullets:
        return None
    first = bullets[0]
    match = _JEST_BULLET.match(lines[first])
    assert match is not None
    body = [x.strip() for x in lines[first + 1 :] if x.strip()]
    message = (body[0] if body else "failed") + _expectation(lines[first + 1 :])
    return OutputCause(message, "jest", match.group(1), len(bullets) - 1)


_VITEST_FAIL = re.compile(r"^\s*(?:[\u00d7\u2717\u276f]\s*)?FAIL\s+(\S.*?)\s*$")


def _vitest(lines: list[str]) -> OutputCause | None:
    """vitest: a ``FAIL file > suite > test`` header and the error line under it."""
    heads = [i for i, line in enumerate(lines) if _VITEST_FAIL.match(line) and ">" in line]
    if not heads:
        return None
    first = heads[0]
    match = _VITEST_FAIL.match(lines[first])
    assert match is not None
    after = lines[first + 1 :]
    message = next((x.strip() for x in after if _EXCEPTION.match(x.strip())), None)
    if message is None:
        message = next((x.strip() for x in after if x.strip()), "failed")
    return OutputCause(message, "vitest", match.group(1), len(heads) - 1)


_BUN_FAIL = re.compile(r"^\(fail\) (.+?)(?: \[[\d.]+m?s\])?$")
_BUN_ERROR = re.compile(r"^error: (.+)$")


def _bun(lines: list[str]) -> OutputCause | None:
    """bun test: the ``error: expect(...)`` line (with Expected/Received) of a ``(fail)`` test."""
    failed = [m.group(1) for m in map(_BUN_FAIL.match, lines) if m]
    if not failed:
        return None
    for index, line in enumerate(lines):
        error = _BUN_ERROR.match(line)
        if error:
            message = error.group(1).strip() + _expectation(lines[index + 1 :])
            return OutputCause(message, "bun test", failed[0], len(failed) - 1)
    return OutputCause("failed", "bun test", failed[0], len(failed) - 1)


_TAP_NOT_OK = re.compile(r"^\s*not ok \d+ - (.+?)(?: # .*)?$")
_TAP_ERROR = re.compile(r"^(\s*)error: ?(.*)$")
_SPEC_FAIL = re.compile(r"^\s*✖ (.+?)(?: \([\d.]+m?s\))?$")
_BLOCK_SCALAR = re.compile(r"^[|>][-+]?$")


def _tap_error(lines: Sequence[str]) -> str | None:
    """The ``error:`` of a TAP failure's YAML block (a block scalar's lines joined)."""
    for index, line in enumerate(lines):
        if line.strip() == "...":
            return None
        match = _TAP_ERROR.match(line)
        if match is None:
            continue
        value = match.group(2).strip()
        if not _BLOCK_SCALAR.match(value):
            return value.strip("'\"") or None
        indent = len(match.group(1))
        body = []
        for more in lines[index + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= indent:
                break
            if more.strip():
                body.append(more.strip())
        return " ".join(body) or None
    return None


def _spec_error(lines: Sequence[str]) -> str | None:
    """The exception line under a spec reporter's failure, joined to its continuation."""
    for index, line in enumerate(lines[:30]):
        text = line.strip()
        if not _EXCEPTION.match(text):
            continue
        if text.endswith(":"):
            following = next((x.strip() for x in lines[index + 1 : index + 5] if x.strip()), "")
            if following and not following.startswith("at "):
                text = f"{text} {following}"
        return text
    return None


def _node(lines: list[str]) -> OutputCause | None:
    """node's test runner: ``not ok N - test`` (TAP) or ``✖ test`` (spec), with its error."""
    tap = any(_TAP_NOT_OK.match(x) for x in lines)
    pattern = _TAP_NOT_OK if tap else _SPEC_FAIL
    failed = [(i, m.group(1)) for i, line in enumerate(lines) if (m := pattern.match(line))]
    # The spec reporter repeats failures in a closing list: count each test once.
    names = list(dict.fromkeys(name for _, name in failed if name != "failing tests:"))
    if not names:
        return None
    index = next(i for i, name in failed if name == names[0])
    after = lines[index + 1 :]
    message = _tap_error(after) if tap else _spec_error(after)
    return OutputCause(message or "failed", "node --test", names[0], len(names) - 1)


_ERROR_WORD = re.compile(r"(?i)\b(?:error|exception|assert\w*|panic|fatal|failed|failure)\b")


def _error_line(lines: list[str]) -> OutputCause | None:
    """The last line that names an error; a bare count (``2 failed``) only when none else does."""
    named = [x.strip() for x in lines if x.strip() and _ERROR_WORD.search(x)]
    telling = [x for x in named if not _BARE_SUMMARY.match(x)]
    chosen = telling or named
    return OutputCause(chosen[-1], "error line") if chosen else None


_BARE_SUMMARY = re.compile(
    r"^(?:FAILED \((?:failures|errors)=\d+.*\)|FAIL|exit status \d+"
    r"|\d+ (?:errors?|failures?|failed)\b.*)$"
)

#: The runners recognised, in the order they are tried.
RUNNERS: tuple[Callable[[list[str]], OutputCause | None], ...] = (
    _pytest,
    _go,
    _jest,
    _vitest,
    _bun,
    _node,
    _python,
)


def output_cause(output: str) -> OutputCause | None:
    """The line of ``output`` that says why its program failed (``None`` for no output).

    Tries each of :data:`RUNNERS`, then the last line naming an error, then the
    last non-blank line (the only one: ``output``).
    """
    lines = _clean(output.splitlines())
    if not any(line.strip() for line in lines):
        return None
    for runner in (*RUNNERS, _error_line):
        found = runner(lines)
        if found is not None and found.line:
            return found
    filled = [line.strip() for line in lines if line.strip()]
    return OutputCause(filled[-1], "output" if len(filled) == 1 else "last line")
