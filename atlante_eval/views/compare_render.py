"""Render a :class:`~atlante_eval.report.compare.CompareResult` as a terminal table or Markdown."""

from __future__ import annotations

from ..choices import FailOn
from ..report.compare import OVERALL, CompareResult, Comparison, RunInfo, Side, gate_rows
from ..stats.planning import EXACT_LIMIT
from .deltas_render import deltas_markdown, deltas_text
from .regrade_render import delta_lines, delta_markdown

__all__ = ["gate_line", "headline", "render_markdown", "render_text"]

_ADJUST_LABEL = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "unadjusted"}
_ANSI = {"improved": "\x1b[32m", "regressed": "\x1b[31m", "inconclusive": "\x1b[33m"}
_GRAY = "\x1b[90m"
_RESET = "\x1b[0m"
_ICON = {"improved": "🟢", "regressed": "🔴", "unchanged": "⚪", "inconclusive": "🟡"}
_DENOMINATOR = (
    "pass rate = passed / graded trials (graded = executed minus infra-errors; "
    "skipped-budget trials never ran)"
)


def render_text(result: CompareResult, *, color: bool = False) -> str:
    """Return the terminal report: header, one row per scenario, overall, added/removed."""
    settings = result.settings
    percent = f"{settings.confidence:.0%}"
    lines = [
        f"compare BASE {result.base.run_id} -> HEAD {result.head.run_id}",
        *_identity_lines(result.base, result.head),
        _DENOMINATOR,
        f"verdicts: Fisher exact p {_ADJUST_LABEL[settings.adjust]}-adjusted over "
        f"{settings.family_size} test{'s' if settings.family_size != 1 else ''}, "
        f"alpha {settings.alpha:g}; unchanged = {percent} interval within "
        f"+/-{settings.margin * 100:g} points",
        "",
    ]
    header: tuple[str, ...] = (
        "SCENARIO",
        "BASE",
        "HEAD",
        f"CHANGE ({percent} CI)",
        "P ADJ",
        "INFRA/SKIP",
        "",
    )
    rows = [header]
    for name, comparison in result.scenarios.items():
        rows.append(_text_row(name, comparison))
    if result.overall is not None:
        rows.append(_text_row("overall (stratified)", result.overall))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for index, row in enumerate(rows):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        last = row[-1]
        if color and index:
            verdict = last.split(" ", 1)[0]
            code = _ANSI.get(verdict)
            last = f"{code}{last}{_RESET}" if code else last
        lines.append("  ".join([*cells, last]).rstrip())
    if not result.scenarios:
        lines.append("(no scenario in both reports)")
    for label, group in (
        ("added (HEAD only)", result.added),
        ("removed (BASE only)", result.removed),
    ):
        if group:
            lines.append("")
            lines.append(f"{label}:")
            lines.extend(f"  {name}  {_side_text(side)}" for name, side in group.items())
    if result.behaviour is not None:
        lines += deltas_text(result.behaviour)
    if result.regrade is not None:
        lines += ["", *delta_lines(result.regrade)]
    lines.append("")
    lines.append(headline(result))
    text = "\n".join(lines)
    return text.replace(_DENOMINATOR, f"{_GRAY}{_DENOMINATOR}{_RESET}") if color else text


def headline(result: CompareResult, *, icons: bool = False) -> str:
    """Scenarios per verdict, then the overall row's verdict: what ``--fail-on`` reads.

    ``0 regressed · 1 improved · 3 inconclusive · overall (stratified): regressed``.
    """
    counts = result.counts
    keys: tuple[str, ...] = ("regressed", "improved", "unchanged", "inconclusive")
    if not icons:
        keys += ("added", "removed")
    parts = [
        f"{_ICON[key] + ' ' if icons else ''}{counts[key]} {key}"
        for key in keys
        if counts[key] or key in ("regressed", "improved")
    ]
    if result.overall is not None and len(result.scenarios) > 1:
        verdict = result.overall.verdict
        parts.append(f"overall (stratified): {_ICON[verdict] + ' ' if icons else ''}{verdict}")
    return " · ".join(parts)


def gate_line(result: CompareResult, fail_on: FailOn, *, rows: list[str] | None = None) -> str:
    """What ``--fail-on`` decided and which rows decided it.

    ``rows``: the rows that trip the gate when it judged a different comparison (the
    history's gate leaves quarantined scenarios out); by default, this one's.
    """
    rows = gate_rows(result, fail_on) if rows is None else rows
    if not rows:
        what = "regressed" if fail_on == "regressed" else "changed"
        return f"--fail-on {fail_on}: passes (no scenario and not the overall row {what})"
    named = [
        f"the overall row (stratified over {result.overall.strata} scenarios)"
        if row == OVERALL and result.overall is not None
        else "the overall row"
        if row == OVERALL
        else f"scenario {row}"
        for row in dict.fromkeys(rows)
    ]
    return f"--fail-on {fail_on}: fails (exit 1), decided by " + ", ".join(named)


