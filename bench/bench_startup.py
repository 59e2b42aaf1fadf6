"""CLI start-up time: ``atlante-eval --help`` against a bare interpreter.

Each command runs ``RUNS`` times in a fresh process; the median wall time is
reported, with the ratio to ``python -c pass`` (the interpreter's own start-up)
and the time the imports of ``atlante_eval.cli`` take (``-X importtime``, the
cumulative time of the top-level import).

Run from the repository root: ``python -m bench startup``.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time

#: Fresh processes per measured command.
RUNS = 15

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "atlante-eval --help": [sys.executable, "-m", "atlante_eval", "--help"],
    "atlante-eval --version": [sys.executable, "-m", "atlante_eval", "--version"],
    "import atlante_eval (library)": [sys.executable, "-c", "import atlante_eval.run.runner"],
}


def median_seconds(argv: list[str]) -> float:
    """Median wall time of ``RUNS`` fresh runs of ``argv`` (one warm-up run first)."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cli_import_ms() -> float:
    """Cumulative import time of ``atlante_eval.cli`` in milliseconds."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import atlante_eval.cli"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| atlante_eval\.cli$", line)
        if match:
            return int(match.group(1)) / 1000
    return float("nan")


def main() -> None:
    """Measure and print start-up times."""
    medians = {name: median_seconds(argv) for name, argv in COMMANDS.items()}
    bare = medians["python -c pass"]
    print(
        json.dumps(
            {
                "runs": RUNS,
                **{
                    name: {"median_ms": round(s * 1000, 1), "vs_bare_python": round(s / bare, 2)}
                    for name, s in medians.items()
                },
                "atlante_eval.cli_import_ms": round(cli_import_ms(), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
