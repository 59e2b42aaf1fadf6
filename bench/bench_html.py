"""How large a 500-trial run's report.html is, and how fast it renders and opens.

Builds a run of 50 scenarios x 10 trials in a temporary run directory: every
trial has a diff of about 4 KB and a transcript of 60 entries (tool calls with
1 KB inputs and outputs, agent text, usage); failing trials (a third) have a
command check with 2,000 characters of output as evidence. Then it times
rendering ``report.html`` (:func:`atlante_eval.views.html.render_run_html`), reports its
size, and opens it in headless Chromium (Debian's ``/usr/bin/chromium``, through
Playwright) from ``file://``, timing navigation until the ``load`` event and a
full layout. Targets: at most a few MB, under 2 s in the browser.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from atlante_eval.report import (
    CheckResult,
    Meta,
    MetaConfig,
    RunReport,
    TrialResult,
    finalize,
    summarize,
)
from atlante_eval.views.html import render_run_html

#: Scenarios and trials per scenario of the generated run.
SCENARIOS, TRIALS = 50, 10
#: Timed repetitions (the median is reported).
REPETITIONS = 3
#: What "a few MB" and "under 2 s" mean here.
SIZE_BUDGET_BYTES = 5 * 1024 * 1024
BROWSER_BUDGET_SECONDS = 2.0
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _trial(index: int, scenario: int) -> TrialResult:
    failing = (index + scenario) % 3 == 0
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1,40 +1,40 @@\n" + "".join(
        f"-old line {n} of the handler\n+new line {n} of the handler = {n * index}\n"
        for n in range(40)
    )
    checks = [CheckResult(index=0, type="file-exists", verdict="pass", evidence={})]
    if failing:
        checks.append(
            CheckResult(
                index=1,
                type="command",
                verdict="fail",
                evidence={"run": ["pytest", "-q"], "exitCode": 1, "output": "E assert\n" * 200},
            )
        )
    return TrialResult(
        i=index,
        verdict="fail" if failing else "pass",
        duration_ms=30_000 + 997 * index + 113 * scenario,
        tokens=40_000 + 1_000 * index,
        cost=0.05 + index / 1000,
        checks=checks,
        diff=diff,
        changed_files=["app.py"],
        transcript=f"trials/s{scenario:02d}/{index}/transcript.jsonl",
    )


def _transcript(scenario: str, index: int) -> str:
    lines: list[dict[str, Any]] = [
        {"kind": "header", "schema": 1, "host": "opencode", "scenario": scenario, "trial": index}
    ]
    for n in range(20):
        lines.append({"kind": "text", "t": n * 1000, "text": f"Step {n}: reading the code. " * 8})
        lines.append(
            {
                "kind": "tool-call",
                "t": n * 1000 + 500,
                "id": f"c{n}",
                "name": "bash",
                "toolKind": "shell",
                "input": {"command": "pytest -q " + "tests/ " * 150},
                "output": "collected 40 items\n" * 55,
                "durationMs": 420,
            }
        )
        lines.append({"kind": "usage", "t": n * 1000 + 900, "tokens": 2_000 * (n + 1)})
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def build(run_dir: Path) -> RunReport:
    """Write the generated run's transcripts under ``run_dir`` and return its report."""
    scenarios = {}
    for s in range(SCENARIOS):
        name = f"s{s:02d}"
        trials = [_trial(i, s) for i in range(TRIALS)]
        for trial in trials:
            directory = run_dir / "trials" / name / str(trial.i)
            directory.mkdir(parents=True)
            (directory / "transcript.jsonl").write_text(_transcript(name, trial.i))
        scenarios[name] = summarize(trials, description=f"Generated scenario {s}")
    meta = Meta(
        atlante="bench",
        host="opencode",
        model="acme/model",
        model_version="model",
        config=MetaConfig(
            trials=TRIALS,
            timeout_ms=600_000,
            max_sessions=SCENARIOS * TRIALS,
            max_tokens=400_000,
            setup_timeout_ms=300_000,
            check_timeout_default_ms=120_000,
        ),
    )
    report = finalize(RunReport(run_id="2026-01-01T00-00-00-bnch", meta=meta, scenarios=scenarios))
    (run_dir / "report.json").write_text(report.to_json())
    return report


def _render(report: RunReport, run_dir: Path) -> tuple[float, bytes]:
    times, page = [], b""
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        page = render_run_html(report, run_dir=run_dir, links_from=run_dir)
        times.append(time.perf_counter() - started)
    return statistics.median(times), page


def _browser(file: Path) -> float | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).exists():
        return None
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for _ in range(REPETITIONS):
                page = browser.new_page()
                started = time.perf_counter()
                page.goto(file.as_uri(), wait_until="load")
                page.evaluate("document.body.getBoundingClientRect().height")
                times.append(time.perf_counter() - started)
                page.close()
        finally:
            browser.close()
    return statistics.median(times)


def main() -> None:
    """Build the run, render it, open it; print size and times against the targets."""
    with tempfile.TemporaryDirectory(prefix="atlante-bench-html-") as tmp:
        run_dir = Path(tmp)
        report = build(run_dir)
        json_size = (run_dir / "report.json").stat().st_size
        seconds, page = _render(report, run_dir)
        file = run_dir / "report.html"
        file.write_bytes(page)
        print(f"trials: {SCENARIOS * TRIALS} ({SCENARIOS} scenarios x {TRIALS})")
        print(f"report.json: {json_size / 1e6:.2f} MB")
        verdict = "ok" if len(page) <= SIZE_BUDGET_BYTES else "OVER"
        budget = SIZE_BUDGET_BYTES / 1e6
        print(f"report.html: {len(page) / 1e6:.2f} MB (budget {budget:.1f} MB: {verdict})")
        print(f"render (median of {REPETITIONS}): {seconds:.2f} s")
        opened = _browser(file)
        if opened is None:
            print("browser: skipped (no chromium or playwright)")
        else:
            verdict = "ok" if opened < BROWSER_BUDGET_SECONDS else "OVER"
            print(
                f"headless Chromium, file:// to load + layout (median of {REPETITIONS}): "
                f"{opened:.2f} s (budget {BROWSER_BUDGET_SECONDS:.1f} s: {verdict})"
            )


if __name__ == "__main__":
    main()
