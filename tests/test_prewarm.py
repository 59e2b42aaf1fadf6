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
