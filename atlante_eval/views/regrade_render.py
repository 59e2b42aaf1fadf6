"""Render a regrade's trial-level changes: which trials changed verdict, and why.

Used by ``regrade`` (after publishing) and ``compare`` (terminal and Markdown)
when one report regraded the other. Reasons can quote stored paths (untrusted):
terminal text is made printable, Markdown text escaped.
"""

from __future__ import annotations

from .._util.terminal import printable
from ..report import RunReport
from ..report.regrade_delta import CheckChange, RegradeDelta, TrialChange, regrade_delta

__all__ = ["change_reason", "delta_headline", "delta_lines", "delta_markdown", "regrade_lines"]

#: Most changed trials listed (the rest are counted).
SHOWN_CHANGES = 50


def _check_text(change: CheckChange) -> str:
    label = f"check {change.index} ({change.type})"
    if change.before is None:
        return f"{label} new: {change.after}"
    if change.after is None:
        return f"{label} gone (was {change.before})"
    return f"{label} {change.before} -> {change.after}"


def change_reason(change: TrialChange) -> str:
    """Why a trial's verdict changed: the checks that moved, or why it was not regraded."""
    if change.reason is not None:
        return f"not regraded: {change.reason}"
    return "; ".join(_check_text(c) for c in change.checks) or "no check verdict moved"


def delta_headline(delta: RegradeDelta) -> str:
    """One line: what the regrade did and how many trials changed verdict."""
    parts = [f"{delta.regraded} regraded"]
    if delta.kept:
        parts.append(f"{delta.kept} kept (never graded)")
    if delta.unavailable:
        parts.append(f"{delta.unavailable} could not be rebuilt")
    changed = len(delta.changed)
    return (
        f"regrade of run {delta.from_run} ({delta.regraded_run}): {', '.join(parts)}; "
        f"{changed} trial{'s' if changed != 1 else ''} changed verdict"
    )


def delta_lines(delta: RegradeDelta) -> list[str]:
    """The terminal lines: a headline, then one line per changed trial."""
    lines = [delta_headline(delta)]
    for change in delta.changed[:SHOWN_CHANGES]:
        lines.append(
            printable(
                f"  {change.scenario}:{change.i}  {change.before} -> {change.after}  "
                + change_reason(change)
            )
        )
    if len(delta.changed) > SHOWN_CHANGES:
        lines.append(f"  … and {len(delta.changed) - SHOWN_CHANGES} more")
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")


def delta_markdown(delta: RegradeDelta) -> list[str]:
    """The Markdown section: a headline and a table of the changed trials."""
    lines = ["", f"**{_md(delta_headline(delta))}**"]
    if delta.changed:
        lines += ["", "| Trial | BASE | HEAD | Why |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{_md(c.scenario)}:{c.i}` | {c.before} | {c.after} | {_md(change_reason(c))} |"
            for c in delta.changed[:SHOWN_CHANGES]
        ]
        if len(delta.changed) > SHOWN_CHANGES:
            lines.append(f"| … {len(delta.changed) - SHOWN_CHANGES} more | | | |")
    return lines


def regrade_lines(original: RunReport, regraded: RunReport) -> list[str]:
    """What ``regrade`` prints after the summary (nothing when the pair is not a regrade)."""
    delta = regrade_delta(original, regraded)
    return delta_lines(delta) if delta is not None else []
