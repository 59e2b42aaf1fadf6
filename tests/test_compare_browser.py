"""The comparison page's "why" section in real headless Chromium, against ``compare --json``.

Two stand-in runs (HEAD drops a skill, runs more shell commands, and loads a skill
whose name is injected HTML); the page written by ``compare --html`` must show the
same deltas as ``--json``, the aligned paths with the divergence marked, working
links to example trials' transcripts, and run no injected script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from browserkit import browser, open_page
from clikit import cli_env
from deltaskit import per_trial, run_scenario_cli, session, shell, skill, write

pytestmark = pytest.mark.browser
__all__ = ["browser"]  # the fixture, re-exported for pytest

ENTRY = Path(__file__).with_name("standin_cli.py")
INJECT = '<img src=x onerror="window.__pwned=1">'
CHECKS = [{"type": "file-exists", "path": "out.txt"}, {"type": "skill-used", "skill": "api"}]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """``compare --html`` and ``--json`` of a BASE and a HEAD that changed behaviour."""
    tmp = tmp_path_factory.mktemp("compare-why")
    base_prompt = session("opencode", skill("api"), shell("ls"), write("out.txt"))
    head_prompt = per_trial(
        "opencode",
        {range(4): [skill(INJECT), shell("ls"), shell("ls"), shell("ls"), write("out.txt")]},
    )
    base = run_scenario_cli(tmp / "base", base_prompt, checks=CHECKS, trials=4)
    head = run_scenario_cli(tmp / "head", head_prompt, checks=CHECKS, trials=4)
    page_file = tmp / "site" / "compare.html"
    page_file.parent.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            str(ENTRY),
            "compare",
            str(base),
            str(head),
            "--html",
            str(page_file),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=cli_env(tmp),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return page_file, json.loads(done.stdout)


def test_the_why_section_shows_what_compare_json_says(
    browser: Any, pages: tuple[Path, dict[str, Any]]
) -> None:
    """Cause, usage rows in rank order, checks, aligned paths and divergence match --json."""
    page_file, data = pages
    s = data["behaviour"]["scenarios"]["s"]
    page, recorder, context = open_page(browser, page_file)
    try:
        article = page.locator('#behaviour article[data-scenario="s"]')
        assert article.count() == 1
        assert article.get_attribute("data-verdict") == "regressed"
        cause = article.locator("[data-cause]").inner_text()
        assert cause == f"probable cause (an association, not proof): {s['probableCause']}"
        usage = article.locator('table[data-table="usage"] tbody tr')
        assert usage.evaluate_all("rows => rows.map(r => r.dataset.name)") == [
            u["name"] for u in s["usage"]
        ]
        assert article.locator("tr.significant").count() == sum(
            u["significant"] for u in s["usage"]
        )
        checks = article.locator('table[data-table="checks"] tbody tr')
        assert checks.evaluate_all("rows => rows.map(r => r.dataset.change)") == [
            c["change"] for c in s["checks"]
        ]
        rows = article.locator('table[data-table="paths"] tbody tr')
        assert rows.evaluate_all("rows => rows.map(r => r.dataset.op)") == [
            r["op"] for r in s["paths"]["alignment"]
        ]
        divergence = s["paths"]["firstDivergence"]
        marked = rows.nth(divergence)
        assert marked.get_attribute("data-divergence") is not None
        assert marked.locator("td.step").first.inner_text() == "skill api"
        assert marked.locator("td.step").last.inner_text() == f"skill {INJECT}"
        assert article.locator("[data-divergence]").count() == 1
        page.screenshot(path=str(page_file.with_suffix(".png")), full_page=True)
        assert recorder.errors == []
        assert recorder.dialogs == []
        assert recorder.console_errors() == []
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("img").count() == 0
    finally:
        context.close()


def test_example_links_open_each_sides_transcripts(
    browser: Any, pages: tuple[Path, dict[str, Any]]
) -> None:
    """Links are relative to the page and lead to the example trials' transcript files."""
    page_file, data = pages
    behaviour = data["behaviour"]
    paths = behaviour["scenarios"]["s"]["paths"]
    page, recorder, context = open_page(browser, page_file)
    try:
        for side in ("base", "head"):
            links = page.locator(f'#behaviour p.examples[data-side="{side}"] a')
            expected = [
                Path(behaviour[f"{side}Dir"]) / e["transcript"] for e in paths[side]["examples"]
            ]
            assert links.count() == len(expected)
            for index, target in enumerate(expected):
                link = links.nth(index)
                assert not str(link.get_attribute("href")).startswith("file:")
                resolved = Path(unquote(urlparse(link.evaluate("a => a.href")).path))
                assert resolved == target
                assert resolved.is_file()
        page.locator('#compare-table tr[data-name="s"] a.why-link').click()
        assert page.evaluate("window.location.hash") == "#why-0"
        page.fill("#filter", "nothing-matches")
        assert page.locator('#behaviour article[data-scenario="s"]').is_hidden()
        assert recorder.foreign_requests(page_file.absolute().as_uri()) == []
    finally:
        context.close()


def test_the_section_reads_without_javascript(
    browser: Any, pages: tuple[Path, dict[str, Any]]
) -> None:
    """With scripts off the cause and the aligned paths are all there."""
    page_file, data = pages
    page, _, context = open_page(browser, page_file, javascript=False)
    try:
        rows = page.locator('#behaviour table[data-table="paths"] tbody tr')
        assert rows.count() == len(data["behaviour"]["scenarios"]["s"]["paths"]["alignment"])
        assert page.locator("#behaviour [data-cause]").is_visible()
    finally:
        context.close()
