"""Render behaviour deltas for the terminal and Markdown: the "why" under ``compare``'s table.

A scenario gets a block when it regressed or improved, or when some usage delta
is significant although its pass rate did not change. Names, tool inputs and
check types come from transcripts and reports (untrusted): they are made
:func:`~atlante_eval._util.terminal.printable` for the terminal and escaped for
Markdown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._util.terminal import printable, shorten
from ..deltas import CAUSE_LABEL, effort_summary, step_label
from ..report.behaviour import (
    AlignedStep,
    BehaviourDeltas,
    EffortDelta,
    PathDelta,
    PathStep,
    ScenarioBehaviour,
)

__all__ = [
    "PATH_ROWS",
    "USAGE_ROWS",
    "deltas_markdown",
    "deltas_text",
    "path_window",
    "shown_scenarios",
    "step_text",
]

#: Usage deltas listed per scenario (all of them are in ``--json``).
USAGE_ROWS = 5
#: Aligned path rows shown, starting a little before the first divergence.
PATH_ROWS = 12
_BEFORE_DIVERGENCE = 2
_CELL = 48
_ORDER = {"regressed": 0, "improved": 1}


def shown_scenarios(deltas: BehaviourDeltas) -> list[tuple[str, ScenarioBehaviour]]:
    """Scenarios worth explaining: regressed, improved, or with a significant usage delta."""
    chosen = [
        (name, s)
        for name, s in deltas.scenarios.items()
        if s.verdict in _ORDER or any(u.significant for u in s.usage or [])
    ]
    return sorted(chosen, key=lambda pair: (_ORDER.get(pair[1].verdict or "", 2), pair[0]))


def step_text(step: PathStep | None) -> str:
    """A step as ``  shell Bash x3: pytest -q`` (indented by depth); ``-`` for none."""
    if step is None:
        return "-"
    detail = f": {step.detail}" if step.detail and step.count == 1 else ""
    status = f" [{step.status}]" if step.status else ""
    return "  " * step.depth + step_label(step) + status + detail


def path_window(paths: PathDelta) -> tuple[int, list[AlignedStep]]:
    """The rows to show: from shortly before the first divergence, at most :data:`PATH_ROWS`."""
    start = max(0, (paths.first_divergence or 0) - _BEFORE_DIVERGENCE)
    return start, paths.alignment[start : start + PATH_ROWS]


def _p(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _effort_line(rows: Sequence[EffortDelta]) -> str:
    parts = []
    for row in rows:
        relative = f"{row.relative:+.0%}, " if row.relative is not None else ""
        parts.append(f"{effort_summary(row)} ({relative}p {_p(row.p_value)})")
    return " · ".join(parts)


def _heading(name: str, s: ScenarioBehaviour) -> str:
    what = s.verdict if s.verdict in _ORDER else "behaviour changed"
    return (
        f"why {name} {what}: BASE {s.base.graded} graded trials ({s.base.transcripts} with a "
        f"transcript), HEAD {s.head.graded} ({s.head.transcripts})"
    )


def _text_block(name: str, s: ScenarioBehaviour, safe: Callable[[str], str]) -> list[str]:
    lines = [safe(_heading(name, s))]
    if s.probable_cause:
        lines.append(f"  {CAUSE_LABEL}: {safe(s.probable_cause)}")
    if s.usage:
        lines.append("  usage (rank-sum test; * = significant after Holm adjustment):")
        width = min(_CELL + 20, max(len(safe(u.summary)) for u in s.usage[:USAGE_ROWS]))
        for u in s.usage[:USAGE_ROWS]:
            star = " *" if u.significant else ""
            lines.append(
                f"    {safe(u.summary).ljust(width)}  p {_p(u.p_value)}  adj {_p(u.adjusted_p)}"
                + star
            )
        if len(s.usage) > USAGE_ROWS:
            lines.append(f"    ({len(s.usage) - USAGE_ROWS} more in --json)")
    lines += [f"  {safe(c.summary)}  p {_p(c.p_value)}" for c in s.checks if c.change != "same"]
    if s.paths is not None:
        lines += _text_paths(s.paths, safe)
    if s.effort:
        lines.append(f"  effort per trial: {_effort_line(s.effort)}")
    lines += [f"  note: {safe(note)}" for note in s.notes]
    return lines


def _text_paths(paths: PathDelta, safe: Callable[[str], str]) -> list[str]:
    divergence = paths.first_divergence
    lines = [
        f"  typical paths: BASE followed by {paths.base.followed}/{paths.base.trials} trials "
        f"({paths.base.chosen_by}), HEAD by {paths.head.followed}/{paths.head.trials} "
        f"({paths.head.chosen_by}); "
        + (
            "identical"
            if divergence is None
            else f"first divergence at step {divergence + 1} (edit distance {paths.distance})"
        )
    ]
    start, rows = path_window(paths)
    width = min(_CELL, max([len("BASE"), *(len(safe(step_text(r.base))) for r in rows)]))
    lines.append(
        f"       {'#':>3}  {'BASE'.ljust(width)}  HEAD   "
        "(= same, ~ changed, - BASE only, + HEAD only, > first divergence)"
    )
    if start:
        lines.append("       ...")
    for number, row in enumerate(rows, start=start):
        mark = ">" if number == divergence else " "
        old = shorten(safe(step_text(row.base)), width).ljust(width)
        new = shorten(safe(step_text(row.head)), _CELL)
        op = {"same": "=", "changed": "~", "removed": "-", "added": "+"}[row.op]
        lines.append(f"    {mark}{op} {number + 1:>3}  {old}  {new}")
    if start + len(rows) < len(paths.alignment):
        lines.append(f"       ... ({len(paths.alignment) - start - len(rows)} more rows in --json)")
    return lines


def deltas_text(deltas: BehaviourDeltas) -> list[str]:
    """The terminal lines explaining each changed scenario (empty when none changed)."""
    lines: list[str] = []
    for name, s in shown_scenarios(deltas):
        lines += ["", *_text_block(name, s, printable)]
    return lines


def _md_code(text: str) -> str:
    """Safe inside a table cell's code span: pipes, backticks, line breaks, control characters."""
    return printable(text).replace("|", "\\|").replace("`", "'")


