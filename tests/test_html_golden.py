"""Golden structure of the pages: the stable ids, classes and data attributes others rely on.

The outline lists every element that has an id, a class or a data- attribute, indented
by depth, with timings, versions and hashes masked. ATLANTE_UPDATE_GOLDEN=1 rewrites it.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

from reports import counts, report, trials, write

from atlante_eval import (
    BehaviourDeltas,
    CheckResult,
    TranscriptEntry,
    TrialResult,
    TrialSet,
    compare_reports,
    compare_trial_sets,
)
from atlante_eval.report import summarize
from atlante_eval.transcript import HeaderEntry, SkillEntry, ToolCallEntry
from atlante_eval.views.html import render_compare_html, render_history_html, render_run_html
from atlante_eval.views.html.history import LoadedReport

GOLDEN = Path(__file__).with_name("golden")
_VOID = {"meta", "link", "br", "img", "input", "hr", "rect", "line", "circle", "polyline"}
_KEEP = ("id", "class", "data-")


class Outline(HTMLParser):
    """Elements with an id, class or data- attribute, indented by depth."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.lines: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kept = [f"{k}={v}" for k, v in attrs if k.startswith(_KEEP)]
        if kept:
            self.lines.append("  " * self.depth + " ".join([tag, *kept]))
        if tag not in _VOID:
            self.depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        kept = [f"{k}={v}" for k, v in attrs if k.startswith(_KEEP)]
        if kept:
            self.lines.append("  " * self.depth + " ".join([tag, *kept]))

    def handle_endtag(self, tag: str) -> None:
        if tag not in _VOID:
            self.depth -= 1


def outline(page: bytes) -> str:
    parser = Outline()
    parser.feed(page.decode("utf-8"))
    text = "\n".join(parser.lines) + "\n"
    text = re.sub(r"data-sort=[\d.e-]+", "data-sort=<n>", text)
    return re.sub(r"sha256-[A-Za-z0-9+/=]+", "sha256-<hash>", text)


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ATLANTE_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def _run_dir(tmp_path: Path) -> Path:
    failing = TrialResult(
        i=1,
        verdict="fail",
        duration_ms=2500,
        tokens=900,
        cost=0.01,
        checks=[
            CheckResult(index=0, type="file-exists", verdict="pass", evidence={}),
            CheckResult(
                index=1,
                type="file-contains",
                verdict="fail",
                evidence={"path": "x.txt", "pattern": "nope"},
            ),
        ],
        diff="--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-old\n+new\n",
        changed_files=["x.txt"],
        transcript="trials/alpha/1/transcript.jsonl",
    )
    passing = trials(["pass"], tokens=800, cost=0.01)[0]
    built = report(
        {
            "alpha": summarize([passing, failing], description="Write x.txt"),
            "beta": counts(0, 0, infra_error=2),
        }
    )
    run_dir = write(tmp_path / "run", built)
    entries = [
        {"kind": "header", "schema": 1, "host": "opencode", "scenario": "alpha", "trial": 1},
        {"kind": "session-start", "t": 1, "host": "opencode", "model": "m", "tools": ["bash"]},
        {"kind": "text", "t": 10, "text": "working"},
        {
            "kind": "tool-call",
            "t": 20,
            "id": "c1",
            "name": "task",
            "toolKind": "subagent",
            "input": {"prompt": "review"},
            "output": "ok",
        },
        {"kind": "subagent", "t": 21, "name": "reviewer", "callId": "c1"},
        {
            "kind": "tool-call",
            "t": 30,
            "id": "c2",
            "name": "bash",
            "toolKind": "shell",
            "input": {"command": "ls"},
            "error": "denied",
            "status": "denied",
            "parent": "c1",
        },
        {"kind": "skill", "t": 40, "name": "tests"},
        {"kind": "usage", "t": 50, "tokens": 900, "costUsd": 0.01},
        {"kind": "error", "t": 60, "message": "rate limited", "status": 429},
        {"kind": "result", "t": 70, "status": "success", "turns": 2},
        {"kind": "mystery", "t": 80},
        {"kind": "truncated", "t": 90, "reason": "cap", "dropped": 3, "unit": "entries"},
    ]
    trial_dir = run_dir / "trials" / "alpha" / "1"
    trial_dir.mkdir(parents=True)
    (trial_dir / "transcript.jsonl").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return run_dir


def test_run_page_structure(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    from atlante_eval import load_report

    page = render_run_html(load_report(run_dir), run_dir=run_dir, links_from=run_dir)
    golden("html-run.txt", outline(page))


def test_compare_page_structure() -> None:
    base = report({"a": counts(10, 0), "b": counts(3, 3), "c": counts(1, 1)})
    head = report(
        {"a": counts(0, 10), "b": counts(3, 3), "d": counts(1, 0)}, run_id="h", model="other/model"
    )
    golden("html-compare.txt", outline(render_compare_html(compare_reports(base, head))))


def _session(*calls: tuple[str, str]) -> list[TranscriptEntry]:
    entries: list[TranscriptEntry] = [HeaderEntry(host="claude-code", scenario="a", trial=0)]
    for t, (kind, name) in enumerate(calls, start=1):
        if kind == "skill":
            entries.append(SkillEntry(t=t, name=name))
        else:
            entries.append(ToolCallEntry(t=t, id=f"c{t}", name=name, tool_kind=kind))  # type: ignore[arg-type]
    return entries


def test_compare_page_why_section_structure() -> None:
    """The behaviour section: one article per changed scenario, its tables and path rows."""
    base_trials, head_trials = trials(counts(4, 0)), trials(counts(0, 4))
    base, head = report({"a": base_trials}), report({"a": head_trials}, run_id="h")
    result = compare_reports(base, head)
    before = _session(("skill", "api"), ("shell", "Bash"), ("write", "Edit"))
    after = _session(("shell", "Bash"), ("shell", "Bash"), ("write", "Edit"))
    files = {i: f"trials/a/{i}/transcript.jsonl" for i in range(4)}
    behaviour = compare_trial_sets(
        TrialSet(base_trials, dict.fromkeys(range(4), before), files),
        TrialSet(head_trials, dict.fromkeys(range(4), after), files),
        verdict=result.scenarios["a"].verdict,
    )
    deltas = BehaviourDeltas(
        alpha=0.05, base_dir="/runs/base", head_dir="/runs/head", scenarios={"a": behaviour}
    )
    page = render_compare_html(result.model_copy(update={"behaviour": deltas}))
    golden("html-compare-why.txt", outline(page))


def test_history_page_structure(tmp_path: Path) -> None:
    loaded = [
        LoadedReport(tmp_path / "1", report({"a": counts(10, 0)}, run_id="r1")),
        LoadedReport(tmp_path / "2", report({"a": counts(0, 10), "b": counts(1, 0)}, run_id="r2")),
    ]
    golden("html-history.txt", outline(render_history_html(Path("eval"), loaded)))
