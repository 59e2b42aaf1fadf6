"""docs/reliability.md names real tests: every ``file::test`` reference exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_proving_test_named_in_the_reliability_doc_exists() -> None:
    """Each `tests/...py::test_name` in docs/reliability.md is a test function in that file."""
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    references = sorted(set(REFERENCE.findall(text)))
    assert len(references) >= 40
    missing = [
        f"{path}::{name}"
        for path, name in references
        if not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert missing == []
