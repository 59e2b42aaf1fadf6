"""The one trial view behind ``show`` and the HTML panel: transcripts read tolerantly and safely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reports import report, trials, write

from atlante_eval import load_report
from atlante_eval.report import RunFiles, run_files
from atlante_eval.views.html.run_page import run_page
from atlante_eval.views.html.trial import PAGE_CAPS, TrialPanel
from atlante_eval.views.show import SHOW_CAPS, trial_view
from atlante_eval.views.show_render import timeline_lines
from atlante_eval.views.trial import TranscriptCaps, TrialView, build_trial_view, read_timeline

ENTRIES = [
    {"kind": "header", "schema": 1, "host": "x", "scenario": "alpha", "trial": 0, "t": 0},
    {"kind": "text", "t": 10, "text": "hello"},
    {"kind": "usage", "t": 20, "tokens": 5},
]


def _run(tmp_path: Path, scenario: str = "alpha") -> Path:
    """A published run whose trial 0 of ``scenario`` failed, with no transcript yet."""
    built = report({scenario: trials(["fail"], error="boom", attempts=[], reused=True)})
    return write(tmp_path / "run", built)


def _transcript(directory: Path, entries: list[dict[str, object]] = ENTRIES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / "transcript.jsonl"
    file.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return file


def test_read_timeline_keeps_whatever_a_line_holds_as_raw() -> None:
    """Non-objects, unknown kinds, bad UTF-8 and non-JSON lines become raw entries, in order."""
    lines = [
        json.dumps(
            {"kind": "header", "schema": 1, "host": "x", "scenario": "s", "trial": 0, "t": 0}
        ),
        json.dumps([1, 2]),
        json.dumps({"kind": "text", "t": True, "text": "hi"}),
        json.dumps({"kind": 7, "t": 5}),
        json.dumps({"kind": "future-kind", "t": 9, "x": 1}),
        "",
    ]
    data = "\n".join(lines).encode() + b"\n\xff\xfe not json\n"
    entries = read_timeline(data, SHOW_CAPS)
    assert [e.kind for e in entries] == ["header", "raw", "text", "raw", "raw", "raw"]
    assert entries[1].data == {"event": [1, 2]}
    assert entries[2].t is None
    assert entries[4].t == 9
    assert entries[5].data == {"event": {"line": "\ufffd\ufffd not json"}}
    rendered = [line.plain for line in timeline_lines(entries)]
    assert rendered[4].split() == ["+0.0s", "raw", '{"kind":"future-kind","t":9,"x":1}']


def test_read_timeline_stops_at_its_caps() -> None:
    """Past the entry or byte cap reading stops with a truncated entry naming the reader."""
    data = "".join(json.dumps({"kind": "usage", "t": i}) + "\n" for i in range(50)).encode()
    entries = read_timeline(data, TranscriptCaps(max_bytes=10**6, max_entries=10, reader="show"))
    assert len(entries) == 11
    assert entries[-1].kind == "truncated"
    assert entries[-1].data == {"reason": "show: entry limit", "dropped": 40, "unit": "entries"}
    entries = read_timeline(data, TranscriptCaps(max_bytes=100, max_entries=1000, reader="page"))
    assert entries[-1].kind == "truncated"
    assert entries[-1].data["unit"] == "bytes"
    assert entries[-1].data["reason"] == "page: byte limit"
    assert all(e.kind == "usage" for e in entries[:-1])


def test_a_transcript_over_the_byte_cap_is_read_up_to_it(tmp_path: Path) -> None:
    """A transcript longer than the view's byte cap shows its head and says it was cut."""
    run_dir = _run(tmp_path)
    many = [{"kind": "usage", "t": i, "tokens": i} for i in range(400)]
    _transcript(run_dir / "trials" / "alpha" / "0", many)
    small = TranscriptCaps(max_bytes=2_000, max_entries=1_000, reader="show")
    built = load_report(run_dir)
    files = RunFiles.open_existing(run_dir)
    try:
        view = build_trial_view(
            built.scenarios["alpha"].trials[0],
            run_id=built.run_id,
            scenario="alpha",
            config=None,
            files=files,
            caps=small,
        )
    finally:
        files.close()
    assert 0 < len(view.timeline) < 400
    assert view.timeline[-1].kind == "truncated"
    assert view.timeline[-1].data["unit"] == "bytes"
    assert view.transcript == str(run_dir / "trials" / "alpha" / "0" / "transcript.jsonl")


