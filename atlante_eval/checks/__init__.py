"""Grading: the check types, the context they run in, and their registry.

:mod:`.registry` holds :data:`~.registry.CHECK_KINDS`, one entry per check type
(how it runs, how its failure reads, how it is named), and :func:`run_checks`.
The types themselves live in :mod:`.files` (the file and diff checks),
:mod:`.command` and :mod:`.behaviour` (verdicts over the transcript);
:mod:`.context` is what a check runs with, :mod:`.wording` the text helpers they share.
"""

from __future__ import annotations

from .behaviour import NO_TRANSCRIPT, read_transcript
from .context import CheckContext, ignore_matcher
from .registry import CHECK_KINDS, CheckKind, check_kind, run_checks

__all__ = [
    "CHECK_KINDS",
    "NO_TRANSCRIPT",
    "CheckContext",
    "CheckKind",
    "check_kind",
    "ignore_matcher",
    "read_transcript",
    "run_checks",
]
