"""Command outputs shown in the docs, checked against the goldens a test regenerates.

A fenced block in ``README.md`` or ``docs/*.md`` that shows what a command
prints is marked with the golden file the tests compare the real output with::

    <!-- output: tutorial-step-2 -->
    ```text
    ...
    ```

``tests/golden/docs/<name>.txt`` holds the command's real output (masked: run
ids, durations, temporary paths); a test follows the document and compares
(``ATLANTE_UPDATE_GOLDEN=1`` rewrites it). This module checks the other half:
the block equals the golden (``<!-- output: NAME shortened -->``: its lines are
the golden's, in order, some left out), every golden is shown somewhere, and no
block shows a ``selftest`` table without a marker, the drift this check was
written for (a tutorial's table without the CHEATS column nobody compared).
``python -m tools.docs_outputs`` rewrites the exact blocks from their goldens.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GOLDEN_DIR", "MarkedBlock", "marked_blocks", "output_problems", "update_docs"]

#: Where the goldens of documented outputs live, relative to the repository root.
GOLDEN_DIR = Path("tests") / "golden" / "docs"

_MARKER = re.compile(
    r"^<!-- output: (?P<name>[a-z0-9][a-z0-9-]*)(?P<short> shortened)? -->\n\n?"
    r"(?P<fence>```[a-z]*\n)(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
#: The header of the table ``selftest`` prints: an output worth checking.
_SELFTEST_TABLE = re.compile(r"^[ \t]*SCENARIO[ \t]+NULL AGENT[ \t]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class MarkedBlock:
    """A fenced block marked as a command's output."""

    name: str
    """The golden's name (``tests/golden/docs/<name>.txt``)."""
    shortened: bool
    """The block leaves lines of the output out."""
    body: str
    """The block's text (ending with a newline)."""
    start: int
    """Offset of the body in the document."""
    end: int
    """Offset just past the body."""


def marked_blocks(text: str) -> Iterator[MarkedBlock]:
    """The marked output blocks of a Markdown document, in order."""
    for match in _MARKER.finditer(text):
        yield MarkedBlock(
            name=match["name"],
            shortened=bool(match["short"]),
            body=match["body"],
            start=match.start("body"),
            end=match.end("body"),
        )


def _documents(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _in_order(shown: list[str], whole: list[str]) -> bool:
    """Whether ``shown`` is ``whole`` with some lines left out."""
    remaining = iter(whole)
    return all(any(line == candidate for candidate in remaining) for line in shown)


def _block_problems(document: str, block: MarkedBlock, golden: Path) -> Iterator[str]:
    where = f"{document}: output block {block.name!r}"
    if not golden.is_file():
        yield f"{where}: no golden {golden.as_posix()} (a test must produce it)"
        return
    expected = golden.read_text(encoding="utf-8")
    if block.shortened:
        if not _in_order(block.body.splitlines(), expected.splitlines()):
            yield f"{where}: its lines are not the golden's, in order ({golden.name})"
    elif block.body != expected:
        yield f"{where}: differs from {golden.name} (run `python -m tools.docs_outputs`)"


def output_problems(root: Path) -> list[str]:
    """Every documented output that drifted from its golden, or that nothing checks."""
    problems: list[str] = []
    shown: set[str] = set()
    for path in _documents(root):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        document = path.relative_to(root).as_posix()
        blocks = list(marked_blocks(text))
        for block in blocks:
            shown.add(block.name)
            golden = root / GOLDEN_DIR / f"{block.name}.txt"
            problems.extend(_block_problems(document, block, golden))
        covered = [(b.start, b.end) for b in blocks]
        for table in _SELFTEST_TABLE.finditer(text):
            if not any(start <= table.start() < end for start, end in covered):
                line = text.count("\n", 0, table.start()) + 1
                problems.append(
                    f"{document}:{line}: a selftest table no test checks "
                    "(mark its fenced block `<!-- output: NAME -->` and produce the golden "
                    "in a test)"
                )
    golden_dir = root / GOLDEN_DIR
    if golden_dir.is_dir():
        for golden in sorted(golden_dir.glob("*.txt")):
            if golden.stem not in shown:
                problems.append(f"{(GOLDEN_DIR / golden.name).as_posix()}: shown in no document")
    return problems


def update_docs(root: Path) -> list[Path]:
    """Rewrite every exact marked block from its golden; return the documents changed."""
    changed: list[Path] = []
    for path in _documents(root):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        updated = text
        for block in reversed(list(marked_blocks(text))):
            golden = root / GOLDEN_DIR / f"{block.name}.txt"
            if block.shortened or not golden.is_file():
                continue
            body = golden.read_text(encoding="utf-8")
            updated = updated[: block.start] + body + updated[block.end :]
        if updated != text:
            path.write_text(updated, encoding="utf-8")
            changed.append(path)
    return changed


def main() -> int:
    """Rewrite the exact output blocks from their goldens; print what changed."""
    root = Path(__file__).resolve().parent.parent
    for path in update_docs(root):
        print(f"docs_outputs: rewrote {path.relative_to(root)}")
    problems = output_problems(root)
    for problem in problems:
        print(f"docs_outputs: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
