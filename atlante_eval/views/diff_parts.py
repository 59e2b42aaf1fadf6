"""A trial's diff split into its text changes and its binary files.

git marks a file whose content is binary (a ``__pycache__/*.pyc``, an image)
with one ``Binary files a/x and b/x differ`` line in place of its hunks; the
views list such files apart, by name and kind of change (``added``, ``deleted``,
``changed``), and show the diff of the text files only, so compiled artefacts
read as what they are instead of as noise in the middle of the code changes.
The text is as recorded (untrusted): renderers escape it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["BinaryFile", "DiffParts", "split_diff"]

_HEADER = "diff --git "
#: How the engine's notes after a diff begin (``… truncated``, ``… 3 changed path(s) ...``).
_NOTE = "\u2026 "
_BINARY = re.compile(r"^Binary files (?P<old>.+) and (?P<new>.+) differ$")


@dataclass(frozen=True, slots=True)
class BinaryFile:
    """A binary file the diff names but cannot show."""

    path: str
    """Its path in the sandbox."""
    change: str
    """``added``, ``deleted`` or ``changed``."""


@dataclass(frozen=True, slots=True)
class DiffParts:
    """A diff as the views show it."""

    text: str
    """The diff without the binary files' sections (the notes after it kept)."""
    binary: list[BinaryFile]
    """The binary files, in diff order."""


def _side(name: str) -> str:
    """``a/x`` or ``b/x`` as ``x`` (``/dev/null`` stays)."""
    return name[2:] if name[:2] in ("a/", "b/") else name


def _binary(section: list[str]) -> BinaryFile | None:
    """The binary file a ``diff --git`` section is about, when it is one."""
    for line in section[1:]:
        found = _BINARY.match(line)
        if found is None:
            continue
        old, new = found["old"], found["new"]
        if old == "/dev/null":
            return BinaryFile(_side(new), "added")
        if new == "/dev/null":
            return BinaryFile(_side(old), "deleted")
        return BinaryFile(_side(new), "changed")
    return None


def split_diff(diff: str) -> DiffParts:
    """Split ``diff`` (``git diff`` output) into its text sections and its binary files."""
    sections: list[list[str]] = [[]]
    for line in diff.split("\n"):
        if line.startswith(_HEADER):
            sections.append([])
        sections[-1].append(line)
    kept: list[str] = []
    binary: list[BinaryFile] = []
    for section in sections:
        found = _binary(section) if section and section[0].startswith(_HEADER) else None
        if found is None:
            kept.extend(section)
        else:
            binary.append(found)
            kept.extend(line for line in section if line.startswith(_NOTE))  # the cut's notes
    return DiffParts("\n".join(kept), binary)
