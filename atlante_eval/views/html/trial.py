"""How the run page lays out one trial's :class:`~atlante_eval.views.trial.TrialView`.

The page shows the same trial view as ``show RUN SCENARIO:I``, read within
:data:`PAGE_CAPS`; a :class:`TrialPanel` adds only what is the page's own: the
anchor, the long values capped, the diff highlighted, the timeline as titled
items nested under subagents, the usage chart and links to the trial's files.
Everything text here is as recorded (untrusted): the templates escape it, and the
diff is highlighted by Pygments, which escapes it too. Large values are capped so
a page of many trials stays small; a capped value says how much was left out and
the panel links the trial's files.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from ...transcript import (
    ErrorEntry,
    HeaderEntry,
    RawEntry,
    ResultEntry,
    SessionStartEntry,
    SkillEntry,
    SubagentEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptEntry,
    TruncatedEntry,
    UsageEntry,
    parse_entry,
)
from ..diff_parts import BinaryFile, split_diff
from ..output import output_excerpt
from ..trial import CheckView, TimelineEntry, TranscriptCaps, TrialView
from .model_calls import CallRow, call_rows, usage_note
from .svg import usage_line

__all__ = [
    "PAGE_CAPS",
    "PAGE_DIFF_CHARS",
    "PAGE_ENTRIES",
    "PAGE_TEXT_CHARS",
    "Capped",
    "EvidenceField",
    "TimelineItem",
    "TrialPanel",
    "allowances",
    "diff_highlighter",
    "highlight_diff",
    "trial_panel",
]

#: Most characters of one text value (evidence, tool input or output, agent text) in the page.
PAGE_TEXT_CHARS = 1_000
#: Most characters of a trial's diff in the page.
PAGE_DIFF_CHARS = 6_000
#: Most transcript entries of one trial in the page.
PAGE_ENTRIES = 150
#: Characters of diff and transcript one trial may put in the page when the run is small;
#: a large run shares :data:`PAGE_BUDGET_CHARS` among its trials instead.
TRIAL_MAX_CHARS = 200_000
#: Least characters of diff and transcript a trial gets, however large the run.
TRIAL_MIN_CHARS = 2_000
#: Characters of diffs and transcripts one page holds in all (about; markup comes on top).
PAGE_BUDGET_CHARS = 1_500_000
#: Characters of markup counted for each timeline entry.
_ENTRY_MARKUP = 300
#: Most transcript bytes read for one trial's panel (the writer caps a transcript at 8 MiB).
PAGE_TRANSCRIPT_BYTES = 9 * 1024 * 1024
#: How much of each trial's transcript the page reads.
PAGE_CAPS = TranscriptCaps(max_bytes=PAGE_TRANSCRIPT_BYTES, max_entries=PAGE_ENTRIES, reader="page")
#: Most changed files listed in one panel.
PAGE_CHANGED_FILES = 200
#: Most characters of a command's output in the page: all a check keeps (its last 2,000).
PAGE_OUTPUT_CHARS = 2_000
#: Most characters of the prompt in the page.
PAGE_PROMPT_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Capped:
    """A text value cut to a page cap: what is shown and how many characters were left out."""

    text: str
    omitted: int = 0


def cap(value: object, limit: int = PAGE_TEXT_CHARS) -> Capped:
    """``value`` as text (JSON unless it is a string), cut to ``limit`` characters."""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) <= limit:
        return Capped(text)
    return Capped(text[:limit], len(text) - limit)


def cap_tail(text: str, limit: int) -> Capped:
    """The last ``limit`` characters of ``text`` (a failure is read at the end)."""
    if len(text) <= limit:
        return Capped(text)
    return Capped(text[-limit:], len(text) - limit)


@dataclass(frozen=True, slots=True)
class TimelineItem:
    """One transcript entry, ready for the page."""

    kind: str
    t: int
    depth: int
    title: str
    status: str = ""
    fields: list[tuple[str, Capped]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Link:
    """A link to one of the trial's files."""

    label: str
    href: str


@dataclass(frozen=True, slots=True)
class EvidenceField:
    """One field of a check's evidence, ready for the page."""

    name: str
    """The evidence key (``output``, ``exit``, ``run``)."""
    value: Capped
    """The value as text: a string as it is (preformatted), anything else as JSON."""
    cut: str | None = None
    """What of the program's output the page leaves out, when it is cut."""
    log: Link | None = None
    """The file holding the whole output (``check-N.log``), when the check kept it."""
    log_name: str | None = None
    """That file's run-relative name, also when it cannot be linked."""


