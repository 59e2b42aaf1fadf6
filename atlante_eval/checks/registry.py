"""The check registry: every check type's behaviour on one line, and running a scenario's checks.

``fail`` means the assertion is false; ``error`` means no verdict could be reached
(a path crossing a symlink, a program that cannot start, an unreadable file).
Every check runs, in declaration order, even after an earlier one failed.

Each check type is its scenario model (:mod:`atlante_eval.project.scenarios`),
its module here (:mod:`.files`, :mod:`.command`, :mod:`.behaviour`: how it runs
and how it words itself) and one :data:`CHECK_KINDS` entry keyed by
:data:`atlante_eval.choices.CheckType`. Nothing else branches on the check type:
the terminal's and the page's failure lines (:mod:`atlante_eval.views.causes`)
and the selftest's findings read the entry.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

import anyio
from pydantic import BaseModel

from .._util.paths import UnsafePathError
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
from . import behaviour as b
from . import files as f
from .command import command_detail, command_label, command_line, run_command
from .context import CheckContext, Evidence, Outcome

__all__ = ["CHECK_KINDS", "CheckKind", "check_kind", "run_checks"]

_C = TypeVar("_C", bound=BaseModel)


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
    """Everything one check type does: run, word a failure, name itself."""

    model: type[_C]
    """The scenario document model of the check type."""
    run: Callable[[_C, CheckContext], Awaitable[Outcome]]
    """Reaches the check's verdict and evidence (wrap a blocking runner in ``_in_thread``)."""
    label: Callable[[_C], str]
    """A short human name of a declared check, e.g. ``command python3 -m unittest``."""
    line: Callable[[Evidence], str]
    """What a failing check saw, in one line, from its recorded evidence alone.

    The terminal (progress, summary, ``show``) and the HTML page show it; reports
    are read without their scenarios, so only the evidence is at hand. An
    evidence ``cause`` is shown instead, whatever the type.
    """
    detail: Callable[[_C, Evidence], str]
    """Why a declared check failed, for a selftest finding (may run to several hundred chars)."""

    async def __call__(self, check: AnyCheck, ctx: CheckContext) -> Outcome:
        """Run ``check``, which must be an instance of :attr:`model`."""
        return await self.run(self._narrow(check), ctx)

    def describe(self, check: AnyCheck) -> str:
        """The :attr:`label` of ``check``, an instance of :attr:`model`."""
        return self.label(self._narrow(check))

    def explain(self, check: AnyCheck, evidence: Evidence) -> str:
        """The :attr:`detail` of ``check``'s failure, ``check`` an instance of :attr:`model`."""
        return self.detail(self._narrow(check), evidence)

    def _narrow(self, check: AnyCheck) -> _C:
        if not isinstance(check, self.model):
            raise TypeError(f"{type(check).__name__} is not a {self.model.__name__}")
        return check


#: Every check type: how it runs, how its failure reads, how it is named.
CHECK_KINDS: dict[CheckType, CheckKind[Any]] = {
    "command": CheckKind(CommandCheck, run_command, command_label, command_line, command_detail),
    "file-exists": CheckKind(
        FileExistsCheck, _in_thread(f.file_exists), f.path_label, f.exists_line, f.existence_detail
    ),
    "file-absent": CheckKind(
        FileAbsentCheck, _in_thread(f.file_absent), f.path_label, f.absent_line, f.existence_detail
    ),
    "file-unchanged": CheckKind(
        FileUnchangedCheck,
        _in_thread(f.unchanged),
        f.path_label,
        f.unchanged_line,
        f.unchanged_detail,
    ),
    "file-contains": CheckKind(
        FileContainsCheck, f.contains, f.path_label, f.contains_line, f.contains_detail
    ),
    "diff-allowlist": CheckKind(
        DiffAllowlistCheck,
        _now(f.allowlist),
        f.allowlist_label,
        f.allowlist_line,
        f.allowlist_detail,
    ),
    "skill-used": CheckKind(
        SkillUsedCheck,
        _now(b.over_transcript(b.skill_used)),
        b.skill_label,
        b.skill_line,
        b.count_detail,
    ),
    "subagent-used": CheckKind(
        SubagentUsedCheck,
        _now(b.over_transcript(b.subagent_used)),
        b.subagent_label,
        b.subagent_line,
        b.count_detail,
    ),
    "tool-used": CheckKind(
        ToolUsedCheck,
        _in_thread(b.over_transcript(b.tool_used)),
        b.tool_label,
        b.tool_used_line,
        b.count_detail,
    ),
    "tool-not-used": CheckKind(
        ToolNotUsedCheck,
        _in_thread(b.over_transcript(b.tool_not_used)),
        b.tool_label,
        b.tool_not_used_line,
        b.json_detail,
    ),
    "max-tool-calls": CheckKind(
        MaxToolCallsCheck,
        _now(b.over_transcript(b.max_tool_calls)),
        b.max_tool_calls_label,
        b.max_tool_calls_line,
        b.count_detail,
    ),
    "max-turns": CheckKind(
        MaxTurnsCheck,
        _now(b.over_transcript(b.max_turns)),
        b.max_turns_label,
        b.max_turns_line,
        b.json_detail,
    ),
    "transcript-contains": CheckKind(
        TranscriptContainsCheck,
        _in_thread(b.over_transcript(b.transcript_contains)),
        b.transcript_contains_label,
        b.transcript_contains_line,
        b.transcript_contains_detail,
    ),
}


def check_kind(check_type: str) -> CheckKind[Any] | None:
    """The registry entry of ``check_type`` (``None``: a type this version does not know).

    A report may come from another version or from the reference tool; its check
    results can name a type the registry does not have.
    """
    return cast("dict[str, CheckKind[Any]]", CHECK_KINDS).get(check_type)


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
