"""The arms section of report.html in real headless Chromium: the heat-map matrix matches
report.json, a cell leads to that arm's trials, and the uplift forest plot is drawn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browserkit import browser, open_page
from clikit import cleaned_up, console, report_dirs, start_cli
from factory import make_project, scenario

from atlante_eval.report import arm_names, arm_scenarios, load_report, statistics_of

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the fixture, re-exported for pytest

_NEEDS_AGENT = [{"type": "file-exists", "path": ".opencode/agents/reviewer.md"}]


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with a "bare" control and a "project" arm, and its page written by `html`."""
    root = make_project(
        tmp_path_factory.mktemp("arms-html") / "p",
        scenarios=[
            scenario("needs-agent", agent="reviewer", checks=_NEEDS_AGENT),
            scenario("plain"),
        ],
        eval_extra={
            "variants": [{"name": "bare", "harness": "none"}, {"name": "project"}],
            "budget": {"trials": 4, "maxSessions": 200},
            "gateway": "off",
        },
    )
    with cleaned_up(start_cli(["run", str(root)], root.parent)) as run:
        assert run.wait(timeout_s=180) == 1, run.stderr  # the bare control fails needs-agent
        [run_dir] = report_dirs(root)
    (run_dir / "report.html").unlink()
    done = console(["html", str(run_dir)])
    assert done.returncode == 0, done.stderr.decode()
    return run_dir / "report.html"


def test_the_matrix_cells_match_the_report(browser: Any, page_file: Path) -> None:
    """Each cell's passed/graded, rate and verdict are the report's; the forest has a row
    per non-control arm and scenario, and overall."""
    report = load_report(page_file.with_name("report.json"))
    page, recorder, context = open_page(browser, page_file)
    try:
        cells = page.eval_on_selector_all(
            "#arm-matrix td.heat[data-arm]",
            "cells => cells.map(c => [c.closest('tr').dataset.scenario, c.dataset.arm,"
            " c.dataset.passed, c.dataset.graded, c.dataset.verdict, c.innerText])",
        )
        expected = []
        assert report.uplift is not None
        for name in report.scenarios:
            for arm in arm_names(report):
                stats = statistics_of(arm_scenarios(report, arm)[name])
                found = report.uplift.arms.get(arm)
                verdict = found.scenarios[name].verdict if found is not None else ""
                rate = f"{stats.pass_rate_graded * 100:.0f}%"
                expected.append([name, arm, str(stats.passed), str(stats.graded), verdict, rate])
        assert [c[:5] for c in cells] == [e[:5] for e in expected]
        assert [c[5].split()[0] for c in cells] == [e[5] for e in expected]
        assert [c[3] for c in cells] == ["4", "4", "4", "4"]
        assert cells[1][2] == "4"  # needs-agent passes only with the harness
        assert cells[0][2] == "0"
        forest = page.locator("#arm-forest svg.forest")
        label = forest.get_attribute("aria-label") or ""
        assert label.startswith("difference arm - bare:")
        assert forest.locator("g.row").count() == 3
        classes = forest.locator("g.row").evaluate_all("rows => rows.map(r => r.className.baseVal)")
        uplift = report.uplift.arms["project"]
        assert uplift.overall is not None
        wanted = [uplift.scenarios["needs-agent"], uplift.scenarios["plain"], uplift.overall]
        assert classes == [f"row c-{row.verdict}" for row in wanted]
        assert recorder.foreign_requests(page_file.absolute().as_uri()) == []
        assert recorder.console_errors() == []
        assert recorder.errors == []
    finally:
        context.close()


def test_a_cell_leads_to_that_arms_trial(browser: Any, page_file: Path) -> None:
    """Clicking the project arm's needs-agent cell reaches its trials; a trial opens with
    its passing check and its own transcript (trials/needs-agent@project/<i>)."""
    page, recorder, context = open_page(browser, page_file)
    try:
        page.locator('#arm-matrix td.heat[data-arm="project"] a').first.click()
        page.wait_for_function("window.location.hash === '#s-needs-agent@project-trials'")
        block = page.locator('[id="s-needs-agent@project-trials"]')
        assert block.is_visible()
        panel = block.locator("details.trial").first
        assert panel.get_attribute("id") == "s-needs-agent@project-t0"
        panel.locator("summary").first.click()
        page.wait_for_function("document.getElementById('s-needs-agent@project-t0').open")
        check = panel.locator("tr.check")
        assert check.count() == 1
        assert "v-pass" in (check.get_attribute("class") or "")
        assert (
            panel.locator(
                '.files a[href="trials/needs-agent%40project/0/transcript.jsonl"]'
            ).count()
            == 1
        )
        control = page.locator('[id="s-needs-agent@bare-t0"]')
        assert control.get_attribute("data-verdict") == "fail"
        assert recorder.errors == []
    finally:
        context.close()


def test_the_page_lists_each_arms_trials(page_file: Path) -> None:
    """Every arm's every trial has its panel on the page, by its arm's row."""
    text = page_file.read_text(encoding="utf-8")
    report = json.loads(page_file.with_name("report.json").read_text(encoding="utf-8"))
    assert report["meta"]["variants"][0]["name"] == "bare"
    for name in ("needs-agent", "plain"):
        for arm in ("bare", "project"):
            for i in range(4):
                assert f'id="s-{name}@{arm}-t{i}"' in text