@dataclass(frozen=True, slots=True)
class TrialPanel:
    """One trial's view, laid out for the page: what the page adds to :class:`TrialView`."""

    view: TrialView
    """The trial as ``show`` sees it (the template reads verdict, cause, checks from it).

    Its ``timeline`` is emptied once laid out into :attr:`timeline`: a page holds
    every trial's panel at once, and needs only the entries it shows.
    """
    anchor: str
    """The panel's id in the page."""
    error: Capped | None
    """The trial's error text, capped."""
    checks: list[tuple[CheckView, list[EvidenceField]]]
    """Each check with its evidence, field by field."""
    changed_files: list[tuple[str, str | None]]
    """The first :data:`PAGE_CHANGED_FILES` changed paths, each with its binary change
    (``added``, ``deleted``, ``changed``) when the file is binary."""
    binary_files: list[BinaryFile]
    """The binary files the diff names (their content is not shown)."""
    prompt: Capped | None
    """The prompt the agent received, when recorded."""
    diff: Markup | None
    """The diff of the text files, cut to the trial's share of the page and highlighted."""
    diff_omitted: int
    """Characters of the diff left out of the page."""
    timeline: list[TimelineItem]
    """The transcript's entries while the trial's share of the page lasts."""
    usage_chart: Markup | None
    """Tokens over the session, when the transcript has usage entries."""
    links: list[Link]
    """Links to the trial's recorded files."""
    usage_note: str | None = None
    """Where tokens, cost and model come from (the gateway on)."""
    tampered: list[tuple[str, Capped]] = field(default_factory=list)
    """Tampering evidence: kind and detail."""
    calls: list[CallRow] = field(default_factory=list)
    """The model-call record (the first :data:`~.model_calls.PAGE_CALLS`)."""
    calls_omitted: int = 0
    """Model calls left out of the page (the record file has them all)."""


def _log_link(name: str, run_dir: Path | None, links_from: Path | None) -> Link | None:
    """A link to ``check-N.log`` under ``run_dir``: only a plain path inside ``trials/``."""
    path = PurePosixPath(name)
    if run_dir is None or path.is_absolute() or ".." in path.parts or path.parts[:1] != ("trials",):
        return None
    return Link(path.name, _href(run_dir / path, links_from))


def _output_field(
    text: str, evidence: dict[str, Any], run_dir: Path | None, links_from: Path | None
) -> EvidenceField:
    """A command's output: its end, preformatted, and where the whole of it is."""
    shown = cap_tail(text, PAGE_OUTPUT_CHARS)
    excerpt = output_excerpt(text, evidence, max_lines=0)
    if not excerpt.cut and not shown.omitted:
        return EvidenceField("output", shown)
    name = excerpt.log
    cut = (
        "the check kept the end of the program's output"
        if excerpt.cut
        else f"the last {len(shown.text):,} characters"
    )
    link = _log_link(name, run_dir, links_from) if name else None
    return EvidenceField("output", shown, cut=cut, log=link, log_name=name)


def evidence_fields(
    check: CheckView, *, run_dir: Path | None, links_from: Path | None
) -> list[EvidenceField]:
    """A check's evidence as the page shows it: text preformatted, the rest as JSON."""
    fields: list[EvidenceField] = []
    for key, value in check.evidence.items():
        if key == "outputLog":
            continue  # shown with the output it holds
        if key == "output" and isinstance(value, str):
            fields.append(_output_field(value, check.evidence, run_dir, links_from))
        elif isinstance(value, str):
            fields.append(EvidenceField(key, cap(value)))
        else:
            fields.append(EvidenceField(key, cap(json.dumps(value, ensure_ascii=False))))
    return fields