def _md(text: str) -> str:
    """Safe as table-cell or paragraph text: also no HTML tag."""
    return _md_code(text).replace("<", "&lt;")


def deltas_markdown(deltas: BehaviourDeltas) -> list[str]:
    """The Markdown sections explaining each changed scenario (empty when none changed)."""
    lines: list[str] = []
    for name, s in shown_scenarios(deltas):
        lines += [
            "",
            f"#### Why `{_md_code(name)}` {s.verdict if s.verdict in _ORDER else 'changed'}",
        ]
        if s.probable_cause:
            lines += ["", f"**{CAUSE_LABEL}:** {_md(s.probable_cause)}"]
        if s.usage:
            lines += ["", "| Usage delta | p | p (Holm) |", "| --- | --- | --- |"]
            lines += [
                f"| {_md(u.summary)} | {_p(u.p_value)} | {_p(u.adjusted_p)}"
                f"{' **significant**' if u.significant else ''} |"
                for u in s.usage[:USAGE_ROWS]
            ]
        changed = [c for c in s.checks if c.change != "same"]
        if changed:
            lines += [""] + [f"- {_md(c.summary)} (p {_p(c.p_value)})" for c in changed]
        if s.paths is not None:
            lines += _md_paths(s.paths)
        if s.effort:
            lines += ["", f"Effort per trial: {_md(_effort_line(s.effort))}"]
        lines += [f"\n> {_md(note)}" for note in s.notes]
    return lines


def _md_paths(paths: PathDelta) -> list[str]:
    start, rows = path_window(paths)
    divergence = paths.first_divergence
    lines = [
        "",
        f"Typical paths (BASE {paths.base.followed}/{paths.base.trials} trials, HEAD "
        f"{paths.head.followed}/{paths.head.trials}); "
        + ("identical." if divergence is None else f"first divergence at step {divergence + 1}:"),
        "",
        "| # | BASE | HEAD |",
        "| --- | --- | --- |",
    ]
    for number, row in enumerate(rows, start=start):
        cells = [_md_code(shorten(step_text(s).strip(), _CELL)) for s in (row.base, row.head)]
        label = f"**{number + 1}** ▶" if number == divergence else str(number + 1)
        lines.append(f"| {label} | `{cells[0]}` | `{cells[1]}` |")
    return lines
