"""The HTML pages in real headless Chromium: a stand-in run's report.html and a comparison.

The run is real (the CLI with the stand-in host); every number the page shows is
checked against report.json / ``compare --json``; clicking a failing trial opens
its checks and transcript; the pages make no network request, log no console
error, and show injected HTML and script as text (no script ran, no dialog).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from browserkit import Recorder, browser, open_page
from clikit import cleaned_up, cli_env, report_dirs, start_cli
from factory import make_project, scenario
from reports import counts, report, write
from standin import actions

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the fixture, re-exported for pytest

ENTRY = Path(__file__).with_name("standin_cli.py")
#: Injected into a description, a subagent prompt, a tool output, agent text, a diff and evidence.
INJECT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2;alert(1)">'
#: The part of INJECT that survives JSON quoting unchanged.
SCRIPT = "<script>window.__pwned=1</script><img src=x onerror="
PRINT_INJECT = [sys.executable, "-c", f"print({INJECT!r}); raise SystemExit(1)"]


def tool(call: str, name: str, arguments: dict[str, Any], output: str) -> dict[str, Any]:
    """An OpenCode ``tool_use`` event for the stand-in to print."""
    state = {
        "status": "completed",
        "input": arguments,
        "output": output,
        "time": {"start": 1000, "end": 1009},
    }
    return {"event": {"type": "tool_use", "part": {"tool": name, "callID": call, "state": state}}}


INJECT_ACTIONS = actions(
    tool("c1", "task", {"prompt": INJECT, "subagent_type": "reviewer"}, "reviewed"),
    tool("c2", "bash", {"command": "ls"}, INJECT),
    {"event": {"type": "text", "part": {"text": INJECT}}},
    {"write": "page.html", "content": INJECT + "\n"},
    {"usage": 300, "cost": 0.02},
)
GOOD_ACTIONS = actions({"write": "x.txt", "content": "done\n"}, {"usage": 120, "cost": 0.01})


def percent(value: float) -> str:
    """A rate as the pages print it."""
    return f"{value * 100:.1f}%"


def interval(pair: list[float]) -> str:
    """An interval as the pages print it."""
    return f"[{percent(pair[0])}, {percent(pair[1])}]"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished stand-in run: inject (fails its command check), good (passes), broken."""
    tmp_path = tmp_path_factory.mktemp("html")
    root = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "inject",
                prompt=INJECT_ACTIONS,
                description=INJECT,
                checks=[
                    {"type": "file-exists", "path": "page.html"},
                    {"type": "command", "run": PRINT_INJECT},
                ],
            ),
            scenario(
                "good", prompt=GOOD_ACTIONS, checks=[{"type": "file-exists", "path": "x.txt"}]
            ),
            scenario("broken", prompt=actions({"stderr": "invalid API key"}, {"exit": 3})),
        ],
        eval_extra={"budget": {"trials": 3}},
    )
    with cleaned_up(start_cli(["run", str(root), "--jobs", "2"], tmp_path)) as run:
        assert run.wait(timeout_s=180) == 1, run.stderr
        [directory] = report_dirs(root)
        assert run.stdout.splitlines()[-1].split() == [
            "html",
            os.path.relpath(directory / "report.html"),
        ]
    return directory


def _no_trouble(recorder: Recorder, page: Any, file: Path) -> None:
    assert recorder.foreign_requests(file.absolute().as_uri()) == []
    assert recorder.console_errors() == []
    assert recorder.errors == []
    assert recorder.dialogs == []
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("script").count() == 1
    assert page.locator("img").count() == 0


def test_run_page_numbers_match_the_report(browser: Any, run_dir: Path, tmp_path: Path) -> None:
    """Rates, intervals, graded counts and verdict counts on screen equal report.json's."""
    data = json.loads((run_dir / "report.json").read_text())
    file = run_dir / "report.html"
    page, recorder, context = open_page(browser, file)
    try:
        for name, result in data["scenarios"].items():
            row = page.locator(f'#scenario-table tr[data-scenario="{name}"]')
            stats = result["stats"]
            if stats["graded"]:
                assert row.locator(".rate").inner_text() == percent(stats["passRateGraded"])
                assert row.locator(".interval-text").inner_text() == interval(stats["wilson95"])
            else:
                assert row.locator(".rate").inner_text() == "n/a"
            graded = row.locator(".graded").inner_text().splitlines()[0]
            assert graded == f"{stats['passed']} / {stats['graded']}"
            assert row.locator(".stability").inner_text() == (stats.get("stability") or "n/a")
            mean, p95 = result["meanDurationMs"], result["spread"]["durationP95Ms"]
            duration = row.locator(".duration").inner_text().splitlines()[0]
            assert duration == f"{mean / 1000:.1f} s / {p95 / 1000:.1f} s"
            executed = [t for t in result["trials"] if t["verdict"] != "skipped-budget"]
            assert row.locator(".duration svg rect.dot").count() == len(executed)
        for verdict, count in data["meta"]["totals"]["verdicts"].items():
            shown = page.locator(f'#verdict-counts [data-count="{verdict}"] b').inner_text()
            assert shown == str(count)
        cells = page.locator("#verdict-grid a.cell")
        assert cells.count() == sum(len(r["trials"]) for r in data["scenarios"].values())
        activity = data["scenarios"]["inject"]["activity"]
        shown = page.locator('#scenario-table tr[data-scenario="inject"] .activity').inner_text()
        for name, count in activity["subagents"].items():
            assert f"subagents: {name} \u00d7{count}" in shown
        tools = page.locator('#scenario-table tr[data-scenario="inject"] td.tools').inner_text()
        for kind, count in activity["toolCalls"]["byKind"].items():
            assert f"{kind} \u00d7{count}" in tools
            assert f"{kind} \u00d7" not in shown  # tools have their own column
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        _no_trouble(recorder, page, file)
    finally:
        context.close()


