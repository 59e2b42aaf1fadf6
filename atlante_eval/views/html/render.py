"""Render the pages: one Jinja2 environment (autoescape on) over the package's templates."""

from __future__ import annotations

import base64
import functools
import hashlib
import threading
from collections.abc import Callable, Mapping
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from markupsafe import Markup

from ..._version import __version__
from ...choices import SELFTEST_HOST

if TYPE_CHECKING:
    import jinja2

    from ...report import RunReport
    from ...report.compare import CompareResult
    from .history import LoadedReport
    from .history_store import StorePage

__all__ = [
    "GENERATOR",
    "render_compare_html",
    "render_history_html",
    "render_run_html",
    "render_selftest_html",
    "render_store_history_html",
    "warm_run_page",
]

#: The ``<meta name="generator">`` of every page (``html`` replaces only files that carry it).
GENERATOR = "atlante-eval"


def _percent(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value * 100:.{digits}f}%"


def _points(value: float) -> str:
    return f"{value * 100:+.1f}"


def _seconds(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.1f} s"


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if float(value).is_integer() or value >= 100 else f"{value:,.1f}"


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.4f}"


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2
    from pygments.formatters import HtmlFormatter

    from .glyphs import verdict_glyph

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("atlante_eval.views.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        percent=_percent,
        points=_points,
        seconds=_seconds,
        number=_number,
        money=_money,
        glyph=verdict_glyph,
    )
    script = (files("atlante_eval.views.html") / "templates" / "app.js").read_text(encoding="utf-8")
    style = (files("atlante_eval.views.html") / "templates" / "style.css").read_text(
        encoding="utf-8"
    )
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    env.globals.update(
        # Only this script may run: its hash is the page's script-src (no injected one can).
        app_js=Markup(script),  # noqa: S704 - our own file
        style_css=Markup(style),  # noqa: S704 - our own file
        script_hash=f"sha256-{digest}",
        generator=GENERATOR,
        version=__version__,
        pygments_css=HtmlFormatter(cssclass="highlight").get_style_defs(".highlight"),
    )
    return env


_P = ParamSpec("_P")
_R = TypeVar("_R")
#: Held while a page is built or the run page warmed up: Pygments loads its
#: formatters lazily and not thread-safely, so the background warm-up
#: (:func:`warm_run_page`) and a render never run at once (reentrant: a run page
#: of a selftest is a selftest page).
_PAGES = threading.RLock()


def _exclusive(function: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(function)
    def held(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _PAGES:
            return function(*args, **kwargs)

    return held


#: The templates a run page uses (``run.html.j2`` and what it extends, imports, includes).
_RUN_TEMPLATES = ("run.html.j2", "base.html.j2", "macros.html.j2", "trial.html.j2")


@_exclusive
def warm_run_page() -> None:
    """Import, compile and build what :func:`render_run_html` needs, ahead of time.

    The end of a run calls this from a background thread while sessions wait
    (:mod:`atlante_eval.run.prewarm`), so ``report.html`` is only rendered at the end.
    """
    from .run_page import run_page  # noqa: F401 - imported for its cost
    from .trial import diff_highlighter

    environment = _environment()
    for name in _RUN_TEMPLATES:
        environment.get_template(name)
    diff_highlighter()


def _render(template: str, **context: Any) -> bytes:
    return _environment().get_template(template).render(**context).encode("utf-8")


@_exclusive
def render_run_html(
    report: RunReport, *, run_dir: Path | None = None, links_from: Path | None = None
) -> bytes:
    """The run page of ``report``.

    Args:
        report: any run report (a run's, merged, or the reference tool's); a
            selftest's (``meta.host`` ``selftest``) is drawn as selftest results
            (:func:`render_selftest_html`).
        run_dir: the run directory holding ``trials/<scenario>/<i>/`` transcripts, if any.
        links_from: the directory the page will be written in (links to trial files
            are relative to it); ``None`` links with absolute ``file://`` addresses.
    """
    from .glyphs import VERDICT_SHAPES
    from .run_page import run_page

    if report.meta.host == SELFTEST_HOST:
        return render_selftest_html(report, run_dir=run_dir, links_from=links_from)
    page = run_page(report, run_dir=run_dir, links_from=links_from)
    return _render("run.html.j2", page=page, verdict_names=list(VERDICT_SHAPES))


@_exclusive
def render_selftest_html(
    report: RunReport,
    *,
    run_dir: Path | None = None,
    links_from: Path | None = None,
    analysis: Mapping[str, Any] | None = None,
) -> bytes:
    """The selftest page of a selftest ``report``: scenarios x stand-in agents.

    Args:
        report: a selftest's report.
        run_dir: its run directory (trial transcripts, and ``selftest.json`` when
            ``analysis`` is not given).
        links_from: the directory the page will be written in.
        analysis: the selftest's analysis (``selftest.json``) as JSON.
    """
    from .selftest_page import selftest_page

    page = selftest_page(report, run_dir=run_dir, links_from=links_from, analysis=analysis)
    return _render("selftest.html.j2", page=page)


@_exclusive
def render_compare_html(
    result: CompareResult,
    *,
    links_from: Path | None = None,
    run_dirs: tuple[Path | None, Path | None] = (None, None),
) -> bytes:
    """The comparison page of ``result``.

    Args:
        result: the comparison (with ``behaviour`` for the "why" sections).
        links_from: the directory the page will be written in (links to example
            trials' transcripts are relative to it); ``None`` links absolutely.
        run_dirs: BASE's and HEAD's run directories, when known as paths (else the
            directories ``behaviour`` names).
    """
    from .compare_page import compare_page

    page = compare_page(result, links_from=links_from, run_dirs=run_dirs)
    return _render("compare.html.j2", page=page)


@_exclusive
def render_history_html(directory: Path, reports: list[LoadedReport]) -> bytes:
    """The history page of ``reports`` (oldest first) found under ``directory``."""
    from .history import history_page

    return _render("history.html.j2", page=history_page(directory, reports))


@_exclusive
def render_store_history_html(page: StorePage) -> bytes:
    """The history page drawn from the history store (:mod:`.history_store`)."""
    return _render("history_store.html.j2", page=page)