@functools.cache
def diff_highlighter() -> Callable[[str], str]:
    """Pygments' diff highlighting, its lexer and formatter built once (both are reusable)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    lexer, formatter = DiffLexer(), HtmlFormatter(cssclass="highlight")
    return lambda diff: str(highlight(diff, lexer, formatter))


def highlight_diff(diff: str) -> Markup:
    """The diff as syntax-highlighted HTML (Pygments escapes every character of it)."""
    return Markup(diff_highlighter()(diff))  # noqa: S704 - Pygments escapes


def _href(target: Path, links_from: Path | None) -> str:
    if links_from is None:
        return target.absolute().as_uri()
    return quote(os.path.relpath(target, links_from))


def _depths(entries: list[TranscriptEntry]) -> dict[str, int]:
    """Nesting depth of each subagent call id (0: called by the main agent)."""
    parents = {
        e.id: e.parent
        for e in entries
        if isinstance(e, ToolCallEntry) and e.tool_kind == "subagent"
    }
    depths: dict[str, int] = {}
    for call in parents:
        depth, seen, current = 0, {call}, parents.get(call)
        while current is not None and current not in seen and depth < 16:
            seen.add(current)
            depth += 1
            current = parents.get(current)
        depths[call] = depth + 1
    return depths


def _session_start(entry: SessionStartEntry, depth: int) -> TimelineItem:
    fields = [("model", Capped(entry.model or "unknown"))]
    for name, values in (
        ("tools", entry.tools),
        ("skills", entry.skills),
        ("agents", entry.agents),
    ):
        if values:
            fields.append((name, cap(", ".join(values))))
    title = f"session start: {entry.host} {entry.version or ''}".strip()
    return TimelineItem("session-start", entry.t, depth, title, fields=fields)


def _text(entry: TextEntry, depth: int) -> TimelineItem:
    who = f"{entry.agent} says" if entry.agent else "agent says"
    return TimelineItem("text", entry.t, depth, who, fields=[("text", cap(entry.text))])


def _tool_call(entry: ToolCallEntry, depth: int) -> TimelineItem:
    fields = [("input", cap(entry.input))]
    if entry.output is not None:
        fields.append(("output", cap(entry.output)))
    if entry.error is not None:
        fields.append(("error", cap(entry.error)))
    took = f" in {entry.duration_ms} ms" if entry.duration_ms is not None else ""
    title = f"{entry.name} ({entry.tool_kind}){took}"
    return TimelineItem("tool-call", entry.t, depth, title, entry.status, fields)


def _usage(entry: UsageEntry, depth: int) -> TimelineItem:
    cost = f", ${entry.cost_usd:.4f}" if entry.cost_usd is not None else ""
    tokens = f"{entry.tokens:,}" if entry.tokens is not None else "?"
    return TimelineItem("usage", entry.t, depth, f"usage: {tokens} tokens{cost}")


def _error(entry: ErrorEntry, depth: int) -> TimelineItem:
    status = f" (HTTP {entry.status})" if entry.status is not None else ""
    fields = [("message", cap(entry.message))]
    return TimelineItem("error", entry.t, depth, f"error{status}", "error", fields)


def _result(entry: ResultEntry, depth: int) -> TimelineItem:
    fields = [("text", cap(entry.text))] if entry.text else []
    turns = f", {entry.turns} turns" if entry.turns is not None else ""
    return TimelineItem("result", entry.t, depth, f"result: {entry.status}{turns}", fields=fields)


def _truncated(entry: TruncatedEntry, depth: int) -> TimelineItem:
    title = f"truncated ({entry.reason}): {entry.dropped:,} {entry.unit} left out"
    return TimelineItem("truncated", entry.t, depth, title)


def _item(entry: TranscriptEntry, depths: dict[str, int]) -> TimelineItem | None:
    """The page's item for one entry (``None`` for the header)."""
    parent = getattr(entry, "parent", None)
    depth = depths.get(parent, 1) if isinstance(parent, str) else 0
    match entry:
        case HeaderEntry():
            return None
        case SessionStartEntry():
            return _session_start(entry, depth)
        case TextEntry():
            return _text(entry, depth)
        case ToolCallEntry():
            return _tool_call(entry, depth)
        case SkillEntry():
            return TimelineItem("skill", entry.t, depth, f"skill {entry.name}")
        case SubagentEntry():
            return TimelineItem("subagent", entry.t, depth, f"subagent {entry.name}")
        case UsageEntry():
            return _usage(entry, depth)
        case ErrorEntry():
            return _error(entry, depth)
        case ResultEntry():
            return _result(entry, depth)
        case TruncatedEntry():
            return _truncated(entry, depth)
        case RawEntry():
            return TimelineItem(
                "raw", entry.t, depth, "host event", fields=[("event", cap(entry.event))]
            )
    return None


