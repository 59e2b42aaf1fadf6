"""Small text helpers the check types share to word their labels and failures.

Each check type words itself in its own module (see :class:`.registry.CheckKind`);
these are the pieces several of them use. Texts are built from recorded evidence,
which is untrusted: the views escape them before they reach a terminal or a page.
"""

from __future__ import annotations

import json

from .context import Evidence

__all__ = ["DETAIL_CHARS", "evidence_json", "plural", "quoted"]

#: Characters of command output or evidence quoted in a selftest finding.
DETAIL_CHARS = 600


def quoted(value: object) -> str:
    """``value`` as a JSON string literal (``"x.txt"``), non-ASCII kept."""
    return json.dumps(str(value), ensure_ascii=False)


def plural(count: int, noun: str) -> str:
    """``1 path``, ``2 paths``."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def evidence_json(evidence: Evidence) -> str:
    """The evidence as JSON, cut to :data:`DETAIL_CHARS` (a finding's last resort)."""
    return json.dumps(dict(evidence), ensure_ascii=False)[:DETAIL_CHARS]
