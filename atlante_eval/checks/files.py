"""The file checks: ``file-exists``, ``file-absent``, ``file-unchanged``, ``file-contains``
and ``diff-allowlist``, with how each words a failure.

File checks re-check containment at check time and refuse symbolic links
(:func:`atlante_eval._util.paths.resolve_no_follow`), so an agent cannot point a
check at a file outside the sandbox. The runners here are blocking; the registry
runs the ones that read or hash files in a worker thread.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import anyio

from .._util.paths import display_path, resolve_no_follow
from .._util.patterns import PatternError, compile_pattern, search, timeout_message
from ..project import (
    DiffAllowlistCheck,
    FileAbsentCheck,
    FileContainsCheck,
    FileExistsCheck,
    FileUnchangedCheck,
)
from ..trial import file_digest
from .context import CheckContext, Evidence, Outcome
from .wording import evidence_json, plural, quoted

__all__ = [
    "EVIDENCE_PATHS",
    "absent_line",
    "allowlist",
    "allowlist_detail",
    "allowlist_label",
    "allowlist_line",
    "contains",
    "contains_detail",
    "contains_line",
    "existence_detail",
    "exists_line",
    "file_absent",
    "file_exists",
    "path_label",
    "unchanged",
    "unchanged_detail",
    "unchanged_line",
]

#: Most paths in each list of ``diff-allowlist`` evidence (the rest are counted).
EVIDENCE_PATHS = 1000
#: Largest file ``file-contains`` reads.
_MAX_CONTAINS_BYTES = 64 * 1024 * 1024

_PathCheck = FileExistsCheck | FileAbsentCheck | FileUnchangedCheck | FileContainsCheck


def _exists(ctx: CheckContext, path: str, *, expect: bool) -> Outcome:
    target = resolve_no_follow(ctx.root, path)
    try:
        os.lstat(target)
        exists = True
    except (FileNotFoundError, NotADirectoryError):
        exists = False
    if exists == expect:
        return "pass", {}
    return "fail", {"path": path, "exists": exists, "expectExists": expect}


def file_exists(check: FileExistsCheck, ctx: CheckContext) -> Outcome:
    """Pass when ``check.path`` exists (a dangling symlink counts; it is not followed)."""
    return _exists(ctx, check.path, expect=True)


def file_absent(check: FileAbsentCheck, ctx: CheckContext) -> Outcome:
    """Pass when nothing exists at ``check.path``."""
    return _exists(ctx, check.path, expect=False)


#: Open a sandbox file to read: never through a link, never waiting for a FIFO's writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _read_limited(target: Path) -> bytes:
    """The file's bytes: a regular file only (re-checked on the open file), at most the cap."""
    fd = os.open(target, _READ_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{target.name} is no longer a regular file")
        if info.st_size > _MAX_CONTAINS_BYTES:
            raise OSError(f"file is larger than {_MAX_CONTAINS_BYTES // (1024 * 1024)} MiB")
        chunks = []
        left = _MAX_CONTAINS_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise OSError(f"file is larger than {_MAX_CONTAINS_BYTES // (1024 * 1024)} MiB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _contains_text(check: FileContainsCheck, ctx: CheckContext) -> Outcome | str:
    """Return the file's text, or the verdict when the file is missing or not regular."""
    target = resolve_no_follow(ctx.root, check.path)
    try:
        info = os.lstat(target)
        regular = stat.S_ISREG(info.st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return "fail", {"path": check.path, "exists": False}
    if not regular:
        return "fail", {"path": check.path, "exists": True}
    return _read_limited(target).decode("utf-8", errors="replace")


async def contains(check: FileContainsCheck, ctx: CheckContext) -> Outcome:
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


def unchanged(check: FileUnchangedCheck, ctx: CheckContext) -> Outcome:
    """Pass when the file's digest equals the one taken before the trial."""
    if check.path not in ctx.snapshot:
        return "error", {"path": check.path, "cause": "no baseline snapshot entry"}
    before = ctx.snapshot[check.path]
    current = file_digest(ctx.root, check.path)
    if current == before:
        return "pass", {}
    return "fail", {"path": check.path, "baselineHash": before, "currentHash": current}


def allowlist(check: DiffAllowlistCheck, ctx: CheckContext) -> Outcome:
    """Pass when every changed path (host artefacts ignored) is in ``check.allow``."""
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


def path_label(check: _PathCheck) -> str:
    """``file-contains src/app.py``."""
    return f"{check.type} {check.path}"


def exists_line(evidence: Evidence) -> str:
    """``x.txt does not exist``."""
    return f"{evidence.get('path')} does not exist"


def absent_line(evidence: Evidence) -> str:
    """``x.txt exists``."""
    return f"{evidence.get('path')} exists"


def existence_detail(check: FileExistsCheck | FileAbsentCheck, evidence: Evidence) -> str:
    """``x.txt exists`` or ``x.txt does not exist``, as the evidence saw it."""
    return f"{check.path} {'exists' if evidence.get('exists') else 'does not exist'}"


def contains_line(evidence: Evidence) -> str:
    """``x.txt does not contain "done"``, or that it is missing or not a regular file."""
    path = evidence.get("path")
    if evidence.get("exists") is False:
        return f"{path} does not exist"
    if "pattern" not in evidence:
        return f"{path} is not a regular file"
    verb = "does not match" if evidence.get("regex") else "does not contain"
    return f"{path} {verb} {quoted(evidence['pattern'])}"


def contains_detail(check: FileContainsCheck, evidence: Evidence) -> str:
    """``x.txt does not contain 'done'``, or that it is not a regular file."""
    if "exists" in evidence:
        return f"{check.path} is not a regular file" + (
            "" if evidence["exists"] else " (it does not exist)"
        )
    return f"{check.path} does not contain {check.pattern!r}"


def unchanged_line(evidence: Evidence) -> str:
    """``x.txt changed`` or ``x.txt was removed``."""
    gone = evidence.get("currentHash") is None
    return f"{evidence.get('path')} {'was removed' if gone else 'changed'}"


def unchanged_detail(check: FileUnchangedCheck, _evidence: Evidence) -> str:
    """``x.txt changed``."""
    return f"{check.path} changed"


def allowlist_label(check: DiffAllowlistCheck) -> str:
    """``diff-allowlist of 2 paths``."""
    return f"diff-allowlist of {plural(len(check.allow), 'path')}"


def allowlist_line(evidence: Evidence) -> str:
    """``unexpected changes: a.txt, b.txt, c.txt (+2 more)``."""
    unexpected = [str(p) for p in evidence.get("unexpected") or []]
    shown = ", ".join(unexpected[:3])
    more = f" (+{len(unexpected) - 3} more)" if len(unexpected) > 3 else ""
    return f"unexpected changes: {shown}{more}"


def allowlist_detail(_check: DiffAllowlistCheck, evidence: Evidence) -> str:
    """The evidence as JSON (which paths were unexpected, which changed)."""
    return evidence_json(evidence)
