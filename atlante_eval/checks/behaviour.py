"""Behaviour checks: verdicts over the trial's host-neutral transcript.

Each check reads the entries of ``transcript.jsonl`` (:mod:`atlante_eval.transcript.models`),
so one scenario document grades Claude Code and OpenCode alike. A trial whose
host left no usable transcript gets ``error`` (never a silent pass). When the
transcript was cut at its entry cap, a verdict the missing entries could change
(an absence, an upper bound) is ``error`` too; a verdict they cannot change stands.
Evidence names the matching entries, or the closest ones when nothing matched.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._util.patterns import MatchOutcome, compile_pattern, search_sync, timeout_message
from ..project import (
    MaxToolCallsCheck,
    MaxTurnsCheck,
    SkillUsedCheck,
    SubagentUsedCheck,
    ToolNotUsedCheck,
    ToolUsedCheck,
    TranscriptContainsCheck,
)
from ..transcript import (
    TRANSCRIPT_FILE,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptEntry,
    TranscriptError,
    TruncatedEntry,
    UsageEntry,
    parse_transcript,
)
from .context import CheckContext, Evidence, Outcome
from .wording import evidence_json

if TYPE_CHECKING:
    from ..report import TrialFiles

__all__ = [
    "EVIDENCE_ENTRIES",
    "NO_TRANSCRIPT",
    "MatchOutcome",
    "count_detail",
    "json_detail",
    "max_tool_calls",
    "max_tool_calls_label",
    "max_tool_calls_line",
    "max_turns",
    "max_turns_label",
    "max_turns_line",
    "over_transcript",
    "pattern_search",
    "read_transcript",
    "skill_label",
    "skill_line",
    "skill_used",
    "subagent_label",
    "subagent_line",
    "subagent_used",
    "tool_label",
    "tool_not_used",
    "tool_not_used_line",
    "tool_used",
    "tool_used_line",
    "transcript_contains",
    "transcript_contains_detail",
    "transcript_contains_label",
    "transcript_contains_line",
    "usable_transcript",
]

#: Entries named in a check's evidence (the first ones; ``count`` has them all).
EVIDENCE_ENTRIES = 10
#: Characters of a tool input or a text quoted in evidence.
_PREVIEW_CHARS = 200
#: The cause of a behaviour check's ``error`` when the trial has no usable transcript.
NO_TRANSCRIPT = "the host produced no usable transcript"
#: Largest transcript read for grading: the writer's cap, and room for its final entries.
_MAX_TRANSCRIPT_BYTES = 16 * 1024 * 1024

#: Entries that only a host's own stream produces (a bare header is not a transcript).
_HOST_ENTRIES = (
    SessionStartEntry,
    TextEntry,
    ToolCallEntry,
    SkillEntry,
    SubagentEntry,
    ResultEntry,
)


def pattern_search(pattern: str, text: str) -> MatchOutcome:
    """Search ``text`` for the regular expression ``pattern``, bounded in time.

    The one place behaviour checks match a pattern (``inputMatches`` and
    ``transcript-contains`` with ``regex``); callers run it in a worker thread and
    treat ``"timeout"`` as a failure with its cause (see :mod:`atlante_eval._util.patterns`).
    """
    return search_sync(compile_pattern(pattern), text)


def usable_transcript(entries: Sequence[TranscriptEntry]) -> bool:
    """Whether ``entries`` hold anything the host's stream produced, beyond the header."""
    return any(isinstance(entry, _HOST_ENTRIES) for entry in entries)