def _size(item: TimelineItem) -> int:
    return _ENTRY_MARKUP + len(item.title) + sum(len(v.text) for _, v in item.fields)


def _typed(entry: TimelineEntry) -> TranscriptEntry:
    """The transcript entry a timeline entry holds, by the transcript format's models."""
    if entry.kind == "raw":
        return RawEntry(t=entry.t or 0, event=entry.data.get("event"))
    stamp = {} if entry.t is None else {"t": entry.t}
    return parse_entry({**entry.data, "kind": entry.kind, **stamp})


def _timeline(
    timeline: list[TimelineEntry], allowance: int
) -> tuple[list[TimelineItem], Markup | None]:
    """The transcript's entries while ``allowance`` characters last, then a note of the rest."""
    entries = [_typed(entry) for entry in timeline]
    depths = _depths(entries)
    items: list[TimelineItem] = []
    used = 0
    for position, entry in enumerate(entries):
        item = _item(entry, depths)
        if item is None:
            continue
        used += _size(item)
        if used > allowance and items:
            rest = len(entries) - position
            title = f"{rest:,} more entries left out of this page: see transcript.jsonl"
            items.append(TimelineItem("truncated", item.t, 0, title))
            break
        items.append(item)
    usage = [(e.t, e.tokens) for e in entries if isinstance(e, UsageEntry) and e.tokens is not None]
    return items, usage_line(usage) if usage else None


def allowances(weights: list[int]) -> list[int]:
    """Share :data:`PAGE_BUDGET_CHARS` among trials by weight, within the per-trial bounds."""
    total = sum(weights) or 1
    return [
        min(max(PAGE_BUDGET_CHARS * w // total, TRIAL_MIN_CHARS), TRIAL_MAX_CHARS) for w in weights
    ]


def _diff(diff: str | None, allowance: int) -> tuple[Markup | None, int, int]:
    """The diff highlighted within the trial's share; what it left out and the share left."""
    if not diff:
        return None, 0, allowance
    shown = min(PAGE_DIFF_CHARS, max(allowance // 2, TRIAL_MIN_CHARS // 2))
    omitted = max(len(diff) - shown, 0)
    left = allowance - min(len(diff), shown) * 2  # highlighting about doubles it
    return highlight_diff(diff[:shown]), omitted, left


def trial_panel(
    view: TrialView,
    anchor: str,
    *,
    run_dir: Path | None,
    links_from: Path | None,
    allowance: int = TRIAL_MAX_CHARS,
) -> TrialPanel:
    """Lay ``view`` out for the page (built with :data:`PAGE_CAPS`).

    Args:
        view: the trial (:func:`atlante_eval.views.trial.build_trial_view`).
        anchor: the panel's id in the page.
        run_dir: the run directory the view's files are relative to.
        links_from: the directory the page is written in (``None``: absolute links).
        allowance: the characters of diff and transcript the panel may hold.
    """
    parts = split_diff(view.diff) if view.diff else None
    binary = parts.binary if parts is not None else []
    kinds = {item.path: item.change for item in binary}
    text = parts.text if parts is not None and parts.text.strip() else None
    diff, omitted, allowance = _diff(text, allowance)
    timeline, chart = _timeline(view.timeline, max(allowance, TRIAL_MIN_CHARS))
    links: list[Link] = []
    if run_dir is not None:
        links = [Link(PurePosixPath(n).name, _href(run_dir / n, links_from)) for n in view.files]
    calls, calls_omitted = call_rows(view.calls or [])
    return TrialPanel(
        view=view.model_copy(update={"timeline": []}),
        anchor=anchor,
        error=cap(view.error) if view.error else None,
        checks=[
            (check, evidence_fields(check, run_dir=run_dir, links_from=links_from))
            for check in view.checks
        ],
        changed_files=[(path, kinds.get(path)) for path in view.changed_files[:PAGE_CHANGED_FILES]],
        binary_files=binary,
        prompt=cap(view.prompt, PAGE_PROMPT_CHARS) if view.prompt is not None else None,
        diff=diff,
        diff_omitted=omitted,
        timeline=timeline,
        usage_chart=chart,
        links=links,
        usage_note=usage_note(view.usage),
        tampered=[(e.kind, cap(e.detail)) for e in view.tampered or []],
        calls=calls,
        calls_omitted=calls_omitted,
    )


def jsonable(value: Any) -> str:
    """``value`` as compact JSON for a ``data-`` attribute."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
