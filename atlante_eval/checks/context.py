"""What a check runs with: the finished trial's context, and what it returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wcmatch import glob as wcglob

from ..report import CheckVerdict
from ..transcript import TranscriptEntry
from ..trial import Changes, SpawnWrapper

__all__ = ["CheckContext", "Evidence", "Outcome", "ignore_matcher"]

#: A check's evidence as recorded in the report (camelCase keys, JSON values).
Evidence = Mapping[str, Any]
#: A check's verdict and its evidence.
Outcome = tuple[CheckVerdict, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What checks need from the finished trial."""

    root: Path
    """The sandbox root."""
    snapshot: Mapping[str, str | None]
    """Pre-trial digests for ``file-unchanged``."""
    changes: Changes | None
    """Changes since the baseline, as the host left the sandbox (``None``: unknown)."""
    changes_error: str | None = None
    """Why ``changes`` is unknown."""
    ignored: Callable[[str], bool] = lambda _path: False
    """Whether a changed path is a host runtime artefact ``diff-allowlist`` ignores."""
    redact: Callable[[str], str] = lambda text: text
    """Removes secrets from command output before it is kept."""
    keep_output: Callable[[str, str], str | None] | None = None
    """Stores an output longer than the evidence keeps, under a file name; returns its path."""
    index: int = 0
    """Position of the check being run (set by :func:`run_checks`)."""
    transcript: Sequence[TranscriptEntry] | None = None
    """The trial's transcript entries, for behaviour checks (``None``: no usable transcript)."""
    transcript_error: str | None = None
    """Why there is no usable transcript."""
    wrap: SpawnWrapper | None = None
    """Confines command checks (``--isolation os``); ``None`` runs them directly."""


def ignore_matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Return a predicate matching sandbox-relative paths against wcmatch globs.

    Matching is case-sensitive and purely textual (no file system access), so a
    pattern such as ``.opencode/node_modules/**`` matches only paths below that
    directory. The engine builds :attr:`CheckContext.ignored` with it from the
    host's runtime artefacts.
    """
    if not patterns:
        return lambda _path: False
    flags = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.CASE
    matcher = wcglob.compile(list(patterns), flags=flags)
    return lambda path: bool(matcher.match(path))
