"""Check that the documentation is current: every diagnostic code and every link.

Run from the repository root::

    python -m tools.docs_check

Fails (exit status 1, one line per problem on stderr) when a code of
:data:`atlante_eval.diagnostics.CODES` is not documented in
``docs/diagnostics.md``, when the table of public names in ``docs/python-api.md``
is out of date (see :mod:`tools.public_api`), when a command output shown in the
docs differs from the golden a test produces, or a ``selftest`` table is shown
without one (see :mod:`tools.docs_outputs`), or when a relative Markdown link in
``docs/*.md`` or ``README.md`` points at a file (or a heading anchor in a
Markdown file) that does not exist.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

from atlante_eval.diagnostics import CODES

from . import docs_outputs, public_api

__all__ = ["check_docs", "main"]

#: The repository root (this file is ``<root>/tools/docs_check.py``).
ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(
    r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE
)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> str:
    """Remove fenced code blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> Iterator[str]:
    """Yield the targets of inline and reference-style links outside code."""
    prose = _prose(text)
    for pattern in (_INLINE_LINK, _REFERENCE_LINK):
        for match in pattern.finditer(prose):
            yield match.group(1)


def _slug(heading: str) -> str:
    """Return the GitHub anchor of a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Return every heading anchor of a Markdown text (repeated headings get ``-1``, ...)."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        slug = _slug(match.group(1))
        count = counts.get(slug, 0)
        counts[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _link_problems(document: Path, root: Path) -> Iterator[str]:
    text = document.read_text(encoding="utf-8")
    shown = document.relative_to(root).as_posix()
    for target in links(text):
        if _EXTERNAL.match(target) or target.startswith("//"):
            continue
        path_part, _, fragment = target.partition("#")
        path_part = unquote(path_part.split("?", 1)[0])
        if path_part.startswith("/"):
            yield f"{shown}: link {target!r} is absolute; use a relative path"
            continue
        linked = (document.parent / path_part).resolve() if path_part else document
        if not linked.exists():
            yield f"{shown}: link {target!r} points at a missing file"
            continue
        if (
            fragment
            and linked.suffix == ".md"
            and linked.is_file()
            and unquote(fragment) not in anchors(linked.read_text(encoding="utf-8"))
        ):
            yield f"{shown}: link {target!r} points at a missing heading"


def check_docs(root: Path = ROOT, codes: Iterable[str] = CODES) -> list[str]:
    """Return every documentation problem under ``root`` (an empty list when all is well)."""
    problems: list[str] = []
    diagnostics = root / "docs" / "diagnostics.md"
    if not diagnostics.is_file():
        problems.append("docs/diagnostics.md is missing")
    else:
        documented = set(re.findall(r"`([a-z0-9-]+)`", diagnostics.read_text(encoding="utf-8")))
        problems.extend(
            f"docs/diagnostics.md: code `{code}` is not documented"
            for code in sorted(set(codes) - documented)
        )
    problems.extend(public_api.problems(root))
    problems.extend(docs_outputs.output_problems(root))
    documents = [*sorted((root / "docs").glob("*.md")), root / "README.md"]
    for document in documents:
        if document.is_file():
            problems.extend(_link_problems(document, root))
    return problems


def main(argv: list[str] | None = None) -> int:
    """Check the docs of the repository (or of the root given as the only argument)."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else ROOT
    problems = check_docs(root)
    for problem in problems:
        print(f"docs_check: {problem}", file=sys.stderr)
    if problems:
        print(f"docs_check: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(
        f"docs_check: ok ({len(CODES)} diagnostic codes documented, links resolve, "
        "documented outputs match their goldens)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
