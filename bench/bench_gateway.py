"""What the model gateway costs a model call, and a trial, measured in one run.

(a) **Per model call.** A client in its own thread (as a host is its own process)
    makes streaming Anthropic Messages calls to a local mock model, directly and
    through a gateway route bound to the same mock, alternating, CALLS of each.
    Each call is timed from the request to the last byte of the answer (a tool
    call with a 2 KiB input, as Claude Code's answers carry). The overhead is the
    median through the gateway minus the median direct. Target: under 5 ms.

(b) **Share of a trial.** The real ``claude`` CLI (``ATLANTE_EVAL_HOST_BIN_DIR``)
    runs trials against the mock (three model calls each), two runs of TRIALS
    trials per mode, the gateway on and off, alternating; the share is (a)'s
    overhead times the calls per trial over the median session time with the
    gateway on (the on/off medians are printed too, though a few milliseconds
    drown in their spread). Target: under 2%. Skipped without the real CLI.

Run from the repository root: ``python -m bench gateway``.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from atlante_eval import RunReport, run_eval
from atlante_eval.gateway import open_gateway
from bench.bench_engine import machine

_TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))  # test helpers are imported by bare name, as pytest does

from factory import make_project, scenario  # noqa: E402
from realhost.environment import real_host_environment  # noqa: E402
from realhost.mock_model import MockModelServer, Reply, RunBash, Script, WriteFile  # noqa: E402

#: Calls per path in (a).
CALLS = 200
#: Trials per run in (b) (two runs per mode, alternating).
TRIALS = 4
_KEY = "sk-ant-bench"
_INPUT = "x" * 2048


def _body() -> bytes:
    return json.dumps(
        {
            "model": "mock-model",
            "max_tokens": 1000,
            "stream": True,
            "tools": [{"name": "Write", "input_schema": {"properties": {"file_path": {}}}}],
            "messages": [{"role": "user", "content": "go [script:bench]"}],
        }
    ).encode()


class _Client:
    """A keep-alive HTTP/1.1 client to one base URL (a host keeps its connection too)."""

    def __init__(self, base: str, key: str) -> None:
        parts = urlsplit(base)
        self.path = parts.path.rstrip("/") + "/v1/messages"
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
        self.headers = {"content-type": "application/json", "x-api-key": key}

    def call(self, body: bytes) -> float:
        started = time.perf_counter()
        self.connection.request("POST", self.path, body, self.headers)
        response = response_of(self.connection)
        data = response.read()
        elapsed = time.perf_counter() - started
        assert response.status == 200, data[:200]
        assert b"message_stop" in data, data[:200]
        return elapsed


def response_of(connection: http.client.HTTPConnection) -> http.client.HTTPResponse:
    return connection.getresponse()


def per_call() -> tuple[float, float, float, float]:
    """Medians and p95s (ms) of direct and gateway calls, alternating."""
    script = Script("bench", [WriteFile("a.txt", _INPUT)] * 1)
    with MockModelServer([script]) as mock:

        async def main() -> tuple[list[float], list[float]]:
            async with open_gateway() as gateway:
                with gateway.route(max_tokens=10**12) as route:
                    route.bind(mock.anthropic_base_url)
                    direct = _Client(mock.anthropic_base_url, _KEY)
                    through = _Client(route.base_url, route.stand_in(_KEY))
                    body = _body()

                    def measure() -> tuple[list[float], list[float]]:
                        for client in (direct, through):  # warm both connections up
                            client.call(body)
                        a, b = [], []
                        for _ in range(CALLS):
                            a.append(direct.call(body))
                            b.append(through.call(body))
                        return a, b

                    return await anyio.to_thread.run_sync(measure)

        direct, through = anyio.run(main)
    ms = [statistics.median(direct) * 1000, statistics.median(through) * 1000]
    p95 = [sorted(direct)[int(CALLS * 0.95)] * 1000, sorted(through)[int(CALLS * 0.95)] * 1000]
    return ms[0], ms[1], p95[0], p95[1]


def per_trial(overhead_ms: float) -> None:
    """(b): real claude trials, the gateway on and off, alternating runs."""
    bin_dir = os.environ.get("ATLANTE_EVAL_HOST_BIN_DIR")
    if not bin_dir or not (Path(bin_dir) / "claude").exists():
        print("(b) skipped: set ATLANTE_EVAL_HOST_BIN_DIR to the real claude")
        return
    script = Script("pair", [WriteFile("hello.txt", "hello\n"), RunBash("true"), Reply("done")])
    durations: dict[str, list[int]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp, MockModelServer([script]) as mock:
        base = Path(tmp)
        marker = uuid.uuid4().hex
        with real_host_environment(
            "claude-code", mock, base, bin_dir=Path(bin_dir), marker=marker
        ) as pass_env:
            project = make_project(
                base / "p",
                host="claude-code",
                scenarios=[scenario("pair", prompt="go [script:pair]")],
                eval_extra={"model": "mock-model", "budget": {"trials": TRIALS}},
            )
            for repetition in range(2):
                for mode in ("on", "off"):
                    out = base / f"out-{mode}-{repetition}"

                    async def one(mode: str = mode, out: Path = out) -> RunReport:
                        return await run_eval(
                            project, jobs=1, out=out, pass_env=pass_env, gateway=mode, html=False
                        )

                    report = anyio.run(one)
                    trials = report.scenarios["pair"].trials
                    assert all(t.verdict == "pass" for t in trials), [t.error for t in trials]
                    durations[mode] += [t.duration_ms for t in trials]
    on, off = statistics.median(durations["on"]), statistics.median(durations["off"])
    share = 3 * overhead_ms / on
    count = len(durations["on"])
    print(f"(b) claude trial session, median of {count}: on {on:.0f} ms, off {off:.0f} ms")
    print(f"    3 calls x {overhead_ms:.2f} ms = {share:.2%} of the trial (target < 2%)")


def main() -> None:
    """Print (a) and (b)."""
    print(machine())
    direct, through, direct95, through95 = per_call()
    overhead = through - direct
    print(
        f"(a) per call, median of {CALLS}: direct {direct:.2f} ms, through the gateway "
        f"{through:.2f} ms: +{overhead:.2f} ms (target < 5 ms); p95 {direct95:.2f} / "
        f"{through95:.2f} ms"
    )
    per_trial(overhead)