def render_markdown(result: CompareResult) -> str:
    """Return a GitHub-flavoured Markdown summary (step summary or PR comment)."""
    settings = result.settings
    percent = f"{settings.confidence:.0%}"
    adjust = _ADJUST_LABEL[settings.adjust]
    lines = [
        f"### atlante-eval compare: {headline(result, icons=True)}",
        "",
        f"BASE `{result.base.run_id}` → HEAD `{result.head.run_id}` · "
        + " · ".join(f"{line}" for line in _identity_lines(result.base, result.head, md=True)),
        "",
        f"| Scenario | BASE | HEAD | Change ({percent} CI) | p ({adjust}) | Verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, comparison in result.scenarios.items():
        lines.append(_md_row(f"`{_md_escape(name)}`", comparison))
    if result.overall is not None:
        lines.append(_md_row("**overall (stratified)**", result.overall))
    if not result.scenarios:
        lines.append("| _no scenario in both reports_ | | | | | |")
    for label, group in (
        ("Added (HEAD only)", result.added),
        ("Removed (BASE only)", result.removed),
    ):
        if group:
            lines.append("")
            lines.append(
                f"**{label}:** "
                + ", ".join(f"`{_md_escape(n)}` {_side_md(s)}" for n, s in group.items())
            )
    if result.behaviour is not None:
        lines += deltas_markdown(result.behaviour)
    lines += [
        "",
        f"Pass rate = passed / graded trials (graded = executed minus infra-errors; "
        f"skipped-budget trials never ran). Verdicts: two-sided Fisher exact test, "
        f"{adjust}-adjusted over {settings.family_size} test"
        f"{'s' if settings.family_size != 1 else ''} at alpha = {settings.alpha:g}; "
        f"*unchanged* means the whole {percent} interval of the change lies within "
        f"±{settings.margin * 100:g} points. *overall* compares each scenario in both "
        "reports only with itself (exact stratified test, Mantel-Haenszel weighted rates), "
        "so scenarios with different trial counts in the two runs cannot mislead it.",
    ]
    if result.regrade is not None:
        lines += delta_markdown(result.regrade)
    for item in result.warnings:
        lines += ["", f"> **Warning** `{item.code}`: {_md_escape(item.message)}"]
    return "\n".join(lines) + "\n"


def _identity_lines(base: RunInfo, head: RunInfo, *, md: bool = False) -> list[str]:
    def quote(value: str) -> str:
        return f"`{value}`" if md else value

    def pair(label: str, old: str, new: str) -> str:
        if old == new:
            return f"{label} {quote(old)}" + (" (same)" if label == "harness" else "")
        return f"{label} {quote(old)} {'→' if md else '->'} {quote(new)}"

    host_old = f"{base.host} {base.host_version or ''}".strip()
    host_new = f"{head.host} {head.host_version or ''}".strip()
    harness_old = (base.manifest_digest or "unrecorded")[:12]
    harness_new = (head.manifest_digest or "unrecorded")[:12]
    parts = [
        pair("host", host_old, host_new),
        pair("model", base.model, head.model),
        pair("harness", harness_old, harness_new),
    ]
    return parts if md else [" · ".join(parts[:2]), parts[2]]


def _text_row(name: str, comparison: Comparison) -> tuple[str, ...]:
    base, head = comparison.base, comparison.head
    return (
        name,
        _side_text(base, counts=False),
        _side_text(head, counts=False),
        _change(comparison),
        _p(comparison.adjusted_p),
        f"{base.infra_errors}/{base.skipped} -> {head.infra_errors}/{head.skipped}",
        _verdict_text(comparison),
    )


def _md_row(name: str, comparison: Comparison) -> str:
    cells = (
        name,
        _side_md(comparison.base),
        _side_md(comparison.head),
        _change(comparison),
        _p(comparison.adjusted_p),
        f"{_ICON[comparison.verdict]} {_verdict_text(comparison)}",
    )
    return "| " + " | ".join(cells) + " |"


def _side_text(side: Side, *, counts: bool = True) -> str:
    low, high = side.interval
    text = (
        f"{side.passed}/{side.graded} {_pct(side.pass_rate)} [{_pct(low, suffix='')}-{_pct(high)}]"
        if side.graded
        else "0/0 (no graded trials)"
    )
    return text + _excluded(side) if counts else text


def _side_md(side: Side) -> str:
    if not side.graded:
        return f"0/0 — no graded trials{_excluded(side)}"
    low, high = side.interval
    return (
        f"{side.passed}/{side.graded} · {_pct(side.pass_rate)} "
        f"[{_pct(low, suffix='')}-{_pct(high)}]{_excluded(side)}"
    )


def _excluded(side: Side) -> str:
    notes = []
    if side.infra_errors:
        notes.append(f"{side.infra_errors} infra-error{'s' if side.infra_errors != 1 else ''}")
    if side.skipped:
        notes.append(f"{side.skipped} skipped")
    return f" ({', '.join(notes)})" if notes else ""


def _change(comparison: Comparison) -> str:
    low, high = comparison.difference_interval

    def points(value: float) -> str:
        rounded = round(value * 100)
        return f"+{rounded}" if rounded > 0 else str(rounded)

    return f"{points(comparison.difference)} pts [{points(low)}, {points(high)}]"


def _verdict_text(comparison: Comparison) -> str:
    if comparison.verdict != "inconclusive":
        return comparison.verdict
    if comparison.trials_needed is None:
        if comparison.base.graded and comparison.head.graded:
            return f"inconclusive (over {EXACT_LIMIT} graded trials/side needed)"
        return "inconclusive (no graded trials)"
    return f"inconclusive (~{comparison.trials_needed} graded trials/side needed)"


def _pct(value: float, *, suffix: str = "%") -> str:
    return f"{round(value * 100)}{suffix}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _md_escape(text: str) -> str:
    """Make ``text`` safe inside a table cell or code span (pipes, backticks, newlines)."""
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