def read_transcript(files: TrialFiles) -> tuple[list[TranscriptEntry] | None, str | None]:
    """Load a trial's transcript for the behaviour checks: its entries, or why there are none.

    It is read through the trial directory's descriptor, as a regular file of
    bounded size (a planted symlink or FIFO is never followed or read).
    """
    data = files.read(TRANSCRIPT_FILE, limit=_MAX_TRANSCRIPT_BYTES)
    if data is None:
        return None, f"{NO_TRANSCRIPT}: {files.path_of(TRANSCRIPT_FILE)} is missing or unreadable"
    text = data.decode("utf-8", errors="replace")
    try:
        entries = parse_transcript(text.splitlines(), source=files.path_of(TRANSCRIPT_FILE))
    except TranscriptError as exc:
        return None, f"{NO_TRANSCRIPT}: {exc}"
    if not usable_transcript(entries):
        return None, f"{NO_TRANSCRIPT}: it holds no entry from the host's stream"
    return entries, None


def _dropped(entries: Sequence[TranscriptEntry]) -> int:
    return sum(e.dropped for e in entries if isinstance(e, TruncatedEntry) and e.unit == "entries")


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _input_text(call: ToolCallEntry) -> str:
    return json.dumps(call.input, ensure_ascii=False, sort_keys=True)


def _call(call: ToolCallEntry) -> dict[str, Any]:
    described: dict[str, Any] = {
        "id": call.id,
        "name": call.name,
        "toolKind": call.tool_kind,
        "t": call.t,
        "input": _preview(_input_text(call)),
    }
    if call.parent is not None:
        described["parent"] = call.parent
    return described


def _uncertain(dropped: int, evidence: dict[str, Any]) -> Outcome:
    """Judge ``error``: ``dropped`` entries were cut, so what they held cannot be known."""
    return "error", {
        **evidence,
        "cause": f"the transcript was cut at its entry cap ({dropped} entries left out), "
        "so the count cannot be known",
        "droppedEntries": dropped,
    }


def _bounded(
    count: int, minimum: int, maximum: int | None, dropped: int, evidence: dict[str, Any]
) -> Outcome:
    """Judge ``minimum <= count <= maximum``; the count is a lower bound when entries dropped."""
    evidence = {**evidence, "count": count, "min": minimum}
    if maximum is not None:
        evidence["max"] = maximum
    if maximum is not None and count > maximum:
        return "fail", evidence
    if count >= minimum and (maximum is None or not dropped):
        return "pass", evidence
    if dropped:
        return _uncertain(dropped, evidence)
    return "fail", evidence


def _closest(wanted: str, names: Iterable[str]) -> list[str]:
    pool = list(dict.fromkeys(names))
    return difflib.get_close_matches(wanted, pool, n=3, cutoff=0.5)


def _available(entries: Sequence[TranscriptEntry], field: str) -> list[str]:
    names: list[str] = []
    for entry in entries:
        if isinstance(entry, SessionStartEntry):
            names += getattr(entry, field)
    return list(dict.fromkeys(names))


def _named(
    entries: Sequence[TranscriptEntry],
    wanted: str,
    entry_type: type[SkillEntry] | type[SubagentEntry],
    *,
    used_key: str,
    available_field: str,
    minimum: int,
    maximum: int | None,
) -> Outcome:
    found = [e for e in entries if isinstance(e, entry_type)]
    matches = [e for e in found if e.name == wanted]
    evidence: dict[str, Any] = {
        "matches": [
            {"name": e.name, "t": e.t, **({"parent": e.parent} if e.parent else {})}
            for e in matches[:EVIDENCE_ENTRIES]
        ],
        used_key: dict(sorted(Counter(e.name for e in found).items())),
    }
    available = _available(entries, available_field)
    if not matches:
        if available:
            evidence["available"] = available
        closest = _closest(wanted, [*(e.name for e in found), *available])
        if closest:
            evidence["closest"] = closest
    return _bounded(len(matches), minimum, maximum, _dropped(entries), evidence)


