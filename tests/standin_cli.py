"""The ``atlante-eval`` command line with the stand-in host wired in, for subprocess tests.

Run as ``python tests/standin_cli.py run PROJECT ...``: every configured host name
runs :class:`standin.StandinHost`, so a test can send real signals to a real
process. ``ATLANTE_TEST_GRACE_S`` shortens the SIGTERM-to-SIGKILL grace period;
``ATLANTE_TEST_RSS_FILE`` names a file that gets the process's peak resident memory
(``VmHWM``, in KiB) when it exits.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from standin import StandinHost

from atlante_eval import hosts, process
from atlante_eval.cli import main

hosts.HOST_FACTORIES["opencode"] = StandinHost
hosts.HOST_FACTORIES["claude-code"] = StandinHost
if os.environ.get("ATLANTE_TEST_GRACE_S"):
    process.DEFAULT_GRACE_S = float(os.environ["ATLANTE_TEST_GRACE_S"])


def _write_peak_rss(path: str) -> None:
    """Write this process's peak resident set size (KiB) to ``path``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            Path(path).write_text(line.split()[1])


if os.environ.get("ATLANTE_TEST_RSS_FILE"):
    atexit.register(_write_peak_rss, os.environ["ATLANTE_TEST_RSS_FILE"])

if __name__ == "__main__":
    main()
