"""Grade a finished sandbox: collect its changes, run the checks, decide the verdict.

The one grading path: the engine grades each trial's sandbox with
:func:`grade_sandbox` after its session, and ``regrade`` grades a rebuilt
sandbox with it, so both judge a trial's files by the same rules.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._util.paths import display_path
from ..checks import CheckContext, ignore_matcher, run_checks
from ..project import AnyCheck
from ..report import CheckResult, Verdict
from ..transcript import TranscriptEntry
from ..trial import Changes, GitError, Sandbox, SpawnWrapper, collect_changes

__all__ = ["CHANGED_FILES_LIMIT", "Graded", "Grading", "grade_sandbox", "verdict_of"]

#: Most paths a trial's ``changedFiles`` lists (the rest are counted).
CHANGED_FILES_LIMIT = 1000

#: Called with the collected changes (``None``: uncollectable) before the first check runs.
BeforeChecks = Callable[[Changes | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Grading:
    """What grading needs besides the sandbox and the checks."""

    ignored: Sequence[str] = ()
    """The host's runtime-artefact globs (``diff-allowlist`` ignores them)."""
    transcript: Sequence[TranscriptEntry] | None = None
    """The trial's transcript entries, for behaviour checks."""
    transcript_error: str | None = None
    """Why there is no usable transcript."""
    redact: Callable[[str], str] = lambda text: text
    """Removes secrets from command output."""
    keep_output: Callable[[str, str], str | None] | None = None
    """Stores an output longer than the evidence keeps; returns its path."""
    wrap: SpawnWrapper | None = None
    """Confines command checks (``--isolation os``)."""
    before_checks: BeforeChecks | None = None
    """Sees the sandbox as the agent left it, before any check runs (the final state)."""


@dataclass(frozen=True, slots=True)
class Graded:
    """A graded sandbox: the checks, the verdict and the change evidence."""

    checks: list[CheckResult]
    verdict: Verdict
    error: str | None
    diff: str | None
    changed_files: list[str] | None
    changed_files_omitted: int | None

    def fields(self) -> dict[str, Any]:
        """The trial report's fields grading decides."""
        return {
            "verdict": self.verdict,
            "error": self.error,
            "checks": self.checks,
            "diff": self.diff,
            "changed_files": self.changed_files,
            "changed_files_omitted": self.changed_files_omitted,
        }


async def grade_sandbox(checks: Sequence[AnyCheck], sandbox: Sandbox, grading: Grading) -> Graded:
    """Collect the sandbox's changes since its baseline, run ``checks`` in order, judge."""
    changes: Changes | None = None
    changes_error: str | None = None
    ignored = ignore_matcher(list(grading.ignored))
    try:
        changes = await collect_changes(
            sandbox.root, sandbox.git_dir, sandbox.baseline, ignored=ignored
        )
    except GitError as exc:
        changes_error = f"could not collect sandbox diff: {exc}"
    if grading.before_checks is not None:
        await grading.before_checks(changes)
    context = CheckContext(
        root=sandbox.root,
        snapshot=sandbox.snapshot,
        changes=changes,
        changes_error=changes_error,
        ignored=ignored,
        redact=grading.redact,
        keep_output=grading.keep_output,
        transcript=grading.transcript,
        transcript_error=grading.transcript_error,
        wrap=grading.wrap,
    )
    results = await run_checks(checks, context)
    verdict, error = verdict_of(results, changes_error)
    listed, omitted = (
        _changed_files(changes.paths, ignored) if changes is not None else (None, None)
    )
    return Graded(
        checks=results,
        verdict=verdict,
        error=error,
        diff=changes.diff if changes is not None else None,
        changed_files=listed,
        changed_files_omitted=omitted,
    )


def _changed_files(
    paths: Sequence[str], ignored: Callable[[str], bool]
) -> tuple[list[str], int | None]:
    """Return ``changedFiles`` (graded paths first, then runtime ones) and the omitted count."""
    if len(paths) <= CHANGED_FILES_LIMIT:
        return [display_path(p) for p in paths], None
    graded = [p for p in paths if not ignored(p)]
    kept = graded[:CHANGED_FILES_LIMIT]
    if len(kept) < CHANGED_FILES_LIMIT:
        runtime = (p for p in paths if ignored(p))
        kept += itertools.islice(runtime, CHANGED_FILES_LIMIT - len(kept))
    return sorted(display_path(p) for p in kept), len(paths) - len(kept)


def verdict_of(checks: list[CheckResult], changes_error: str | None) -> tuple[Verdict, str | None]:
    """The trial's verdict from its checks: an errored check or lost diff is an infra-error."""
    errored = [c for c in checks if c.verdict == "error"]
    if errored:
        first = errored[0]
        cause = first.evidence.get("cause", "no verdict")
        return "infra-error", f"check {first.index} ({first.type}) could not run: {cause}"
    if changes_error is not None:
        return "infra-error", changes_error
    if all(c.verdict == "pass" for c in checks):
        return "pass", None
    return "fail", None
