"""The HTML pages without a browser: charts, escaping, caps, any report, the html command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from clikit import cli_env, report_dirs
from factory import make_project, scenario
from reports import counts, report, write
from standin import StandinHost, actions
from test_reports_io import REFERENCE_REPORT

from atlante_eval import CheckResult, RunReport, TrialResult, compare_reports, load_report, run_eval
from atlante_eval.report import summarize
from atlante_eval.views.html import render as render_module
from atlante_eval.views.html import render_compare_html, render_run_html
from atlante_eval.views.html.svg import (
    ForestRow,
    SeriesPoint,
    forest_plot,
    interval_bar,
    series_chart,
    strip_plot,
    usage_line,
)
from atlante_eval.views.html.trial import (
    PAGE_BUDGET_CHARS,
    PAGE_DIFF_CHARS,
    PAGE_ENTRIES,
    PAGE_TEXT_CHARS,
    TRIAL_MAX_CHARS,
    TRIAL_MIN_CHARS,
    allowances,
)

ENTRY = Path(__file__).with_name("standin_cli.py")
INJECT = '<script>window.__pwned=1</script><img src=x onerror="alert(1)">'


class Elements(HTMLParser):
    """Every start tag of a document with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def elements(page: bytes) -> Elements:
    parser = Elements()
    parser.feed(page.decode("utf-8"))
    return parser


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ENTRY), *args],
        capture_output=True,
        text=True,
        env=cli_env(cwd),
        cwd=cwd,
        timeout=120,
        check=False,
    )


# -- charts -------------------------------------------------------------------------------


def test_interval_bar_places_the_band_and_the_mark() -> None:
    """0-100% over 116 px between 2 px pads: 25%-75% is x 31 width 58, 50% is the mark at 58.5."""
    svg = str(interval_bar(0.5, 0.25, 0.75, width=120))
    assert '<rect class="band" x="31" y="3" width="58" height="8"/>' in svg
    assert '<rect class="mark" x="58.5"' in svg
    assert "<title>pass rate 50%, 95% interval 25% to 75%</title>" in svg
    clamped = str(interval_bar(1.4, -0.2, 1.2, width=120))
    assert '<rect class="band" x="2" y="3" width="116"' in clamped


def test_forest_plot_rows_escape_labels_and_put_zero_in_the_middle() -> None:
    svg = str(forest_plot([ForestRow("<b>x</b>", -0.5, -0.8, -0.2, css="c-regressed")], width=560))
    assert "&lt;b&gt;x&lt;/b&gt;" in svg
    assert "<b>" not in svg
    assert '<line class="zero" x1="358"' in svg  # 180 + (0 + 1) / 2 * (536 - 180)
    assert '<line class="ci" x1="215.6" y1="29" x2="322.4" y2="29"/>' in svg
    assert 'class="row c-regressed"' in svg
    assert "-50.0 points (-80.0 to -20.0)" in svg


def test_strip_plot_marks_the_nearest_rank_p95() -> None:
    svg = str(strip_plot([float(v) for v in range(1, 21)], maximum=20.0, unit="s", width=140))
    assert svg.count('class="dot"') == 20
    assert "p95 19 s" in svg
    assert "no" not in str(strip_plot([], maximum=0, unit="s"))


def test_series_chart_breaks_at_ungraded_runs() -> None:
    svg = str(
        series_chart(
            [SeriesPoint("a", 1.0, 0.7, 1.0), SeriesPoint("b", None), SeriesPoint("c", 0.0, 0, 0.3)]
        )
    )
    assert svg.count("<circle") == 2
    assert 'class="path"' not in svg  # no line across the ungraded run
    assert "b: not graded" in svg
    joined = str(series_chart([SeriesPoint("a", 1.0, 0.7, 1.0), SeriesPoint("b", 0.5, 0.2, 0.8)]))
    assert joined.count('class="path"') == 1


def test_usage_line_draws_cumulative_tokens() -> None:
    svg = str(usage_line([(1000, 50), (2000, 100)], width=220))
    assert 'points="3,37 110,20 217,3"' in svg
    assert "100 after 2.0 s" in svg
    assert "no token use recorded" in str(usage_line([]))


# -- escaping and caps ----------------------------------------------------------------------


