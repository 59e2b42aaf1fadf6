"""The deterministic checks and their pass / fail / error semantics.

The six core checks grade the sandbox; the behaviour checks of
:mod:`atlante_eval.checks.behaviour` grade the trial's transcript.

``fail`` means the assertion is false; ``error`` means no verdict could be reached
(a path crossing a symlink, a program that cannot start, an unreadable file).
Every check runs, in declaration order, even after an earlier one failed.
File checks re-check containment at check time and refuse symbolic links, so an
agent cannot point a check at a file outside the sandbox.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
from pydantic import BaseModel
from wcmatch import glob as wcglob

from .._util.environment import allowed_env
from .._util.paths import UnsafePathError, display_path, resolve_no_follow
from .._util.patterns import PatternError, compile_pattern, search, timeout_message
from ..choices import CheckType
from ..project import (
    AnyCheck,
    CommandCheck,
    DiffAllowlistCheck,
    FileAbsentCheck,
    FileContainsCheck,
    FileExistsCheck,
    FileUnchangedCheck,
    MaxToolCallsCheck,
    MaxTurnsCheck,
    SkillUsedCheck,
    SubagentUsedCheck,
    ToolNotUsedCheck,
    ToolUsedCheck,
    TranscriptContainsCheck,
)
from ..report import CheckResult
from ..trial import file_digest, run_process
from .behaviour import (
    max_tool_calls,
    max_turns,
    over_transcript,
    skill_used,
    subagent_used,
    tool_not_used,
    tool_used,
    transcript_contains,
)
from .context import CheckContext, Outcome

__all__ = [
    "CHECK_KINDS",
    "EVIDENCE_PATHS",
    "OUTPUT_EVIDENCE_CHARS",
    "CheckContext",
    "CheckKind",
    "Outcome",
    "ignore_matcher",
    "run_checks",
]

_C = TypeVar("_C", bound=BaseModel)

#: Command output kept as evidence: the last 2,000 characters.
OUTPUT_EVIDENCE_CHARS = 2000
#: How much of each stream of a command check is searched by ``outputMatches``.
_MATCH_BYTES = 4 * 1024 * 1024
#: Most paths in each list of ``diff-allowlist`` evidence (the rest are counted).
EVIDENCE_PATHS = 1000
#: Largest file ``file-contains`` reads.
_MAX_CONTAINS_BYTES = 64 * 1024 * 1024


def ignore_matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """Return a predicate matching sandbox-relative paths against wcmatch globs.

    Matching is case-sensitive and purely textual (no file system access), so a
    pattern such as ``.opencode/node_modules/**`` matches only paths below that
    directory.
    """
    if not patterns:
        return lambda _path: False
    flags = wcglob.GLOBSTAR | wcglob.DOTGLOB | wcglob.CASE
    matcher = wcglob.compile(list(patterns), flags=flags)
    return lambda path: bool(matcher.match(path))


async def _command(check: CommandCheck, ctx: CheckContext) -> Outcome:
    result = await run_process(
        check.run,
        cwd=ctx.root,
        env=allowed_env(),
        timeout_s=check.timeout_ms / 1000,
        capture_bytes=_MATCH_BYTES,
        sweep=True,  # servers a check starts in the background must not outlive it
        wrap=ctx.wrap,
    )
    if result.spawn_error:
        return "error", {"run": check.run, "cause": result.spawn_error}
    combined = f"{result.stdout}\n{result.stderr}"
    evidence: dict[str, Any] = {
        "run": check.run,
        "exit": result.exit,
        "expectExit": check.expect_exit,
    }
    if result.timed_out:
        evidence["timedOut"] = True
    output = ctx.redact(combined.strip())
    evidence["output"] = output[-OUTPUT_EVIDENCE_CHARS:]
    if len(output) > OUTPUT_EVIDENCE_CHARS and ctx.keep_output is not None:
        kept = ctx.keep_output(f"check-{ctx.index}.log", output)
        if kept is not None:
            evidence["outputLog"] = kept
    if check.output_matches is not None:
        evidence["outputMatches"] = check.output_matches
    if result.timed_out or result.exit != check.expect_exit:
        return "fail", evidence
    if check.output_matches is not None:
        try:
            pattern = compile_pattern(check.output_matches)
        except PatternError as exc:
            return "error", {"run": check.run, "cause": f"invalid outputMatches pattern: {exc}"}
        outcome = await search(pattern, combined)
        if outcome == "timeout":
            return "fail", {**evidence, "cause": timeout_message()}
        if outcome == "no-match":
            return "fail", evidence
    return "pass", evidence


def _resolve(ctx: CheckContext, path: str) -> Path:
    return resolve_no_follow(ctx.root, path)


def _exists(ctx: CheckContext, path: str, *, expect: bool) -> Outcome:
    target = _resolve(ctx, path)
    try:
        os.lstat(target)
        exists = True
    except (FileNotFoundError, NotADirectoryError):
        exists = False
    if exists == expect:
        return "pass", {}
    return "fail", {"path": path, "exists": exists, "expectExists": expect}


def _read_limited(target: Path) -> bytes:
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if os.fstat(fd).st_size > _MAX_CONTAINS_BYTES:
            raise OSError(f"file is larger than {_MAX_CONTAINS_BYTES // (1024 * 1024)} MiB")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _contains_text(check: FileContainsCheck, ctx: CheckContext) -> Outcome | str:
    """Return the file's text, or the verdict when the file is missing or not regular."""
    target = _resolve(ctx, check.path)
    try:
        info = os.lstat(target)
        regular = stat.S_ISREG(info.st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return "fail", {"path": check.path, "exists": False}
    if not regular:
        return "fail", {"path": check.path, "exists": True}
    return _read_limited(target).decode("utf-8", errors="replace")


async def _contains(check: FileContainsCheck, ctx: CheckContext) -> Outcome:
    """Read the file off the event loop; search a regex in bounded time (see patterns)."""
    pattern = None
    if check.regex:
        try:
            pattern = compile_pattern(check.pattern)
        except PatternError:
            return "error", {"path": check.path, "cause": "invalid regular expression"}
    text = await anyio.to_thread.run_sync(_contains_text, check, ctx)
    if not isinstance(text, str):
        return text
    if pattern is None:
        if check.pattern in text:
            return "pass", {}
        return "fail", {"path": check.path, "pattern": check.pattern}
    outcome = await search(pattern, text)
    if outcome == "match":
        return "pass", {}
    evidence: dict[str, Any] = {"path": check.path, "pattern": check.pattern, "regex": True}
    if outcome == "timeout":
        evidence["cause"] = timeout_message()
    return "fail", evidence


def _unchanged(check: FileUnchangedCheck, ctx: CheckContext) -> Outcome:
    if check.path not in ctx.snapshot:
        return "error", {"path": check.path, "cause": "no baseline snapshot entry"}
    before = ctx.snapshot[check.path]
    current = file_digest(ctx.root, check.path)
    if current == before:
        return "pass", {}
    return "fail", {"path": check.path, "baselineHash": before, "currentHash": current}


def _allowlist(check: DiffAllowlistCheck, ctx: CheckContext) -> Outcome:
    if ctx.changes is None:
        return "error", {"cause": ctx.changes_error or "sandbox changes are unknown"}
    allow = list(dict.fromkeys(check.allow))
    allowed = set(allow)
    # Compared as read from disk: a name that is not UTF-8 never equals an entry.
    changed = [path for path in ctx.changes.paths if not ctx.ignored(path)]
    unexpected = [path for path in changed if path not in allowed]
    if not unexpected:
        return "pass", {}
    evidence: dict[str, Any] = {"allow": allow}
    for key, paths in (("unexpected", unexpected), ("changed", changed)):
        evidence[key] = [display_path(path) for path in paths[:EVIDENCE_PATHS]]
        if len(paths) > EVIDENCE_PATHS:
            evidence[f"{key}Omitted"] = len(paths) - EVIDENCE_PATHS
    return "fail", evidence


def _file_exists(check: FileExistsCheck, ctx: CheckContext) -> Outcome:
    return _exists(ctx, check.path, expect=True)


def _file_absent(check: FileAbsentCheck, ctx: CheckContext) -> Outcome:
    return _exists(ctx, check.path, expect=False)


def _in_thread(
    run: Callable[[_C, CheckContext], Outcome],
) -> Callable[[_C, CheckContext], Awaitable[Outcome]]:
    """Run a check that reads and hashes files off the event loop."""

    async def threaded(check: _C, ctx: CheckContext) -> Outcome:
        return await anyio.to_thread.run_sync(run, check, ctx)

    return threaded


def _now(
    run: Callable[[_C, CheckContext], Outcome],
) -> Callable[[_C, CheckContext], Awaitable[Outcome]]:
    """Run a cheap in-memory check on the event loop."""

    async def direct(check: _C, ctx: CheckContext) -> Outcome:
        return run(check, ctx)

    return direct


@dataclass(frozen=True, slots=True)
class CheckKind(Generic[_C]):
    """How one check type runs: its scenario model and its runner."""

    model: type[_C]
    """The scenario document model of the check type."""
    run: Callable[[_C, CheckContext], Awaitable[Outcome]]
    """Reaches the check's verdict and evidence."""

    async def __call__(self, check: AnyCheck, ctx: CheckContext) -> Outcome:
        """Run ``check``, which must be an instance of :attr:`model`."""
        if not isinstance(check, self.model):
            raise TypeError(f"{type(check).__name__} is not a {self.model.__name__}")
        return await self.run(check, ctx)


#: The runner of every check type.
CHECK_KINDS: dict[CheckType, CheckKind[Any]] = {
    "command": CheckKind(CommandCheck, _command),
    "file-exists": CheckKind(FileExistsCheck, _in_thread(_file_exists)),
    "file-absent": CheckKind(FileAbsentCheck, _in_thread(_file_absent)),
    "file-unchanged": CheckKind(FileUnchangedCheck, _in_thread(_unchanged)),
    "file-contains": CheckKind(FileContainsCheck, _contains),
    "diff-allowlist": CheckKind(DiffAllowlistCheck, _now(_allowlist)),
    "skill-used": CheckKind(SkillUsedCheck, _now(over_transcript(skill_used))),
    "subagent-used": CheckKind(SubagentUsedCheck, _now(over_transcript(subagent_used))),
    "tool-used": CheckKind(ToolUsedCheck, _in_thread(over_transcript(tool_used))),
    "tool-not-used": CheckKind(ToolNotUsedCheck, _in_thread(over_transcript(tool_not_used))),
    "max-tool-calls": CheckKind(MaxToolCallsCheck, _now(over_transcript(max_tool_calls))),
    "max-turns": CheckKind(MaxTurnsCheck, _now(over_transcript(max_turns))),
    "transcript-contains": CheckKind(
        TranscriptContainsCheck, _in_thread(over_transcript(transcript_contains))
    ),
}


async def _run_one(check: AnyCheck, ctx: CheckContext) -> Outcome:
    path = getattr(check, "path", None)
    try:
        return await CHECK_KINDS[check.type](check, ctx)
    except UnsafePathError as exc:
        return "error", {"path": path, "cause": str(exc)}
    except OSError as exc:
        return "error", {"path": path, "cause": f"could not inspect sandbox path: {exc}"}
    except Exception as exc:  # noqa: BLE001 - one broken check must not stop the others
        evidence: dict[str, Any] = {"path": path} if path is not None else {}
        return "error", {**evidence, "cause": f"unexpected error: {type(exc).__name__}: {exc}"}


async def run_checks(checks: Sequence[AnyCheck], ctx: CheckContext) -> list[CheckResult]:
    """Run every check in order and return one result per check."""
    results = []
    for index, check in enumerate(checks):
        started = time.monotonic()
        verdict, evidence = await _run_one(check, replace(ctx, index=index))
        results.append(
            CheckResult(
                index=index,
                type=check.type,
                verdict=verdict,
                evidence=evidence,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        )
    return results