def test_clicking_a_failing_trial_shows_its_check_and_transcript(
    browser: Any, run_dir: Path, tmp_path: Path
) -> None:
    """The grid cell of a failing trial opens its panel: the failing check and the timeline."""
    file = run_dir / "report.html"
    page, recorder, context = open_page(browser, file)
    try:
        panel = page.locator("#s-inject-t0")
        assert panel.get_attribute("open") is None
        page.locator('#verdict-grid a.cell[href="#s-inject-t0"]').click()
        page.wait_for_function("document.getElementById('s-inject-t0').open")
        failing = panel.locator("tr.check.v-fail")
        assert failing.count() == 1
        assert failing.locator("td.mono").inner_text() == "command"
        assert failing.is_visible()
        calls = panel.locator('.timeline li[data-kind="tool-call"]')
        assert calls.count() == 2
        assert calls.first.is_visible()
        calls.nth(1).locator("summary").click()
        output = calls.nth(1).locator('[data-field="output"] pre')
        assert output.inner_text() == INJECT
        assert panel.locator('.timeline li[data-kind="subagent"]').count() == 1
        assert panel.locator('.files a[href="trials/inject/0/transcript.jsonl"]').count() == 1
        panel.screenshot(path=str(tmp_path / "trial.png"))
        _no_trouble(recorder, page, file)
    finally:
        context.close()


def test_injected_markup_renders_as_text(browser: Any, run_dir: Path) -> None:
    """Description, subagent prompt, tool output, agent text, diff and evidence show the text."""
    file = run_dir / "report.html"
    page, recorder, context = open_page(browser, file)
    try:
        page.locator("#expand-all").click()
        description = page.locator('#scenario-table tr[data-scenario="inject"] .description')
        assert description.inner_text() == INJECT
        panel = page.locator("#s-inject-t1")
        for details in panel.locator("details").all():
            details.evaluate("node => { node.open = true; }")
        texts = [pre.inner_text() for pre in panel.locator("pre").all()]
        assert any(SCRIPT in text and '"prompt"' in text for text in texts)  # the prompt
        assert INJECT in texts  # the tool output and the agent's text
        assert any(SCRIPT in text and '"output"' in text for text in texts)  # the evidence
        assert INJECT in panel.locator(".diff").inner_text()  # the diff
        _no_trouble(recorder, page, file)
    finally:
        context.close()


def test_run_page_reads_without_javascript(browser: Any, run_dir: Path) -> None:
    """With JavaScript off the numbers, the grid and the trial panels are all there."""
    data = json.loads((run_dir / "report.json").read_text())
    file = run_dir / "report.html"
    page, recorder, context = open_page(browser, file, javascript=False)
    try:
        good = data["scenarios"]["good"]["stats"]
        row = page.locator('#scenario-table tr[data-scenario="good"]')
        assert row.locator(".rate").inner_text() == percent(good["passRateGraded"])
        assert page.locator("details.trial").count() == 9
        page.locator("#s-inject-t2 > summary").click()
        assert page.locator("#s-inject-t2 tr.check.v-fail").is_visible()
        assert recorder.foreign_requests(file.absolute().as_uri()) == []
    finally:
        context.close()