def _hostile_run(tmp_path: Path) -> tuple[RunReport, Path]:
    """A report whose description, evidence, diff and transcript all carry markup."""
    checks = [
        CheckResult(index=0, type="command", verdict="fail", evidence={"output": INJECT * 3000})
    ]
    trial = TrialResult(
        i=0,
        verdict="fail",
        duration_ms=1000,
        checks=checks,
        diff="--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+" + INJECT + "\n" + "+y\n" * 20_000,
        error=INJECT,
    )
    result = summarize([trial], description=INJECT)
    hostile = report({"alpha": result})
    run_dir = write(tmp_path / "run", hostile)
    trial_dir = run_dir / "trials" / "alpha" / "0"
    trial_dir.mkdir(parents=True)
    lines: list[dict[str, Any]] = [
        {"kind": "header", "schema": 1, "host": "opencode", "scenario": "alpha", "trial": 0}
    ]
    for n in range(PAGE_ENTRIES * 3):
        lines.append(
            {
                "kind": "tool-call",
                "t": n,
                "id": f"c{n}",
                "name": "bash",
                "toolKind": "shell",
                "input": {"command": INJECT},
                "output": INJECT * 100,
            }
        )
    (trial_dir / "transcript.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return hostile, run_dir


def test_untrusted_text_is_escaped_everywhere(tmp_path: Path) -> None:
    """One script (ours), no img, no event-handler attribute, the markup present as text."""
    hostile, run_dir = _hostile_run(tmp_path)
    page = render_run_html(hostile, run_dir=run_dir, links_from=run_dir)
    found = elements(page)
    assert len(found.named("script")) == 1
    assert found.named("img") == []
    assert not [a for _, attrs in found.tags for a in attrs if a.startswith("on")]
    assert page.count(b"&lt;script&gt;window.__pwned=1&lt;/script&gt;") > 5


def test_the_escaping_test_sees_markup_when_autoescape_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without autoescaping the same report puts a script and an img into the page."""
    hostile, run_dir = _hostile_run(tmp_path)
    original = render_module._environment()
    monkeypatch.setattr(render_module, "_environment", lambda: original.overlay(autoescape=False))
    found = elements(render_run_html(hostile, run_dir=run_dir, links_from=run_dir))
    assert len(found.named("script")) > 1
    assert found.named("img") != []


def test_content_security_policy_allows_only_our_script(tmp_path: Path) -> None:
    """The CSP names no source but the page's own script hash: injected scripts cannot run."""
    page = render_run_html(report({"a": counts(1, 1)})).decode()
    found = elements(page.encode())
    [policy] = [
        m["content"]
        for m in found.named("meta")
        if m.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy is not None
    assert "default-src 'none'" in policy
    assert "script-src 'sha256-" in policy
    assert "unsafe-inline'; img" in policy  # styles inline only; no remote source anywhere
    assert "http" not in policy


def test_large_values_are_capped_and_linked(tmp_path: Path) -> None:
    """Evidence, diff and transcript are cut to the page caps, saying so, linking the files."""
    hostile, run_dir = _hostile_run(tmp_path)
    page = render_run_html(hostile, run_dir=run_dir, links_from=run_dir).decode()
    assert len(page) < 2_000_000
    shown = page.count('data-kind="tool-call"')
    assert 0 < shown < PAGE_ENTRIES  # cut by the trial's share of the page
    assert "more entries left out of this page: see transcript.jsonl" in page
    assert "left out" in page
    assert "more characters left out of this page" in page
    assert "more characters of the diff are in report.json" in page
    assert 'href="trials/alpha/0/transcript.jsonl"' in page
    assert len(INJECT) * 100 > PAGE_TEXT_CHARS
    assert len(hostile.scenarios["alpha"].trials[0].diff or "") > PAGE_DIFF_CHARS


def test_a_large_run_shares_the_page_budget_failing_trials_first() -> None:
    """Each trial's share shrinks with the run; a failing trial gets three times a pass's."""
    small = allowances([1, 3])
    assert small == [TRIAL_MAX_CHARS, TRIAL_MAX_CHARS]
    large = allowances([1] * 400 + [3] * 100)
    assert abs(large[0] * 3 - large[-1]) < 3
    assert sum(large) <= PAGE_BUDGET_CHARS
    assert allowances([1] * 100_000)[0] == TRIAL_MIN_CHARS


def test_planted_symlinks_and_fifos_in_trials_are_never_followed(tmp_path: Path) -> None:
    """A trial directory or transcript that is a symlink, or a FIFO, is not read into the page."""
    hostile, run_dir = _hostile_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "transcript.jsonl").write_text(
        '{"kind":"header","schema":1,"host":"x","scenario":"alpha","trial":0}\n'
        '{"kind":"text","t":1,"text":"SECRET-OUTSIDE"}\n'
    )
    trial_dir = run_dir / "trials" / "alpha" / "0"
    (trial_dir / "transcript.jsonl").unlink()
    (trial_dir / "transcript.jsonl").symlink_to(outside / "transcript.jsonl")
    page = render_run_html(hostile, run_dir=run_dir, links_from=run_dir).decode()
    assert "SECRET-OUTSIDE" not in page
    (trial_dir / "transcript.jsonl").unlink()
    os.mkfifo(trial_dir / "transcript.jsonl")  # reading it would block: it must not be opened
    assert "SECRET-OUTSIDE" not in render_run_html(hostile, run_dir=run_dir).decode()
    for path in (trial_dir / "transcript.jsonl", trial_dir):
        path.unlink() if path.is_fifo() else path.rmdir()
    trial_dir.symlink_to(outside, target_is_directory=True)
    page = render_run_html(hostile, run_dir=run_dir, links_from=run_dir).decode()
    assert "SECRET-OUTSIDE" not in page
    assert "no transcript recorded" in page
    (trial_dir).unlink()
    (outside / "transcript.jsonl").rename(outside / "moved")
    trial_dir.mkdir()
    (trial_dir / "transcript.jsonl").write_text((outside / "moved").read_text())
    assert "SECRET-OUTSIDE" in render_run_html(hostile, run_dir=run_dir).decode()  # the control


def test_links_from_elsewhere_are_relative_to_the_page(tmp_path: Path) -> None:
    hostile, run_dir = _hostile_run(tmp_path)
    (tmp_path / "site").mkdir()
    page = render_run_html(hostile, run_dir=run_dir, links_from=tmp_path / "site").decode()
    assert 'href="../run/trials/alpha/0/transcript.jsonl"' in page
    absolute = render_run_html(hostile, run_dir=run_dir).decode()
    assert f'href="{(run_dir / "trials/alpha/0/transcript.jsonl").as_uri()}"' in absolute


# -- any report -----------------------------------------------------------------------------


def test_reference_selftest_and_merged_reports_render(tmp_path: Path) -> None:
    """A reference report (no stats: computed from its trials), a selftest's and a merged one."""
    file = tmp_path / "reference.json"
    file.write_text(json.dumps(REFERENCE_REPORT))
    page = render_run_html(load_report(file)).decode()
    assert '<td class="rate" data-sort="1.0">100.0%</td>' in page
    assert "no graded" not in page
    selftest = report({"s": counts(1, 0)}, host="selftest")
    assert b"selftest" in render_run_html(selftest)
    merged = report({"s": counts(2, 1)}, shard=None, plan_digest="p" * 64)
    assert b'data-fact="harness"' in render_run_html(merged)


def test_comparison_sorts_regressions_first() -> None:
    base = report({"a": counts(10, 0), "b": counts(5, 5), "c": counts(0, 10)})
    head = report({"a": counts(10, 0), "b": counts(5, 5), "c": counts(10, 0)}, run_id="h")
    page = render_compare_html(compare_reports(report({"z": counts(10, 0)}), head)).decode()
    assert "only in BASE" in page
    page = render_compare_html(compare_reports(head, base)).decode()
    order = [m for m in ('data-name="a"', 'data-name="b"', 'data-name="c"') if m in page]
    assert sorted(order, key=page.index)[0] == 'data-name="c"'


# -- the commands ---------------------------------------------------------------------------


def test_html_command_writes_beside_the_report_and_never_replaces_a_foreign_file(
    tmp_path: Path,
) -> None:
    run_dir = write(tmp_path / "run", report({"a": counts(2, 1)}))
    result = cli("html", str(run_dir), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"html: {run_dir / 'report.html'}"
    assert b"atlante-eval" in (run_dir / "report.html").read_bytes()
    assert cli("html", str(run_dir / "report.json"), cwd=tmp_path).returncode == 0  # ours again
    (run_dir / "report.html").write_text("my own notes")
    refused = cli("html", str(run_dir), cwd=tmp_path)
    assert refused.returncode == 2
    assert "was not written by atlante-eval" in refused.stderr
    assert (run_dir / "report.html").read_text() == "my own notes"
    out = tmp_path / "elsewhere.html"
    assert cli("html", str(run_dir), "-o", str(out), cwd=tmp_path).returncode == 0
    assert out.read_bytes().startswith(b"<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        ([], 2, "pass either REPORT or --history DIR"),
        (["--history", "."], 2, "--history needs -o FILE"),
        (["--history", "nowhere", "-o", "h.html"], 2, "nowhere is not a directory"),
        (["--history", "empty", "-o", "h.html"], 2, "no run report found under"),
        (["missing-run"], 2, "report-unreadable"),
        (["run", "-o", "no/such/dir/x.html"], 2, "invalid-output-path"),
        (["--history", ".", "-o", "no/such/x.html"], 2, "invalid-output-path"),
    ],
)
def test_html_command_refuses_bad_input(
    tmp_path: Path, args: list[str], status: int, message: str
) -> None:
    write(tmp_path / "run", report({"a": counts(1, 0)}))
    (tmp_path / "empty").mkdir()
    result = cli("html", *args, cwd=tmp_path)
    assert result.returncode == status, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_history_leaves_out_selftests_and_warns_about_unreadable_reports(tmp_path: Path) -> None:
    base = tmp_path / "eval"
    write(base / "r1", report({"a": counts(3, 0)}, run_id="r1", started_at="2026-01-01T00:00:00Z"))
    write(base / "r2", report({"a": counts(0, 3)}, run_id="r2", started_at="2026-01-02T00:00:00Z"))
    write(base / "st", report({"a": counts(0, 3)}, run_id="st", host="selftest"))
    (base / "bad").mkdir()
    (base / "bad" / "report.json").write_text("{not json")
    out = tmp_path / "history.html"
    result = cli("html", "--history", str(base), "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning [report-unreadable]" in result.stderr
    assert result.stdout.strip() == f"html: {out} (2 runs)"
    page = out.read_text()
    assert 'data-run="r1"' in page
    assert 'data-run="r2"' in page
    assert 'data-run="st"' not in page


def test_compare_html_writes_the_page(tmp_path: Path) -> None:
    base = write(tmp_path / "b", report({"a": counts(9, 1)}))
    head = write(tmp_path / "h", report({"a": counts(1, 9)}, run_id="h"))
    out = tmp_path / "compare.html"
    result = cli("compare", str(base), str(head), "--html", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert 'data-verdict="regressed"' in out.read_text()
    missing = cli(
        "compare", str(base), str(head), "--html", str(tmp_path / "x/y.html"), cwd=tmp_path
    )
    assert missing.returncode == 2
    assert "error [invalid-output-path]: --html" in missing.stderr


@pytest.mark.anyio
async def test_run_writes_report_html_unless_asked_not_to(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("s", prompt=actions({"write": "x.txt", "content": "x"}))],
        eval_extra={"budget": {"trials": 1}},
    )
    await run_eval(project, host=StandinHost())
    [first] = report_dirs(project)
    assert (first / "report.html").is_file()
    await run_eval(project, host=StandinHost(), html=False)
    [second] = [d for d in report_dirs(project) if d != first]
    assert (second / "report.json").is_file()
    assert not (second / "report.html").exists()


@pytest.mark.anyio
async def test_a_run_stopped_part_way_still_writes_report_html(tmp_path: Path) -> None:
    """A run that stops on an error publishes a partial report, and its page with it."""
    from atlante_eval import EvalRunError, TrialFinished

    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("s", prompt=actions({"write": "x.txt", "content": "x"}))],
        eval_extra={"budget": {"trials": 2}},
    )

    def explode(event: object) -> None:
        if isinstance(event, TrialFinished):
            raise RuntimeError("progress sink failed")

    with pytest.raises(EvalRunError) as stopped:
        await run_eval(project, host=StandinHost(), jobs=1, on_event=explode)
    page = stopped.value.report_path.with_name("report.html")
    assert page.is_file()
    assert b"interrupted" in page.read_bytes()


