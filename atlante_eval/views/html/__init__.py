"""Self-contained HTML pages: a run report, a selftest, a comparison, and the history of runs.

Each page is one file with everything inlined (styles, charts as SVG, a small
script for filtering, sorting and expanding); it makes no network request and
reads without JavaScript. Pages are Jinja2 templates with autoescaping on;
diffs are highlighted with Pygments. See docs/html-report.md.
"""

from __future__ import annotations

from .render import (
    render_compare_html,
    render_history_html,
    render_run_html,
    render_selftest_html,
)

__all__ = ["render_compare_html", "render_history_html", "render_run_html", "render_selftest_html"]
