"""The shape drawn beside each trial verdict in the pages, as inline SVG.

A verdict's shape must not depend on the reader's fonts: the hourglass ``⧗``
(U+29D7) is in none of the fonts Debian ships (it drew as an empty box), and the
check mark, cross and warning sign are in DejaVu but not in Liberation. So the
shapes are drawn, not typed: each is a 16 by 16 inline SVG in ``currentColor`` (it
takes the verdict's colour), hidden from screen readers (the verdict's name is
always written beside it). ``$`` and the en dash are in every font and stay text.
"""

from __future__ import annotations

from markupsafe import Markup

__all__ = ["VERDICT_SHAPES", "verdict_glyph"]


def _svg(body: str) -> Markup:
    return Markup(  # noqa: S704 - our own constant markup
        '<svg class="glyph" viewBox="0 0 16 16" width="1em" height="1em" aria-hidden="true" '
        'focusable="false" fill="none" stroke="currentColor" stroke-width="2" '
        f'stroke-linecap="round" stroke-linejoin="round">{body}</svg>'
    )


#: Every trial verdict, in the order the page lists them, with its shape.
VERDICT_SHAPES: dict[str, Markup] = {
    "pass": _svg('<path d="M3 8.5l3.2 3.2L13 4.5"/>'),
    "fail": _svg('<path d="M4 4l8 8M12 4l-8 8"/>'),
    "timeout": _svg(
        '<path d="M4 2h8M4 14h8M5 2.5q0 3 3 5.5q3 2.5 3 5.5M11 2.5q0 3-3 5.5q-3 2.5-3 5.5"/>'
    ),
    "budget-exceeded": Markup("$"),
    "infra-error": _svg('<path d="M8 2L15 14H1z"/><path d="M8 6.5v3"/><path d="M8 11.8v.1"/>'),
    "skipped-budget": Markup("\u2013"),  # en dash
}
_UNKNOWN = Markup("?")


def verdict_glyph(verdict: str) -> Markup:
    """The shape shown with ``verdict`` (``?`` for a verdict this version does not know)."""
    return VERDICT_SHAPES.get(verdict, _UNKNOWN)
