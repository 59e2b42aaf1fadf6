"""The run's end modules load in the background once asked, once, and never fail the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
