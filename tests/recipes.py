"""Extract the recipes (workflows, manifests, scripts) that the docs tell users to copy.

A recipe is a fenced code block right after a marker line::

    <!-- recipe: KIND NAME -->
    ```yaml
    ...
    ```

``KIND`` says how it is checked (``workflow``, ``workflow-steps``, ``kubernetes``,
``sbatch``, ``shell``); ``NAME`` names it (for an ``sbatch`` script, the file name
the docs save it under). Extraction goes by marker, not by position, so a page can
be rewritten around its recipes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"

_RECIPE = re.compile(
    r"^<!-- recipe: (?P<kind>[a-z-]+) (?P<name>[\w.-]+) -->\n"
    r"(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_YAML_FENCE = re.compile(r"^(`{3,}|~{3,})ya?ml[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Recipe:
    """One marked code block of a documentation page."""

    kind: str
    name: str
    text: str
    doc: str
    """The page it comes from (``scaling.md``)."""


def recipes(*pages: str) -> list[Recipe]:
    """Every recipe of ``pages`` (file names under docs/), in page order."""
    found = []
    for page in pages:
        text = (DOCS / page).read_text(encoding="utf-8")
        for match in _RECIPE.finditer(text):
            found.append(Recipe(match["kind"], match["name"], match["body"], page))
    return found


def recipe(page: str, name: str) -> Recipe:
    """The recipe ``name`` of ``page``; fails the test when the page lost its marker."""
    for found in recipes(page):
        if found.name == name:
            return found
    raise AssertionError(f"docs/{page} has no recipe marked `<!-- recipe: KIND {name} -->`")


def unmarked_yaml(page: str) -> list[int]:
    """Line numbers of the YAML blocks of ``page`` that no recipe marker precedes."""
    text = (DOCS / page).read_text(encoding="utf-8")
    lines = text.splitlines()
    unmarked = []
    for match in _YAML_FENCE.finditer(text):
        line = text.count("\n", 0, match.start())
        if line == 0 or not lines[line - 1].startswith("<!-- recipe: "):
            unmarked.append(line + 1)
    return unmarked
