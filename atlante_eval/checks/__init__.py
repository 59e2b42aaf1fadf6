"""Grading: the check types, the context they run in, and their registry.

:mod:`.registry` holds :data:`~.registry.CHECK_KINDS`, one entry per check type
(how it runs, how its failure reads, how it is named), and :func:`run_checks`.
The types themselves live in :mod:`.files` (the file and diff checks),
:mod:`.command` and :mod:`.behaviour` (verdicts over the transcript);
:mod:`.context` is what a check runs with, :mod:`.wording` the text helpers they share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util.lazy import export_homes, load_export

#: Every re-exported name, by the module that defines it (loaded on first use).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".behaviour": ("NO_TRANSCRIPT", "read_transcript"),
    ".context": ("CheckContext", "ignore_matcher"),
    ".registry": ("CHECK_KINDS", "CheckKind", "check_kind", "run_checks"),
}

if TYPE_CHECKING:
    from .behaviour import NO_TRANSCRIPT as NO_TRANSCRIPT
    from .behaviour import read_transcript as read_transcript
    from .context import CheckContext as CheckContext
    from .context import ignore_matcher as ignore_matcher
    from .registry import CHECK_KINDS as CHECK_KINDS
    from .registry import CheckKind as CheckKind
    from .registry import check_kind as check_kind
    from .registry import run_checks as run_checks

_HOMES = export_homes(_EXPORTS)

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _HOMES, name)