def skill_used(check: SkillUsedCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Count the skill entries naming ``check.skill``."""
    verdict, evidence = _named(
        entries,
        check.skill,
        SkillEntry,
        used_key="skillsUsed",
        available_field="skills",
        minimum=check.min,
        maximum=check.max,
    )
    failed = _failed_loads(entries, check.skill)
    if failed:
        evidence["failedLoads"] = failed
    return verdict, {"skill": check.skill, **evidence}


def _failed_loads(entries: Sequence[TranscriptEntry], skill: str) -> list[dict[str, Any]]:
    """The skill calls naming ``skill`` that errored: attempts, never counted as uses."""
    return [
        {"t": e.t, "error": (e.error or "")[:_PREVIEW_CHARS]}
        for e in entries
        if isinstance(e, ToolCallEntry)
        and e.tool_kind == "skill"
        and e.status in ("error", "denied")
        and skill in (e.input.get("name"), e.input.get("skill"))
    ][:EVIDENCE_ENTRIES]


def subagent_used(check: SubagentUsedCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Count the subagent entries naming ``check.agent``."""
    verdict, evidence = _named(
        entries,
        check.agent,
        SubagentEntry,
        used_key="subagentsUsed",
        available_field="agents",
        minimum=check.min,
        maximum=check.max,
    )
    return verdict, {"agent": check.agent, **evidence}


def _selector(check: ToolUsedCheck | ToolNotUsedCheck) -> dict[str, Any]:
    selector: dict[str, Any] = {"tool": check.tool} if check.tool is not None else {}
    if check.kind is not None:
        selector["kind"] = check.kind
    if check.input_matches is not None:
        selector["inputMatches"] = check.input_matches
    return selector


def _selected(
    check: ToolUsedCheck | ToolNotUsedCheck, entries: Sequence[TranscriptEntry]
) -> tuple[list[ToolCallEntry], list[ToolCallEntry], bool]:
    """The wanted tool's calls, those whose input matches too, and whether a search timed out."""
    calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    if check.tool is not None:
        wanted = check.tool.casefold()
        named = [c for c in calls if c.name.casefold() == wanted]
    else:
        named = [c for c in calls if c.tool_kind == check.kind]
    if check.input_matches is None:
        return named, named, False
    matching: list[ToolCallEntry] = []
    timed_out = False
    for call in named:
        outcome = pattern_search(check.input_matches, _input_text(call))
        timed_out = timed_out or outcome == "timeout"
        if outcome == "match":
            matching.append(call)
    return named, matching, timed_out


def _tool_evidence(
    check: ToolUsedCheck | ToolNotUsedCheck,
    entries: Sequence[TranscriptEntry],
    named: list[ToolCallEntry],
    matching: list[ToolCallEntry],
) -> dict[str, Any]:
    evidence = {**_selector(check), "matches": [_call(c) for c in matching[:EVIDENCE_ENTRIES]]}
    if matching:
        return evidence
    if named:
        evidence["closest"] = [_call(c) for c in named[:EVIDENCE_ENTRIES]]
        return evidence
    calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    evidence["toolsUsed"] = dict(sorted(Counter(c.name for c in calls).items()))
    if check.tool is not None:
        closest = _closest(check.tool, [c.name for c in calls])
        if closest:
            evidence["closest"] = closest
    return evidence


def tool_used(check: ToolUsedCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Count the tool calls of the wanted tool (or kind) whose input matches."""
    named, matching, timed_out = _selected(check, entries)
    evidence = _tool_evidence(check, entries, named, matching)
    if timed_out and len(matching) < check.min:
        return "fail", {
            **evidence,
            "count": len(matching),
            "cause": f"inputMatches: {timeout_message()}",
        }
    return _bounded(len(matching), check.min, check.max, _dropped(entries), evidence)


def tool_not_used(check: ToolNotUsedCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Pass when no call of the wanted tool (or kind) with a matching input was made."""
    named, matching, timed_out = _selected(check, entries)
    evidence = {**_tool_evidence(check, entries, named, matching), "count": len(matching)}
    if matching:
        return "fail", evidence
    if timed_out:
        return "fail", {**evidence, "cause": f"inputMatches: {timeout_message()}"}
    dropped = _dropped(entries)
    if dropped:
        return _uncertain(dropped, evidence)
    return "pass", evidence


def max_tool_calls(check: MaxToolCallsCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Pass when at most ``check.max`` tool calls were made, subagents' included."""
    calls = [e for e in entries if isinstance(e, ToolCallEntry)]
    evidence: dict[str, Any] = {
        "byName": dict(sorted(Counter(c.name for c in calls).items())),
    }
    return _bounded(len(calls), 0, check.max, _dropped(entries), evidence)


def _turns(entries: Sequence[TranscriptEntry]) -> tuple[int | None, str]:
    """The session's turns, and where the count comes from (as ``activity.turns``)."""
    counted = [e.turns for e in entries if isinstance(e, ResultEntry) and e.turns is not None]
    if counted:
        return sum(counted), "result"
    steps = sum(1 for e in entries if isinstance(e, UsageEntry))
    return (steps, "steps") if steps else (None, "none")


def max_turns(check: MaxTurnsCheck, entries: Sequence[TranscriptEntry]) -> Outcome:
    """Pass when the host counted at most ``check.max`` turns."""
    turns, source = _turns(entries)
    if turns is None:
        return "error", {"max": check.max, "cause": "the transcript holds no turn count"}
    evidence = {"max": check.max, "turns": turns, "countedFrom": source}
    return ("pass" if turns <= check.max else "fail"), evidence


def _texts(entries: Sequence[TranscriptEntry]) -> list[tuple[int, str]]:
    """The assistant's texts (subagents' included) and the final answer, with their positions."""
    texts: list[tuple[int, str]] = []
    for position, entry in enumerate(entries):
        if isinstance(entry, TextEntry | ResultEntry) and entry.text:
            texts.append((position, entry.text))
    return texts


def transcript_contains(
    check: TranscriptContainsCheck, entries: Sequence[TranscriptEntry]
) -> Outcome:
    """Pass when one of the assistant's texts contains (or matches) ``check.pattern``."""
    texts = _texts(entries)
    base: dict[str, Any] = {"pattern": check.pattern}
    if check.regex:
        base["regex"] = True
    timed_out = False
    for position, text in texts:
        if check.regex:
            outcome = pattern_search(check.pattern, text)
            timed_out = timed_out or outcome == "timeout"
            found = outcome == "match"
        else:
            found = check.pattern in text
        if found:
            return "pass", {**base, "entry": position, "text": _preview(text)}
    evidence = {**base, "textsSearched": len(texts)}
    if texts:
        evidence["lastText"] = _preview(texts[-1][1])
    if timed_out:
        return "fail", {**evidence, "cause": timeout_message()}
    dropped = _dropped(entries)
    if dropped:
        return _uncertain(dropped, evidence)
    return "fail", evidence


def _bounds(evidence: Evidence) -> str:
    low, high = evidence.get("min", 0), evidence.get("max")
    if high is None:
        return f"at least {low}"
    return f"{low} to {high}" if low else f"at most {high}"


def _tool_target(evidence: Evidence) -> str:
    target = f"tool {evidence['tool']}" if "tool" in evidence else f"{evidence.get('kind')} calls"
    if "inputMatches" in evidence:
        target += f" matching {json.dumps(evidence['inputMatches'], ensure_ascii=False)}"
    return target


def _counted(target: str, evidence: Evidence) -> str:
    return f"{target}: {evidence.get('count', 0)} found, expected {_bounds(evidence)}"


def skill_line(evidence: Evidence) -> str:
    """``skill release: 0 found, expected at least 1[; failed load: <error>]``."""
    line = _counted(f"skill {evidence.get('skill')}", evidence)
    failed = evidence.get("failedLoads") or []
    return f"{line}; failed load: {failed[0].get('error')}" if failed else line


def subagent_line(evidence: Evidence) -> str:
    """``subagent qa: 1 found, expected at most 0``."""
    return _counted(f"subagent {evidence.get('agent')}", evidence)


def tool_used_line(evidence: Evidence) -> str:
    """``shell calls matching "ruff": 0 found, expected at least 1``."""
    return _counted(_tool_target(evidence), evidence)


def tool_not_used_line(evidence: Evidence) -> str:
    """``tool Write: 1 found, e.g. {"file_path": "b.py"}``."""
    first = (evidence.get("matches") or [{}])[0]
    count = evidence.get("count", 0)
    return f"{_tool_target(evidence)}: {count} found, e.g. {first.get('input', '')}"


def max_tool_calls_line(evidence: Evidence) -> str:
    """``3 tool calls, at most 2 allowed``."""
    return f"{evidence.get('count', 0)} tool calls, at most {evidence.get('max')} allowed"


def max_turns_line(evidence: Evidence) -> str:
    """``4 turns, at most 3 allowed``."""
    return f"{evidence.get('turns')} turns, at most {evidence.get('max')} allowed"


def transcript_contains_line(evidence: Evidence) -> str:
    """``no assistant text contains "TESTS PASS"``."""
    verb = "matches" if evidence.get("regex") else "contains"
    return f"no assistant text {verb} {json.dumps(evidence.get('pattern'), ensure_ascii=False)}"


def skill_label(check: SkillUsedCheck) -> str:
    """``skill-used release``."""
    return f"skill-used {check.skill}"


def subagent_label(check: SubagentUsedCheck) -> str:
    """``subagent-used qa``."""
    return f"subagent-used {check.agent}"


def max_tool_calls_label(check: MaxToolCallsCheck) -> str:
    """``max-tool-calls 20``."""
    return f"max-tool-calls {check.max}"


def max_turns_label(check: MaxTurnsCheck) -> str:
    """``max-turns 10``."""
    return f"max-turns {check.max}"


def transcript_contains_label(check: TranscriptContainsCheck) -> str:
    """``transcript-contains 'TESTS PASS'``."""
    return f"transcript-contains {check.pattern!r}"


def tool_label(check: ToolUsedCheck | ToolNotUsedCheck) -> str:
    """``tool-used kind shell with input matching 'ruff'``."""
    target = f"tool {check.tool}" if check.tool is not None else f"kind {check.kind}"
    matching = f" with input matching {check.input_matches!r}" if check.input_matches else ""
    return f"{check.type} {target}{matching}"


def count_detail(_check: object, evidence: Evidence) -> str:
    """How many were found against the bounds, and the rest of the evidence as JSON."""
    if "cause" in evidence:
        return str(evidence["cause"])
    bounds = f"at least {evidence.get('min', 0)}"
    if evidence.get("max") is not None:
        bounds += f" and at most {evidence['max']}"
    rest = {k: v for k, v in evidence.items() if k not in ("count", "min", "max")}
    return f"{evidence.get('count', 0)} found, expected {bounds}; evidence: " + evidence_json(rest)


def json_detail(_check: object, evidence: Evidence) -> str:
    """The evidence as JSON (it names the offending calls or the turn count)."""
    return evidence_json(evidence)


def transcript_contains_detail(check: TranscriptContainsCheck, _evidence: Evidence) -> str:
    """``the assistant's text does not contain 'TESTS PASS'``."""
    return f"the assistant's text does not contain {check.pattern!r}"


def over_transcript(
    judge: Callable[[Any, Sequence[TranscriptEntry]], Outcome],
) -> Callable[[Any, CheckContext], Outcome]:
    """Adapt a transcript judge to a check runner: ``error`` when there is no usable transcript."""

    def run(check: Any, ctx: CheckContext) -> Outcome:
        if ctx.transcript is None or not usable_transcript(ctx.transcript):
            return "error", {"cause": ctx.transcript_error or NO_TRANSCRIPT}
        return judge(check, ctx.transcript)

    return run
