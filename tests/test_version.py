"""The version read from the distribution's metadata without importlib.metadata."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

from atlante_eval import __version__


def test_the_version_is_what_importlib_metadata_reads() -> None:
    """The fast read and the standard library agree on the installed version."""
    assert __version__ == importlib.metadata.version("atlante-eval")


def test_reading_the_version_imports_no_importlib_metadata() -> None:
    """``import atlante_eval`` (and so ``--help``) does not load importlib.metadata."""
    code = "import sys, atlante_eval; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
