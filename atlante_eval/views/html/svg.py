"""Inline SVG charts drawn from data: interval bars, forest plots, strips and series.

Every function returns :class:`markupsafe.Markup` holding one ``<svg>`` element
that needs no script, font or network: sizes are in pixels, labels are escaped,
and each chart carries a ``<title>`` (and ``role="img"`` with an ``aria-label``)
so that its numbers can be read without seeing it. Rates and differences are on
the 0-1 scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = [
    "ForestRow",
    "SeriesPoint",
    "forest_plot",
    "interval_bar",
    "series_chart",
    "strip_plot",
    "usage_line",
]


def _n(value: float) -> str:
    """A coordinate with at most one decimal."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return min(max(value, low), high)


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def _svg(width: int, height: int, label: str, body: str, css: str) -> Markup:
    text = escape(label)
    # Every value interpolated into ``body`` is a number or passed through escape().
    return Markup(  # noqa: S704
        f'<svg class="{css}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{text}">'
        f"<title>{text}</title>{body}</svg>"
    )


def interval_bar(rate: float, low: float, high: float, *, width: int = 120) -> Markup:
    """A 0-100% track with the interval ``[low, high]`` as a band and ``rate`` as a mark."""
    height, pad = 14, 2
    span = width - 2 * pad

    def x(value: float) -> str:
        return _n(pad + _clamp(value) * span)

    body = (
        f'<rect class="track" x="{pad}" y="6" width="{span}" height="2"/>'
        f'<rect class="band" x="{x(low)}" y="3" '
        f'width="{_n(max((_clamp(high) - _clamp(low)) * span, 1.0))}" height="8"/>'
        f'<rect class="mark" x="{_n(pad + _clamp(rate) * span - 1.5)}" y="1" '
        f'width="3" height="12"/>'
    )
    label = f"pass rate {_pct(rate)}, 95% interval {_pct(low)} to {_pct(high)}"
    return _svg(width, height, label, body, "interval-bar")


@dataclass(frozen=True, slots=True)
class ForestRow:
    """One row of a forest plot: a label, an estimate and its interval, and a CSS class."""

    label: str
    estimate: float
    low: float
    high: float
    css: str = ""


def forest_plot(
    rows: Sequence[ForestRow],
    *,
    width: int = 560,
    label_width: int = 180,
    subject: str = "HEAD - BASE",
) -> Markup:
    """Differences with intervals on a -100..+100 point axis, one row each, zero marked.

    ``subject`` names the difference in the chart's title (``HEAD - BASE``, ``arm - control``).
    """
    row_height, top = 22, 18
    height = top + row_height * max(len(rows), 1) + 6
    left, right = label_width, width - 24
    span = right - left

    def x(value: float) -> str:
        return _n(left + (_clamp(value, -1.0, 1.0) + 1.0) / 2.0 * span)

    parts = [
        f'<line class="zero" x1="{x(0)}" y1="{top - 4}" x2="{x(0)}" y2="{height - 4}"/>',
    ]
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        parts.append(
            f'<text class="tick" x="{x(tick)}" y="11" text-anchor="middle">{tick * 100:+.0f}</text>'
        )
    for index, row in enumerate(rows):
        y = top + index * row_height + row_height / 2
        css = escape(row.css)
        parts.append(
            f'<g class="row {css}"><text class="label" x="{left - 8}" y="{_n(y + 4)}" '
            f'text-anchor="end">{escape(row.label)}</text>'
            f'<line class="ci" x1="{x(row.low)}" y1="{_n(y)}" x2="{x(row.high)}" y2="{_n(y)}"/>'
            f'<rect class="est" x="{_n(float(x(row.estimate)) - 4)}" y="{_n(y - 4)}" '
            f'width="8" height="8"/></g>'
        )
    summary = "; ".join(
        f"{r.label}: {r.estimate * 100:+.1f} points ({r.low * 100:+.1f} to {r.high * 100:+.1f})"
        for r in rows
    )
    return _svg(
        width, height, f"difference {subject}: {summary or 'none'}", "".join(parts), "forest"
    )


