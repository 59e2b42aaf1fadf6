"""The package version, read once from the installed distribution's metadata.

The ``METADATA`` file is found as :mod:`importlib.metadata` finds it (the first
``atlante_eval-*.dist-info`` on ``sys.path``) but read directly: importing
:mod:`importlib.metadata` (email, zipfile, csv) was half the cost of ``--help``.
It is the fallback when no such directory is found (an egg or zip install).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PREFIX = "atlante_eval-"
_SUFFIX = ".dist-info"


def _from_dist_info() -> str | None:
    for entry in sys.path:
        try:  # directory entries, not Path objects: a site-packages holds a few hundred
            with os.scandir(entry or ".") as listing:
                found = [e.path for e in listing if e.name.startswith(_PREFIX)]
        except OSError:
            continue
        for directory in found:
            if not directory.endswith(_SUFFIX):
                continue
            try:
                with Path(directory, "METADATA").open(encoding="utf-8") as handle:
                    for line in handle:
                        if line.startswith("Version:"):
                            return line.partition(":")[2].strip()
                        if not line.strip():
                            break  # the headers end at the first blank line
            except OSError:
                continue
    return None


def _installed_version() -> str:
    found = _from_dist_info()
    if found:
        return found
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("atlante-eval")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


__version__ = _installed_version()