def test_comparison_page_numbers_match_compare_json(
    browser: Any, run_dir: Path, tmp_path: Path
) -> None:
    """compare --html: rates, intervals, differences, verdicts equal --json; regressions first."""
    base = write(
        tmp_path / "base",
        report({"good": counts(2, 8), "inject": counts(10, 0)}, run_id="2026-01-01T00-00-00-base"),
    )
    page_file = tmp_path / "compare.html"
    result = subprocess.run(
        [
            sys.executable,
            str(ENTRY),
            "compare",
            str(base),
            str(run_dir),
            "--html",
            str(page_file),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    page, recorder, context = open_page(browser, page_file)
    try:
        rows = page.locator("#compare-table tbody tr.scenario")
        assert rows.first.get_attribute("data-name") == "inject"
        assert rows.first.locator("[data-verdict]").get_attribute("data-verdict") == "regressed"
        for name, c in data["scenarios"].items():
            row = page.locator(f'#compare-table tr[data-name="{name}"]')
            assert row.locator("[data-verdict]").get_attribute("data-verdict") == c["verdict"]
            for side in ("base", "head"):
                cell = row.locator(f".{side}")
                assert cell.locator(".rate").inner_text() == percent(c[side]["passRate"])
                assert cell.locator(".interval-text").inner_text() == interval(c[side]["interval"])
            assert row.locator(".diff-value").inner_text() == f"{c['difference'] * 100:+.1f}"
            low, high = c["differenceInterval"]
            assert row.locator(".diff-interval").inner_text() == (
                f"[{low * 100:+.1f}, {high * 100:+.1f}]"
            )
            needed = c["trialsNeeded"]
            assert row.locator(".needed").inner_text() == ("" if needed is None else str(needed))
        assert page.locator("#warnings li").count() == len(data["warnings"])
        assert page.locator("#forest svg g.row").count() == len(data["scenarios"]) + 1
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
        _no_trouble(recorder, page, page_file)
    finally:
        context.close()


def test_history_page_lists_runs_and_regressions(browser: Any, tmp_path: Path) -> None:
    """html --history: two runs oldest first, the regression between them, no selftest."""
    base = tmp_path / "eval"
    write(
        base / "2026-01-01T00-00-00-aaaa",
        report(
            {"alpha": counts(10, 0)},
            run_id="2026-01-01T00-00-00-aaaa",
            started_at="2026-01-01T00:00:00.000Z",
        ),
    )
    write(
        base / "2026-01-02T00-00-00-bbbb",
        report(
            {"alpha": counts(1, 9)},
            run_id="2026-01-02T00-00-00-bbbb",
            started_at="2026-01-02T00:00:00.000Z",
        ),
    )
    write(
        base / "2026-01-03T00-00-00-cccc",
        report(
            {"alpha": counts(0, 10)},
            run_id="2026-01-03T00-00-00-cccc",
            host="selftest",
            started_at="2026-01-03T00:00:00.000Z",
        ),
    )
    out = tmp_path / "history.html"
    result = subprocess.run(
        [sys.executable, str(ENTRY), "html", "--history", str(base), "-o", str(out)],
        capture_output=True,
        text=True,
        env=cli_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    page, recorder, context = open_page(browser, out)
    try:
        runs = page.locator("#run-table tbody tr")
        assert [runs.nth(i).get_attribute("data-run") for i in range(runs.count())] == [
            "2026-01-01T00-00-00-aaaa",
            "2026-01-02T00-00-00-bbbb",
        ]
        assert runs.nth(1).locator(".regressions").inner_text().split() == ["▼", "alpha"]
        assert runs.nth(0).locator(".regressions").inner_text() == "none"
        cells = page.locator('.history-scenario[data-scenario="alpha"] [data-present="true"]')
        assert [cells.nth(i).inner_text().splitlines()[0] for i in range(2)] == [
            "100.0%",
            "10.0% ▼ regressed",
        ]
        _no_trouble(recorder, page, out)
    finally:
        context.close()


def test_the_checks_see_a_page_that_misbehaves(browser: Any, tmp_path: Path) -> None:
    """The none case: a page that loads a file, runs injected script and errs is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><p>x</p>"
        '<img src="other.png"><script>window.__pwned = 1; missingFunction();</script>'
        "</body></html>"
    )
    page, recorder, context = open_page(browser, bad)
    try:
        assert recorder.foreign_requests(bad.absolute().as_uri()) == [
            (tmp_path / "other.png").absolute().as_uri()
        ]
        assert page.evaluate("typeof window.__pwned") == "number"
        assert recorder.errors
        assert page.locator("img").count() == 1
    finally:
        context.close()


def test_filtering_sorting_and_expanding(browser: Any, run_dir: Path) -> None:
    """The script filters scenarios by name and by failing, sorts a column, expands all."""
    file = run_dir / "report.html"
    page, recorder, context = open_page(browser, file)
    try:
        rows = page.locator("#scenario-table tbody tr")
        visible = "#scenario-table tbody tr:not(.hidden)"
        assert page.locator(visible).count() == 3
        page.locator("#filter").fill("goo")
        assert [r.get_attribute("data-scenario") for r in page.locator(visible).all()] == ["good"]
        assert page.locator("#s-good-trials").is_visible()
        assert not page.locator("#s-inject-trials").is_visible()
        page.locator("#filter").fill("")
        page.locator("#only-failing").check()
        names = {r.get_attribute("data-scenario") for r in page.locator(visible).all()}
        assert names == {"inject", "broken"}
        page.locator("#only-failing").uncheck()
        header = page.locator("#scenario-table thead th").nth(1)
        header.click()
        ascending = [r.get_attribute("data-scenario") for r in rows.all()]
        assert ascending[-1] == "good"  # 100% last
        assert header.get_attribute("aria-sort") == "ascending"
        header.click()
        assert rows.first.get_attribute("data-scenario") == "good"
        page.locator("#expand-all").click()
        assert page.locator("details.trial:not([open])").count() == 0
        page.locator("#collapse-all").click()
        assert page.locator("details.trial[open]").count() == 0
        assert recorder.console_errors() == []
        assert recorder.errors == []
    finally:
        context.close()