def strip_plot(values: Sequence[float], *, maximum: float, unit: str, width: int = 140) -> Markup:
    """Each value as a tick on a 0..``maximum`` axis, with the nearest-rank p95 marked."""
    height, pad = 16, 3
    span = width - 2 * pad
    top = maximum if maximum > 0 else 1.0
    ordered = sorted(values)
    parts = [f'<rect class="track" x="{pad}" y="7" width="{span}" height="2"/>']
    for value in ordered:
        parts.append(
            f'<rect class="dot" x="{_n(pad + _clamp(value / top) * span - 1)}" y="3" '
            f'width="2" height="10"/>'
        )
    label = f"{len(ordered)} values"
    if ordered:
        p95 = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
        parts.append(
            f'<rect class="p95" x="{_n(pad + _clamp(p95 / top) * span - 1)}" y="0" '
            f'width="2" height="16"/>'
        )
        label = (
            f"{len(ordered)} values from {ordered[0]:g} to {ordered[-1]:g} {unit}, "
            f"p95 {p95:g} {unit}"
        )
    return _svg(width, height, label, "".join(parts), "strip")


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One run of a series: its label, and the rate with its interval (``None``: not graded)."""

    label: str
    rate: float | None
    low: float = 0.0
    high: float = 0.0
    css: str = ""


def series_chart(points: Sequence[SeriesPoint], *, width: int = 360) -> Markup:
    """Pass rate per run, left to right, each with its interval as a whisker."""
    height, pad, top, axis = 90, 8, 6, 34
    inner = height - top - 14
    count = max(len(points), 1)
    step = (width - axis - pad) / count

    def y(value: float) -> str:
        return _n(top + (1.0 - _clamp(value)) * inner)

    parts = []
    for level in (1.0, 0.5, 0.0):
        parts.append(
            f'<line class="grid" x1="{axis}" y1="{y(level)}" x2="{width - pad}" y2="{y(level)}"/>'
            f'<text class="tick" x="{axis - 4}" y="{_n(float(y(level)) + 3)}" '
            f'text-anchor="end">{_pct(level)}</text>'
        )
    previous: tuple[str, str] | None = None
    described = []
    for index, point in enumerate(points):
        cx = _n(axis + step * (index + 0.5))
        if point.rate is None:
            parts.append(f'<text class="na" x="{cx}" y="{y(0.5)}" text-anchor="middle">-</text>')
            previous = None
            described.append(f"{point.label}: not graded")
            continue
        cy = y(point.rate)
        if previous is not None:
            parts.append(
                f'<line class="path" x1="{previous[0]}" y1="{previous[1]}" x2="{cx}" y2="{cy}"/>'
            )
        parts.append(
            f'<g class="point {escape(point.css)}"><line class="ci" x1="{cx}" '
            f'y1="{y(point.high)}" x2="{cx}" y2="{y(point.low)}"/>'
            f'<circle cx="{cx}" cy="{cy}" r="3.5"/></g>'
        )
        previous = (cx, cy)
        described.append(
            f"{point.label}: {_pct(point.rate)} ({_pct(point.low)} to {_pct(point.high)})"
        )
    label = "pass rate per run: " + ("; ".join(described) or "no runs")
    return _svg(width, height, label, "".join(parts), "series")


def usage_line(points: Sequence[tuple[int, int]], *, width: int = 220) -> Markup:
    """Cumulative tokens over the session: ``(milliseconds, tokens)`` pairs as a step line."""
    height, pad = 40, 3
    if not points:
        return _svg(width, height, "no token use recorded", "", "usage")
    last_t = max(t for t, _ in points) or 1
    most = max(tokens for _, tokens in points) or 1

    def xy(t: int, tokens: int) -> str:
        return (
            f"{_n(pad + t / last_t * (width - 2 * pad))},"
            f"{_n(height - pad - tokens / most * (height - 2 * pad))}"
        )

    path = " ".join(xy(t, tokens) for t, tokens in sorted(points))
    body = (
        f'<polyline class="path" fill="none" points="{xy(0, 0)} {path}"/>'
        f'<line class="grid" x1="{pad}" y1="{height - pad}" '
        f'x2="{width - pad}" y2="{height - pad}"/>'
    )
    label = f"tokens over the session: {most:,} after {last_t / 1000:.1f} s"
    return _svg(width, height, label, body, "usage")
