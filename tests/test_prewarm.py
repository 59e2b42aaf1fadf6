"""The run's end modules load in the background once asked, once, and never fail the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from reports import report

from atlante_eval.run.prewarm import END_MODULES, end_modules


def test_end_modules_follow_the_options() -> None:
    """Only what the run's process will import at its end: the HTML pages, or nothing (the
    history store is written by the recorder's own process)."""
    assert end_modules(html=True) == END_MODULES
    assert end_modules(html=False) == ()


def test_the_prewarmer_imports_in_a_thread_once_and_swallows_failures() -> None:
    """Nothing loads until it is called; then one thread imports, a bad name stops it quietly."""
    code = """
        import sys, threading
        from atlante_eval.run.prewarm import prewarmer
        start = prewarmer(["xml.dom.minidom", "no_such_module_here", "xml.sax.saxutils"])
        before = "xml.dom.minidom" in sys.modules
        start(); start()
        threads = [t for t in threading.enumerate() if t.name == "atlante-eval-prewarm"]
        for t in threads:
            t.join()
        print(before, len(threads), "xml.dom.minidom" in sys.modules,
              "xml.sax.saxutils" in sys.modules)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "1", "True", "False"]
    assert out.stderr == ""


def test_the_run_page_is_ready_after_the_prewarm() -> None:
    """The end's entry imports the page modules, compiles the run page's templates and builds
    the diff highlighter, so rendering ``report.html`` at the end does none of it."""
    code = """
        import sys, threading
        from atlante_eval.run.prewarm import END_MODULES, prewarmer
        from atlante_eval.views.html import render, trial
        def built():
            environment, highlighter = render._environment, trial.diff_highlighter
            return environment.cache_info().currsize, highlighter.cache_info().currsize
        print(*built())
        prewarmer(END_MODULES)()
        [t.join() for t in threading.enumerate() if t.name == "atlante-eval-prewarm"]
        cached = render._environment().cache  # jinja's compiled templates
        print(*built(), "atlante_eval.views.html.run_page" in sys.modules, len(cached) == 4)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", "0", "1", "1", "True", "True"]


class _Watched:
    """A stand-in for the pages' lock: says when a thread is about to take it.

    ``real`` False is the defence removed: taking it never waits.
    """

    def __init__(self, *, real: bool) -> None:
        self._lock = threading.RLock() if real else None
        self.waiting: list[threading.Event] = []

    def __enter__(self) -> None:
        for event in self.waiting:
            event.set()
        if self._lock is not None:
            self._lock.acquire()

    def __exit__(self, *_exc: object) -> None:
        if self._lock is not None:
            self._lock.release()


@pytest.mark.parametrize("defended", [True, False])
def test_a_render_never_overlaps_the_warm_up(
    monkeypatch: pytest.MonkeyPatch, defended: bool
) -> None:
    """Pygments loads its formatters lazily and not thread-safely (two threads at once made
    ``cannot import name 'HtmlFormatter'``): a page rendered while the warm-up runs waits
    for it. Without the lock the render runs inside the warm-up, which the test sees."""
    from atlante_eval.views.html import render, trial

    lock = _Watched(real=defended)
    monkeypatch.setattr(render, "_PAGES", lock)
    order: list[str] = []
    in_warm_up, release = threading.Event(), threading.Event()
    real_highlighter = trial.diff_highlighter

    def held_highlighter() -> Any:
        in_warm_up.set()
        release.wait()
        order.append("warm-up done")
        return real_highlighter()

    monkeypatch.setattr(trial, "diff_highlighter", held_highlighter)
    warm = threading.Thread(target=render.warm_run_page)
    warm.start()
    in_warm_up.wait()
    monkeypatch.setattr(trial, "diff_highlighter", real_highlighter)
    render_waiting = threading.Event()
    lock.waiting.append(render_waiting)

    def draw() -> None:
        render.render_run_html(report({"s": ["pass"]}))
        order.append("rendered")

    drawing = threading.Thread(target=draw)
    drawing.start()
    render_waiting.wait()  # the render has reached the lock
    if not defended:
        drawing.join()  # nothing stopped it
    release.set()
    warm.join()
    drawing.join()
    expected = ["warm-up done", "rendered"] if defended else ["rendered", "warm-up done"]
    assert order == expected


def test_the_recorder_starts_after_a_session_and_the_warm_up_once_all_have_started() -> None:
    """The session-end hook starts the recorder's process at the first end, and the warm-up
    only when no trial waits to start (it took CPU from trials being handed their slots)."""
    code = """
        import sys, threading
        from atlante_eval.run.prewarm import end_prewarm
        started = []
        hook = end_prewarm(["xml.dom.minidom"], lambda: started.append("recorder"))
        def settle():
            for t in threading.enumerate():
                if t.name == "atlante-eval-prewarm":
                    t.join()
        def state():
            return len(started), "xml.dom.minidom" in sys.modules
        hook(False); settle(); first = state()
        hook(False); settle(); second = state()
        hook(True); settle(); third = state()
        hook(True); settle(); print(first, second, third, state())
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "(1, False) (1, False) (1, True) (1, True)"