def test_show_and_the_page_build_the_same_trial_view(tmp_path: Path) -> None:
    """The page's panel holds the very view ``show RUN SCENARIO:I`` prints (caps aside)."""
    run_dir = _run(tmp_path)
    _transcript(run_dir / "trials" / "alpha" / "0")
    (run_dir / "trials" / "alpha" / "0" / "raw.jsonl.gz").write_bytes(b"")
    built = load_report(run_dir)
    shown = trial_view(built, run_dir / "report.json", "alpha", 0)
    [row] = run_page(built, run_dir=run_dir, links_from=run_dir).scenarios
    [panel] = row.panels
    assert panel.view == shown.model_copy(update={"timeline": []})  # laid out into items
    assert [item.kind for item in panel.timeline] == ["text", "usage"]  # the header is not shown
    assert [e.kind for e in shown.timeline] == ["header", "text", "usage"]
    assert shown.files == ["trials/alpha/0/transcript.jsonl", "trials/alpha/0/raw.jsonl.gz"]
    assert shown.reused
    assert shown.error == "boom"
    assert shown.attempts == 0
    assert [link.href for link in panel.links] == [
        "trials/alpha/0/transcript.jsonl",
        "trials/alpha/0/raw.jsonl.gz",
    ]
    assert SHOW_CAPS.max_entries > PAGE_CAPS.max_entries


def test_show_follows_the_run_directory_the_user_names_through_a_symlink(tmp_path: Path) -> None:
    """A symlink the user names (``latest`` -> a run) is followed; the transcript is read."""
    run_dir = _run(tmp_path)
    _transcript(run_dir / "trials" / "alpha" / "0")
    latest = tmp_path / "latest"
    latest.symlink_to(run_dir, target_is_directory=True)
    view = trial_view(load_report(latest), latest / "report.json", "alpha", 0)
    assert [e.kind for e in view.timeline] == ["header", "text", "usage"]


def test_a_symlinked_transcript_or_trial_directory_is_never_followed(tmp_path: Path) -> None:
    """A transcript or trial directory planted as a symlink is not read: no timeline."""
    secret = _transcript(tmp_path / "outside" / "0")
    run_dir = _run(tmp_path)
    trial_dir = run_dir / "trials" / "alpha" / "0"
    trial_dir.mkdir(parents=True)
    (trial_dir / "transcript.jsonl").symlink_to(secret)
    built = load_report(run_dir)
    view = trial_view(built, run_dir / "report.json", "alpha", 0)
    assert view.transcript is None
    assert view.timeline == []
    trial_dir.joinpath("transcript.jsonl").unlink()
    trial_dir.rmdir()
    trial_dir.symlink_to(secret.parent, target_is_directory=True)
    view = trial_view(built, run_dir / "report.json", "alpha", 0)
    assert view.transcript is None
    assert view.timeline == []


def test_a_scenario_name_that_is_not_a_name_reads_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report naming scenario ``../../outside`` makes neither show nor the page read outside.

    With the run directory's name check weakened, the same report does read the
    planted transcript: the test sees the breach the check prevents.
    """
    _transcript(tmp_path / "outside" / "0")
    run_dir = _run(tmp_path)
    (run_dir / "trials").mkdir()
    document = json.loads((run_dir / "report.json").read_text())
    document["scenarios"] = {"../../outside": document["scenarios"]["alpha"]}
    (run_dir / "report.json").write_text(json.dumps(document))
    hostile = load_report(run_dir)

    def views() -> tuple[TrialView, TrialPanel]:
        [row] = run_page(hostile, run_dir=run_dir, links_from=run_dir).scenarios
        shown = trial_view(hostile, run_dir / "report.json", "../../outside", 0)
        return shown, row.panels[0]

    shown, panel = views()
    assert shown.timeline == []
    assert shown.transcript is None
    assert panel.timeline == []
    assert panel.view.transcript is None
    monkeypatch.setattr(run_files, "single_component", lambda _name: True)
    shown, panel = views()
    assert [e.kind for e in shown.timeline] == ["header", "text", "usage"]
    assert [item.kind for item in panel.timeline] == ["text", "usage"]
