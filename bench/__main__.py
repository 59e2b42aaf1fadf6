"""Run every ``bench/bench_*.py`` module's ``main()`` in turn and print its results.

Usage, from the repository root::

    python -m bench            # every benchmark
    python -m bench validate   # only bench_validate.py
    python -m bench sequential # adaptive runs' error rates and trials (docs/statistics.md)
    python -m bench html       # a 500-trial report.html: size, render and Chromium times
    python -m bench peers      # side by side with Inspect AI (../shared/peerbench), issue 32
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def _modules(selected: list[str]) -> list[str]:
    names = sorted(path.stem for path in Path(__file__).parent.glob("bench_*.py"))
    if selected:
        names = [name for name in names if name.removeprefix("bench_") in selected]
    return names


def main(argv: list[str]) -> int:
    """Import and run each selected benchmark module; return a process exit status."""
    names = _modules(argv)
    if not names:
        print(f"no benchmark matches {' '.join(argv)}", file=sys.stderr)
        return 2
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        print(f"== {name}")
        started = time.perf_counter()
        module.main()
        print(f"({name} took {time.perf_counter() - started:.1f} s)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
