"""The comparison page as data: per scenario BASE vs HEAD, the forest plot, warnings.

Rows are sorted regressions first (then inconclusive, improved, unchanged), each
with both pass rates and intervals, the difference with its interval, the
verdict, the test that decided it and the trials an inconclusive result needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from ...report.compare import CompareResult, CompareWarning, Comparison, RunInfo, Side
from ..regrade_render import change_reason, delta_headline
from .behaviour_page import BehaviourSection, behaviour_sections
from .svg import ForestRow, forest_plot, interval_bar

__all__ = ["ComparePage", "CompareRow", "compare_page", "verdict_order"]

_ORDER = {"regressed": 0, "inconclusive": 1, "improved": 2, "unchanged": 3}
#: The shape shown with each comparison verdict.
COMPARE_GLYPHS = {
    "regressed": "\u25bc",  # down triangle
    "improved": "\u25b2",  # up triangle
    "unchanged": "=",
    "inconclusive": "?",
}


def verdict_order(verdict: str) -> int:
    """Sort key of a comparison verdict: regressions first."""
    return _ORDER.get(verdict, len(_ORDER))


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One scenario (or the overall pool) of the comparison."""

    name: str
    overall: bool
    comparison: Comparison
    base_bar: Markup
    head_bar: Markup
    glyph: str


@dataclass(frozen=True, slots=True)
class ComparePage:
    """The whole comparison page."""

    title: str
    base: RunInfo
    head: RunInfo
    harness_changed: bool | None
    test: str
    confidence: float
    margin: float
    rows: list[CompareRow]
    overall: CompareRow | None
    forest: Markup
    warnings: list[CompareWarning]
    added: dict[str, Side]
    removed: dict[str, Side]
    counts: dict[str, int]
    behaviour: list[BehaviourSection]
    behaviour_alpha: float | None
    regrade: RegradeSection | None = None
    """When one run regraded the other: the trials whose verdict changed, and why."""


@dataclass(frozen=True, slots=True)
class RegradeSection:
    """The trials a regrade changed (the page's text is escaped by the template)."""

    headline: str
    rows: list[tuple[str, str, str, str]]
    """Per changed trial: ``scenario:i``, BASE's verdict, HEAD's, and why."""


def _row(name: str, comparison: Comparison, *, overall: bool = False) -> CompareRow:
    return CompareRow(
        name=name,
        overall=overall,
        comparison=comparison,
        base_bar=interval_bar(comparison.base.pass_rate, *comparison.base.interval),
        head_bar=interval_bar(comparison.head.pass_rate, *comparison.head.interval),
        glyph=COMPARE_GLYPHS.get(comparison.verdict, "?"),
    )


def compare_page(
    result: CompareResult,
    *,
    links_from: Path | None = None,
    run_dirs: tuple[Path | None, Path | None] = (None, None),
) -> ComparePage:
    """The page of ``result`` (trial links relative to ``links_from``, else absolute)."""
    rows = sorted(
        (_row(name, c) for name, c in result.scenarios.items()),
        key=lambda r: (verdict_order(r.comparison.verdict), r.name),
    )
    overall = _row("overall", result.overall, overall=True) if result.overall else None
    plotted = rows + ([overall] if overall else [])
    forest = forest_plot(
        [
            ForestRow(
                r.name,
                r.comparison.difference,
                *r.comparison.difference_interval,
                css=f"c-{r.comparison.verdict}",
            )
            for r in plotted
        ]
    )
    settings = result.settings
    adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no"}[settings.adjust]
    return ComparePage(
        title=f"atlante-eval compare {result.base.run_id} .. {result.head.run_id}",
        base=result.base,
        head=result.head,
        harness_changed=result.harness_changed,
        test=f"two-sided Fisher exact test, {adjust} adjustment over "
        f"{settings.family_size} tests, alpha {settings.alpha:g}; Newcombe interval "
        f"of the difference; margin {settings.margin * 100:g} points",
        confidence=settings.confidence,
        margin=settings.margin,
        rows=rows,
        overall=overall,
        forest=forest,
        warnings=list(result.warnings),
        added=dict(result.added),
        removed=dict(result.removed),
        counts=dict(result.counts),
        behaviour=behaviour_sections(result.behaviour, links_from=links_from, run_dirs=run_dirs),
        behaviour_alpha=result.behaviour.alpha if result.behaviour else None,
        regrade=_regrade(result),
    )


def _regrade(result: CompareResult) -> RegradeSection | None:
    delta = result.regrade
    if delta is None:
        return None
    rows = [
        (f"{c.scenario}:{c.i}", str(c.before), str(c.after), change_reason(c))
        for c in delta.changed
    ]
    return RegradeSection(headline=delta_headline(delta), rows=rows)
