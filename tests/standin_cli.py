"""The ``atlante-eval`` command line with the stand-in host wired in, for subprocess tests.

Run as ``python tests/standin_cli.py run PROJECT ...``: every configured host name
runs :class:`standin.StandinHost`, so a test can send real signals to a real
process. ``ATLANTE_TEST_GRACE_S`` shortens the SIGTERM-to-SIGKILL grace period;
``ATLANTE_TEST_PATTERN_TIMEOUT_MS`` changes the regular-expression time
limit; ``ATLANTE_TEST_MATCH_STARTED`` names a file created when a search starts;
``ATLANTE_TEST_NO_PROJECT_GUARD`` turns the project check before each trial off
(to show the breach it prevents); ``ATLANTE_TEST_RSS_FILE`` names a file that
gets the process's peak resident memory (``VmHWM``, in KiB) when it exits;
``ATLANTE_TEST_STANDIN_DIALECT=claude`` runs :class:`standin_claude.ClaudeDialectStandin`
instead (the stand-in read as Claude Code); ``ATLANTE_TEST_KEEP_PENDING_INPUTS`` makes
the normalizers keep open tool calls' inputs whole (to show the growth the cap prevents);
``ATLANTE_TEST_KILL_AT_RESERVE`` makes the CLI SIGKILL itself the moment its run
directory appears, and ``ATLANTE_TEST_UNSEEDED_RESERVE`` reserves it empty, as before
the journal came with it (to show the directory that leaves);
``ATLANTE_TEST_DEFAULT_SIGHUP`` leaves SIGHUP to its default, as before it interrupted a
run (to show what closing the terminal did);
``ATLANTE_TEST_WEAKEN`` names weakened isolation code paths to install
(:mod:`weakened_isolation`), to show the breach each defence prevents;
``ATLANTE_TEST_SESSION_CANARY`` puts a key with that payload in the process's
own session keyring (:mod:`keyringkit`).
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from standin import StandinHost

from atlante_eval import hosts
from atlante_eval._util import patterns
from atlante_eval.cli import main
from atlante_eval.trial import process


def _standin(binary: str | None = None) -> hosts.Host:
    """Every host name (and any executable) runs a stand-in: Claude's dialect when asked."""
    if os.environ.get("ATLANTE_TEST_STANDIN_DIALECT") == "claude":
        from standin_claude import ClaudeDialectStandin

        return ClaudeDialectStandin()
    return StandinHost()


hosts.HOST_FACTORIES["opencode"] = _standin
hosts.HOST_FACTORIES["claude-code"] = _standin
if os.environ.get("ATLANTE_TEST_KEEP_PENDING_INPUTS"):
    from atlante_eval.transcript import normalize

    def _whole(
        _cls: type[normalize.PendingCall],
        name: str,
        arguments: dict[str, Any],
        t: int,
        ts: str | None,
        parent: str | None,
    ) -> normalize.PendingCall:
        """Keep the input whole: shows what the cap prevents."""
        return normalize.PendingCall(name, arguments, t, ts, parent)

    normalize.PendingCall.capped = classmethod(_whole)  # type: ignore[assignment]
if os.environ.get("ATLANTE_TEST_GRACE_S"):
    process.DEFAULT_GRACE_S = float(os.environ["ATLANTE_TEST_GRACE_S"])
if os.environ.get("ATLANTE_TEST_PATTERN_TIMEOUT_MS"):
    patterns.PATTERN_TIMEOUT_MS = int(os.environ["ATLANTE_TEST_PATTERN_TIMEOUT_MS"])
if os.environ.get("ATLANTE_TEST_NO_PROJECT_GUARD"):
    from atlante_eval.run import runner

    async def _no_check(_planned: object) -> None:
        """Let every trial run: shows what the project check prevents."""

    runner._guard = lambda _watch: _no_check  # type: ignore[assignment]
if os.environ.get("ATLANTE_TEST_MATCH_STARTED"):
    _search_sync = patterns.search_sync

    def _announced_search(*args: Any, **kwargs: Any) -> patterns.MatchOutcome:
        """Create the marker file, then search: a test knows a match is under way."""
        Path(os.environ["ATLANTE_TEST_MATCH_STARTED"]).touch()
        return _search_sync(*args, **kwargs)

    patterns.search_sync = _announced_search
if os.environ.get("ATLANTE_TEST_KILL_AT_RESERVE"):
    import signal

    from atlante_eval.report import publish

    _reserve = publish.reserve_run_dir

    def _reserve_then_die(*args: Any, **kwargs: Any) -> tuple[str, Path]:
        """Reserve the run directory, then die at once: the earliest a run directory exists."""
        if os.environ.get("ATLANTE_TEST_UNSEEDED_RESERVE"):
            kwargs["seed"] = None
        reserved = _reserve(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return reserved

    publish.reserve_run_dir = _reserve_then_die
if os.environ.get("ATLANTE_TEST_DEFAULT_SIGHUP"):
    import signal

    from atlante_eval.cli import run as run_command

    run_command.INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _write_peak_rss(path: str) -> None:
    """Write this process's peak resident set size (KiB) to ``path``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            Path(path).write_text(line.split()[1])


if os.environ.get("ATLANTE_TEST_RSS_FILE"):
    atexit.register(_write_peak_rss, os.environ["ATLANTE_TEST_RSS_FILE"])
if os.environ.get("ATLANTE_TEST_SESSION_CANARY"):
    import keyringkit

    keyringkit.plant_canary(os.environ["ATLANTE_TEST_SESSION_CANARY"])
if os.environ.get("ATLANTE_TEST_WEAKEN"):
    import weakened_isolation

    weakened_isolation.apply(os.environ["ATLANTE_TEST_WEAKEN"].split(","))

if __name__ == "__main__":
    main()
