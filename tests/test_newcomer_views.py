"""Issue 24, part B: what a newcomer reads, each stumble reproduced through the command line.

Commands that need no host run the installed ``atlante-eval`` console script;
``run`` goes through ``tests/standin_cli.py`` (the same CLI with the stand-in host).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from adaptivekit import adaptive_project, baseline, chance_scenario
from browserkit import browser, open_page
from clikit import cleaned_up, report_dirs, start_cli
from factory import EXTENDED_SCENARIO_URI, make_project, scenario, write_text
from reports import config, meta, report, trials
from reports import write as write_report
from standin import actions

from atlante_eval import RunReport
from atlante_eval.report import finalize, summarize

__all__ = ["browser"]  # the fixture, re-exported for pytest

CONSOLE = Path(sys.executable).with_name("atlante-eval")

#: A task with a real test: fix ``calc.py`` so ``test_calc.py`` passes.
CALC_FIXTURE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": (
        "import unittest\nfrom calc import add\n\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    ),
}
FIXED = {"calc.py": "def add(a, b):\n    return a + b\n"}
#: Weakening the test instead of fixing the code.
EDIT_THE_TEST = {"test_calc.py": "import unittest\n"}
#: A file check and two behaviour checks (skill-used, tool-used).
SKILL_CHECKS: list[dict[str, Any]] = [
    {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
    {"type": "skill-used", "skill": "python-tests"},
    {"type": "tool-used", "kind": "shell", "inputMatches": "test_calc"},
]


def console(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``atlante-eval`` console script (no colour); never a traceback.

    A traceback of the engine starts a line; a check's own output (a test program's
    traceback) is printed indented under its check, so it does not count.
    """
    result = subprocess.run(
        [str(CONSOLE), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env if env is not None else {**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    engine_traceback = re.compile(r"^Traceback \(most recent call last\)", re.MULTILINE)
    assert not engine_traceback.search(result.stdout + result.stderr), result.stderr
    return result


def standin_run(tmp_path: Path, *args: str, name: str = "run") -> tuple[int, str, str]:
    """``run ARGS`` through the stand-in CLI, to the end: status, stdout, stderr."""
    with cleaned_up(start_cli(["run", *args], tmp_path, name=name)) as run:
        status = run.wait(timeout_s=300)
        assert "Traceback" not in run.stdout + run.stderr, run.stderr
        return status, run.stdout, run.stderr


def calc_project(root: Path, scenarios: list[dict[str, Any]]) -> Path:
    """A project whose fixture is the calc task."""
    project = make_project(root, scenarios=scenarios)
    for name, text in CALC_FIXTURE.items():
        write_text(project / "eval" / "fixtures" / "app" / name, text)
    return project


def solution(root: Path, name: str, files: dict[str, str], *under: str) -> Path:
    """Write ``solutions/NAME[/UNDER...]/files/``."""
    directory = root / "eval" / "scenarios" / "solutions" / name
    directory = directory.joinpath(*under)
    for relative, text in files.items():
        write_text(directory / "files" / relative, text)
    return directory


# --- item 14: the selftest table says what was and was not exercised ---------------------


def skill_project(root: Path) -> Path:
    """One scenario with a file check and two behaviour checks; its solutions carry no
    transcript, so the behaviour checks are not selftested."""
    project = calc_project(
        root,
        [scenario("use-skill", checks=SKILL_CHECKS, **{"$schema": EXTENDED_SCENARIO_URI})],
    )
    solution(project, "use-skill", FIXED)
    solution(project, "use-skill", EDIT_THE_TEST, "counter", "edit-the-test")
    return project


def test_selftest_table_says_what_was_and_was_not_exercised(tmp_path: Path) -> None:
    """Behaviour checks not selftested: the reference's cell counts the checks it proves and
    names the rest, instead of ``fail (0/3 checks fail)`` beside ``ok``."""
    root = skill_project(tmp_path / "p")
    result = console("selftest", str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [header, row] = result.stdout.splitlines()[:2]
    assert header.split() == [
        "SCENARIO",
        "NULL",
        "AGENT",
        "REFERENCE",
        "AGENT",
        "CHEATS",
        "SELFTEST",
    ]
    assert "fail (0/" not in row
    cells = [cell.strip() for cell in row.split("  ") if cell.strip()]
    assert cells == [
        "use-skill",
        "fail (3/3 checks fail)",
        "pass (1 check; 2 behaviour checks not selftested)",
        "1/1 caught",
        "ok (2 behaviour checks not selftested)",
    ]
    [run_dir] = report_dirs(root)
    analysis = json.loads((run_dir / "selftest.json").read_text())
    reference = analysis["scenarios"]["use-skill"]["referenceAgent"]
    assert reference["verdict"] == "fail"  # the trial did fail its unproven behaviour checks
    assert (reference["failedChecks"], reference["notSelftested"]) == ([], [1, 2])


# --- item 16: selftest progress names the counter-solution or mutant ---------------------


def test_selftest_progress_names_each_cheat(tmp_path: Path) -> None:
    """Each counter-solution's and mutant's progress line says which one it was."""
    project = calc_project(
        tmp_path / "p",
        [
            scenario(
                "fix-add",
                checks=[
                    {"type": "command", "run": ["python3", "test_calc.py"]},
                    {"type": "file-unchanged", "path": "test_calc.py"},
                ],
            )
        ],
    )
    solution(project, "fix-add", FIXED)
    solution(project, "fix-add", EDIT_THE_TEST, "counter", "edit-the-test")
    result = console("selftest", str(project), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert any(
        line.startswith("fix-add · counter agent (edit-the-test): fail (") for line in lines
    ), lines
    assert any(
        line.startswith("fix-add · mutant agent (edit-unchanged test_calc.py): fail (")
        for line in lines
    ), lines
    assert any(line.startswith("fix-add · null agent: fail (") for line in lines)
    assert any(line.startswith("fix-add · reference agent: pass (") for line in lines)


# --- item 10: a selftest report renders as selftest results -------------------------------


@pytest.mark.browser
def test_selftest_page_shows_agents_not_pass_rates(browser: Any, tmp_path: Path) -> None:
    """selftest writes selftest.html; ``html`` on its report draws scenarios x agents, each
    agent doing as it must, with the selftest's verdict, and no pass rates."""
    root = skill_project(tmp_path / "p")
    result = console("selftest", str(root), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [run_dir] = report_dirs(root)
    written = console("html", str(run_dir), cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    for file in (run_dir / "selftest.html", run_dir / "report.html"):
        page, recorder, context = open_page(browser, file)
        try:
            verdict = page.locator("#selftest-verdict")
            assert verdict.inner_text() == "selftest passed: 1 scenario sound"
            assert verdict.get_attribute("data-ok") == "true"
            row = page.locator('#selftest-table tr[data-scenario="use-skill"]')
            assert row.locator("td.null").inner_text() == "fails, as it must (fail)"
            assert row.locator("td.reference").inner_text() == (
                "passes, as it must (2 behaviour checks not selftested) (fail)"
            )
            assert row.locator("td.cheats").inner_text() == "edit-the-test: caught (fail)"
            assert (
                row.locator("td.verdict").inner_text() == "ok (2 behaviour checks not selftested)"
            )
            assert page.locator('a.outcome[data-good="false"]').count() == 0
            assert page.locator("#scenario-table, #verdict-counts").count() == 0
            assert "pass rate" not in page.locator("body").inner_text()
            page.locator('a.outcome[data-agent="counter"]').click()
            page.wait_for_function("document.getElementById('s-use-skill-t2').open")
            assert recorder.console_errors() == []
            assert recorder.errors == []
        finally:
            context.close()


@pytest.mark.browser
def test_selftest_page_marks_a_vacuous_scenario(browser: Any, tmp_path: Path) -> None:
    """A null agent that passes is what the page flags, in the selftest's own words."""
    project = calc_project(
        tmp_path / "p",
        [scenario("vacuous", checks=[{"type": "file-exists", "path": "calc.py"}])],
    )
    solution(project, "vacuous", FIXED)
    result = console("selftest", str(project), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [run_dir] = report_dirs(project)
    page, _recorder, context = open_page(browser, run_dir / "selftest.html")
    try:
        assert page.locator("#selftest-verdict").get_attribute("data-ok") == "false"
        assert page.locator("#selftest-verdict").inner_text() == (
            "selftest failed: 1 of 1 scenario cannot be trusted"
        )
        row = page.locator('#selftest-table tr[data-scenario="vacuous"]')
        assert row.locator("td.null").inner_text() == "passes: the scenario is vacuous (pass)"
        assert row.locator("td.null a").get_attribute("data-good") == "false"
        assert row.locator("td.verdict").inner_text() == "vacuous"
    finally:
        context.close()


# --- items 1 and 19: output preformatted with its log linked; prompt; binary files ------------

#: A command that prints 300 lines, then fails with an assertion at the very end.
LONG_FAILURE = (
    "for i in range(300):\n    print('line', i)\nraise AssertionError('add(2, 3) returned -1')"
)
#: An agent that writes calc.py and leaves its compiled (binary) form behind.
COMPILING_AGENT = actions(
    {"write": "calc.py", "content": "def add(a, b):\n    return a - b  # still wrong\n"},
    {"run": ["python3", "-c", "import py_compile; py_compile.compile('calc.py')"]},
)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in run whose command check fails at the end of a long output."""
    tmp_path = tmp_path_factory.mktemp("long")
    root = calc_project(
        tmp_path / "p",
        [
            scenario(
                "long",
                prompt=COMPILING_AGENT,
                checks=[{"type": "command", "run": ["python3", "-c", LONG_FAILURE]}],
            )
        ],
    )
    status, _out, err = standin_run(tmp_path, str(root), "--trials", "1")
    assert status == 1, err
    [run_dir] = report_dirs(root)
    return run_dir


def test_show_prints_the_prompt_and_names_binary_files(long_run: Path) -> None:
    """show RUN SCENARIO:I prints the prompt the agent received, and lists a compiled file as
    binary instead of a ``Binary files ... differ`` section in the diff."""
    report = json.loads((long_run / "report.json").read_text())
    assert report["scenarios"]["long"]["prompt"] == COMPILING_AGENT
    result = console("show", str(long_run), "long:0", cwd=long_run)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[lines.index("prompt:") + 1] == f"  {COMPILING_AGENT}"
    [compiled] = [line for line in lines if "__pycache__/" in line and "(binary, added)" in line]
    name = compiled.split()[0]
    assert name.startswith("__pycache__/calc.")
    assert name.endswith(".pyc")
    assert f"binary files (content not shown): {name}" in lines
    assert "Binary files" not in result.stdout
    assert "+    return a - b  # still wrong" in lines


@pytest.mark.browser
def test_page_shows_output_preformatted_and_links_its_log(browser: Any, long_run: Path) -> None:
    """The page prints the check's output as text with its line breaks (the end, where the
    assertion is), links check-0.log that holds all of it, shows the prompt and marks the
    compiled file as binary."""
    page, recorder, context = open_page(browser, long_run / "report.html")
    try:
        page.locator('#verdict-grid a.cell[href="#s-long-t0"]').click()
        page.wait_for_function("document.getElementById('s-long-t0').open")
        panel = page.locator("#s-long-t0")
        output = panel.locator('.evidence-field[data-field="output"]')
        text = output.locator("pre").inner_text()
        assert text.splitlines()[-1] == "AssertionError: add(2, 3) returned -1"
        assert "line 299\n" in text
        assert "\\n" not in text
        assert output.locator(".cut").is_visible()
        link = output.locator("a.output-log")
        assert link.inner_text() == "check-0.log"
        href = link.get_attribute("href")
        assert href == "trials/long/0/check-0.log"
        whole = (long_run / href).read_text()
        assert whole.startswith("line 0\n")
        assert whole.rstrip().endswith("AssertionError: add(2, 3) returned -1")
        evidence = panel.locator(".evidence").inner_text()
        assert '"output"' not in evidence
        assert "transcript.jsonl" not in evidence
        panel.locator("details.prompt > summary").click()
        assert panel.locator("details.prompt pre").inner_text() == COMPILING_AGENT
        binary = panel.locator(".changed-file:has(.binary)")
        assert binary.count() == 1
        assert "__pycache__/calc." in binary.inner_text()
        assert "(binary, added)" in binary.inner_text()
        assert "Binary files" not in panel.locator(".diff").inner_text()
        assert "still wrong" in panel.locator(".diff").inner_text()
        assert recorder.console_errors() == []
        assert recorder.errors == []
    finally:
        context.close()


# --- items 9 and 19: attempts on the page; skills / subagents apart from tool calls --------

LONG_SKILL = "a-skill-whose-name-runs-on-and-on-without-a-single-space-in-it-anywhere-at-all"


@pytest.mark.browser
def test_page_lists_attempts_and_keeps_tools_apart(browser: Any, tmp_path: Path) -> None:
    """A retried trial lists each attempt; the skills / subagents column holds only skills and
    subagents and wraps a long name inside its cell; tool calls have their own column."""
    attempts = [
        {"verdict": "infra-error", "duration_ms": 1200, "error": "host crashed: ECONNRESET"},
        {"verdict": "infra-error", "duration_ms": 800, "error": "host crashed again"},
    ]
    activity = {
        "skills": {LONG_SKILL: 1},
        "subagents": {"reviewer": 1},
        "tool_calls": {"total": 4, "by_kind": {"shell": 3, "read": 1}},
    }
    trial = trials(["pass"], attempts=attempts, activity=activity)
    run_dir = write_report(tmp_path / "run", report({"flaky": trial}))
    result = console("html", str(run_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page, recorder, context = open_page(browser, run_dir / "report.html")
    try:
        row = page.locator('#scenario-table tr[data-scenario="flaky"]')
        skills = row.locator("td.activity")
        assert skills.inner_text().splitlines() == [
            f"skills: {LONG_SKILL} \u00d71",
            "subagents: reviewer \u00d71",
        ]
        assert row.locator("td.tools").inner_text() == "read \u00d71, shell \u00d73"
        assert skills.evaluate("e => e.scrollWidth <= e.clientWidth")
        header = page.locator("#scenario-table thead th").all_inner_texts()
        assert header[-2:] == ["skills / subagents", "tool calls"]
        page.locator('#verdict-grid a.cell[href="#s-flaky-t0"]').click()
        page.wait_for_function("document.getElementById('s-flaky-t0').open")
        listed = page.locator("#s-flaky-t0 ol.attempts li").all_inner_texts()
        assert [" ".join(item.split()) for item in listed] == [
            "attempt 1/3: infra-error 1.2 s \u2014 host crashed: ECONNRESET",
            "attempt 2/3: infra-error 0.8 s \u2014 host crashed again",
            "attempt 3/3: pass 1.0 s (this result)",
        ]
        assert recorder.console_errors() == []
    finally:
        context.close()


# --- item 18: compare --html says where the page went; merge --out writes report.html ----


def test_compare_html_prints_where_it_wrote_the_page(tmp_path: Path) -> None:
    """compare --html FILE names FILE on stderr; stdout keeps the table, or JSON with --json."""
    base = write_report(tmp_path / "base", report({"s": ["pass"] * 5}))
    head = write_report(tmp_path / "head", report({"s": ["pass"] * 4 + ["fail"]}))
    table = console("compare", str(base), str(head), "--html", "page.html", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stderr.splitlines()[-1] == "html: page.html"
    assert "html:" not in table.stdout
    assert (tmp_path / "page.html").is_file()
    as_json = console(
        "compare", str(base), str(head), "--json", "--html", "other.html", cwd=tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["overall"]
    assert as_json.stderr.splitlines()[-1] == "html: other.html"


def _shards(root: Path) -> list[Path]:
    """Two shard reports of one plan: scenario ``s``'s trials 0 and 1, with its prompt."""
    written = []
    for index in (1, 2):
        result = summarize(trials(["pass" if index == 1 else "fail"], start=index - 1))
        result = result.model_copy(update={"prompt": "Fix calc.py."})
        shard = finalize(
            RunReport(
                run_id=f"2026-03-01T02-00-0{index}-000{index}",
                meta=meta(config=config(trials=2), plan_digest="d" * 64, shard=f"{index}/2"),
                scenarios={"s": result},
            )
        )
        written.append(write_report(root / f"shard{index}", shard))
    return written


@pytest.mark.browser
def test_merge_out_writes_report_html(browser: Any, tmp_path: Path) -> None:
    """merge --out publishes report.html beside the merged report.json and says so, as run
    does; the page shows the merged trials."""
    shards = _shards(tmp_path)
    result = console("merge", *map(str, shards), "--out", "merged", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [run_dir] = (tmp_path / "merged").iterdir()
    page_file = run_dir / "report.html"
    assert result.stdout.splitlines()[-1] == f"html {os.path.relpath(page_file, tmp_path)}"
    merged = json.loads((run_dir / "report.json").read_text())
    assert merged["scenarios"]["s"]["prompt"] == "Fix calc.py."
    quiet = console("merge", *map(str, shards), "--out", "again", "--json", cwd=tmp_path)
    [again] = (tmp_path / "again").iterdir()
    assert (again / "report.html").is_file()
    assert quiet.stderr.splitlines()[-1] == f"html: again/{again.name}/report.html"
    page, recorder, context = open_page(browser, page_file)
    try:
        assert page.locator("#run-id").inner_text() == merged["runId"]
        assert page.locator("#verdict-grid a.cell").count() == 2
        assert (
            page.locator('#scenario-table tr[data-scenario="s"] .graded')
            .inner_text()
            .startswith("1 / 2")
        )
        assert recorder.console_errors() == []
        assert recorder.errors == []
    finally:
        context.close()


# --- item 17: the adaptive summary never prints a negative saving ------------------------


def test_adaptive_summary_never_prints_a_negative_saving(tmp_path: Path) -> None:
    """A run that decides at its first look, later than a fixed count would have, says how
    many more trials it took instead of ``saving -2``."""
    project = adaptive_project(tmp_path / "p", [chance_scenario("coin", 0.0)], maxSessions=100)
    base = baseline(tmp_path / "base.json", {"coin": (20, 20)})
    status, out, err = standin_run(
        tmp_path,
        *(str(project), "--against", str(base), "--until-decided", "-j", "2"),
        *("--min-trials", "6", "--max-trials", "12"),
    )
    assert status == 1, err
    record = json.loads(next((project / ".atlante" / "eval").glob("*/report.json")).read_text())
    adaptive = record["adaptive"]
    assert (adaptive["trialsUsed"], adaptive["fixedTrials"]) == (6, 4)
    assert adaptive["saving"] == -2  # the record keeps the arithmetic
    assert "saving -" not in out
    assert (
        "trials used 6 · a fixed-count run reaching the same decisions: 4 (--trials 4) · "
        "2 more than that run (no saving)"
    ) in out.splitlines()


# --- item 11: verdict shapes that every font can show ------------------------------------


@pytest.mark.browser
def test_verdict_shapes_are_drawn_not_typed(browser: Any, tmp_path: Path) -> None:
    """Every verdict's shape on the page is inline SVG or plain ASCII/en dash text: no
    hourglass, check mark, cross or warning sign that a Debian font draws as an empty box."""
    verdicts = ["pass", "fail", "timeout", "budget-exceeded", "infra-error", "skipped-budget"]
    run_dir = write_report(tmp_path / "run", report({"all": verdicts}))
    result = console("html", str(run_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page, recorder, context = open_page(browser, run_dir / "report.html")
    try:
        text = page.locator("body").inner_text()
        for symbol in ("\u29d7", "\u231b", "\u2713", "\u2714", "\u2717", "\u2718", "\u26a0"):
            assert symbol not in text
        for verdict in ("pass", "fail", "timeout", "infra-error"):
            cell = page.locator(f'#verdict-grid a.cell[data-verdict="{verdict}"]')
            shape = cell.locator("svg.glyph")
            assert shape.count() == 1
            box = shape.bounding_box()
            assert box is not None
            assert box["width"] > 8
            assert box["height"] > 8
            assert cell.inner_text().strip() == ""  # nothing typed beside the drawing
        for verdict, typed in (("budget-exceeded", "$"), ("skipped-budget", "\u2013")):
            cell = page.locator(f'#verdict-grid a.cell[data-verdict="{verdict}"]')
            assert cell.locator("span[aria-hidden]").inner_text() == typed
        assert recorder.console_errors() == []
    finally:
        context.close()


# --- item 7: the gateway's state beside host, model and isolation -------------------------


def test_show_and_page_say_the_gateway_state(tmp_path: Path) -> None:
    """show RUN and the page's facts say ``gateway on (...)`` from meta.gateway, else ``off``."""
    on = write_report(
        tmp_path / "on",
        report({"s": ["pass"]}, gateway={"calls": 3, "refused": 1, "fallback_trials": 1}),
    )
    off = write_report(tmp_path / "off", report({"s": ["pass"]}, isolation="os"))
    for run_dir, expected in (
        (
            on,
            "isolation none · gateway on (3 model calls, 1 refused, 1 trial on the host's figures)",
        ),
        (off, "isolation os · gateway off"),
    ):
        shown = console("show", str(run_dir), cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        [setup] = [line for line in shown.stdout.splitlines() if line.startswith("host ")]
        assert setup.endswith(expected), setup
        assert console("html", str(run_dir), cwd=tmp_path).returncode == 0
        page = (run_dir / "report.html").read_text()
        gateway = expected.split("gateway ", 1)[1].replace("'", "&#39;")
        assert f'<dd data-fact="gateway">{gateway}</dd>' in page
