"""Grading: the check types, the context they run in, and their registry.

:mod:`.core` runs a scenario's checks on a sandbox (file, diff and command
checks, and the registry by check type); :mod:`.behaviour` grades the transcript
(skills, subagents, tools, turns).
"""

from __future__ import annotations

from .behaviour import NO_TRANSCRIPT, failure_summary, read_transcript
from .core import CheckContext, ignore_matcher, run_checks

__all__ = [
    "NO_TRANSCRIPT",
    "CheckContext",
    "failure_summary",
    "ignore_matcher",
    "read_transcript",
    "run_checks",
]