def test_html_outputs_never_replace_special_files(tmp_path: Path) -> None:
    """-o and --html naming a FIFO are refused; the FIFO stays a FIFO."""
    run_dir = write(tmp_path / "run", report({"a": counts(2, 1)}))
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    refused = cli("html", str(run_dir), "-o", str(fifo), cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "error [invalid-output-path]: --output" in refused.stderr
    assert "is a FIFO; refusing to replace it" in refused.stderr
    assert fifo.is_fifo()
    other = write(tmp_path / "head", report({"a": counts(0, 3)}, run_id="h"))
    compared = cli("compare", str(run_dir), str(other), "--html", str(fifo), cwd=tmp_path)
    assert compared.returncode == 2, compared.stderr
    assert "error [invalid-output-path]: --html" in compared.stderr
    assert fifo.is_fifo()


def test_a_forged_report_html_is_moved_aside_and_the_real_page_published(tmp_path: Path) -> None:
    """An agent that plants report.html in its run directory does not get it published."""
    forger = actions(
        {"project_write": ".atlante/eval/{run_dir}/report.html", "content": "FORGED-PAGE"},
        {"write": "x.txt", "content": "x"},
    )
    project = make_project(
        tmp_path / "project",
        scenarios=[
            scenario("forger", prompt=forger, checks=[{"type": "file-exists", "path": "x.txt"}])
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    result = cli("run", str(project), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warning [eval-run-dir-tampered]" in result.stderr
    [run_dir] = report_dirs(project)
    page = (run_dir / "report.html").read_text()
    assert page != "FORGED-PAGE"
    assert page.startswith("<!DOCTYPE html>")
    # The forger's prompt (which names the forged text) is on the real page, escaped.
    assert page.count("FORGED-PAGE") == 1
    assert "&#34;content&#34;: &#34;FORGED-PAGE&#34;" in page
    assert '<meta name="generator" content="atlante-eval' in page
    assert (run_dir / "tampered-1" / "report.html").read_text() == "FORGED-PAGE"
