"""Peak memory of the engine while a host streams 200 MB.

The real CLI runs one trial of the stand-in host in a subprocess, and reports its
own peak resident memory (``VmHWM``) when it exits. Three 200 MB streams are
measured against a quiet trial of the same project: 200 MB of JSON events
(~1 KiB each, every one parsed), 200 MB of non-JSON lines, and 200 MB on one line
without a newline. The figure that matters is the growth over the quiet run as a
fraction of the stream: a bounded reader keeps it near zero (at most one
over-long line, 16 MiB, is ever buffered).

Run from the repository root: ``python -m bench memory``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from factory import make_project, scenario  # noqa: E402 - tests/ is put on the path above
from standin import actions  # noqa: E402

ENTRY = TESTS / "standin_cli.py"
#: Size of each host stream.
STREAM_BYTES = 200 * 1024 * 1024

STREAMS: dict[str, dict[str, object] | None] = {
    "quiet": None,
    "json-events": {"flood": STREAM_BYTES, "json": True},
    "non-json-lines": {"flood": STREAM_BYTES, "newlines": True},
    "one-line": {"flood": STREAM_BYTES},
}


def peak_rss(workdir: Path, name: str, stream: dict[str, object] | None) -> tuple[int, float]:
    """Run one trial whose host prints ``stream``; return the CLI's peak RSS (KiB) and time."""
    steps = [stream] if stream is not None else []
    project = make_project(
        workdir / name,
        scenarios=[
            scenario(
                "stream",
                prompt=actions(*steps, {"usage": 5}, {"write": "x.txt"}),
                checks=[{"type": "file-exists", "path": "x.txt"}],
            )
        ],
        eval_extra={"budget": {"trials": 1, "timeoutMs": 600_000}},
    )
    rss_file = workdir / f"{name}.rss"
    env = {**os.environ, "ATLANTE_TEST_RSS_FILE": str(rss_file), "TMPDIR": str(workdir)}
    started = time.monotonic()
    subprocess.run(
        [sys.executable, str(ENTRY), "run", str(project)],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return int(rss_file.read_text()), time.monotonic() - started


def main() -> None:
    """Measure and print peak memory for each stream."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as raw:
        workdir = Path(raw)
        results = {name: peak_rss(workdir, name, stream) for name, stream in STREAMS.items()}
    quiet_kib = results["quiet"][0]
    figures: dict[str, object] = {"quiet_peak_mib": round(quiet_kib / 1024, 1)}
    for name, (kib, seconds) in results.items():
        if name == "quiet":
            continue
        growth = kib - quiet_kib
        figures[name] = {
            "peak_mib": round(kib / 1024, 1),
            "growth_mib": round(growth / 1024, 1),
            "growth_per_stream": round(growth * 1024 / STREAM_BYTES, 3),
            "peak_vs_quiet": round(kib / quiet_kib, 2),
            "seconds": round(seconds, 1),
        }
    print(json.dumps({"stream_mib": STREAM_BYTES // (1024 * 1024), **figures}, indent=2))


if __name__ == "__main__":
    main()
