"""The data behind ``show``: reading transcripts tolerantly and finding trial files safely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlante_eval.views import show as show_module
from atlante_eval.views.show import read_transcript, transcript_file
from atlante_eval.views.show_render import timeline_lines


def test_read_transcript_keeps_whatever_a_line_holds_as_raw(tmp_path: Path) -> None:
    """Non-objects, unknown kinds, bad UTF-8 and non-JSON lines become raw entries, in order."""
    path = tmp_path / "transcript.jsonl"
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
    path.write_bytes("\n".join(lines).encode() + b"\n\xff\xfe not json\n")
    entries = read_transcript(path)
    assert [e.kind for e in entries] == ["header", "raw", "text", "raw", "raw", "raw"]
    assert entries[1].data == {"event": [1, 2]}
    assert entries[2].t is None
    assert entries[4].t == 9
    assert entries[5].data == {"event": {"line": "\ufffd\ufffd not json"}}
    rendered = [line.plain for line in timeline_lines(entries)]
    assert rendered[4].split() == ["+0.0s", "raw", '{"kind":"future-kind","t":9,"x":1}']


def test_read_transcript_stops_at_its_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the entry or byte cap reading stops with a truncated entry saying how much was left."""
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps({"kind": "usage", "t": i}) + "\n" for i in range(50)))
    monkeypatch.setattr(show_module, "MAX_TRANSCRIPT_ENTRIES", 10)
    entries = read_transcript(path)
    assert len(entries) == 11
    assert entries[-1].kind == "truncated"
    assert entries[-1].data == {"reason": "show: entry limit", "dropped": 40, "unit": "entries"}
    monkeypatch.setattr(show_module, "MAX_TRANSCRIPT_ENTRIES", 1000)
    monkeypatch.setattr(show_module, "MAX_TRANSCRIPT_BYTES", 100)
    entries = read_transcript(path)
    assert entries[-1].kind == "truncated"
    assert entries[-1].data["unit"] == "bytes"
    assert all(e.kind == "usage" for e in entries[:-1])


def test_transcript_files_are_never_followed_through_symlinks_or_odd_names(tmp_path: Path) -> None:
    """A symlinked transcript is refused, and a scenario name that is not a name yields no path."""
    secret = tmp_path / "secret.txt"
    secret.write_text('{"kind": "text", "text": "secret"}\n')
    file = transcript_file(tmp_path, "alpha", 0)
    assert file is not None
    file.parent.mkdir(parents=True)
    file.symlink_to(secret)
    with pytest.raises(OSError, match=r"symbolic link|Too many levels"):
        read_transcript(file)
    assert transcript_file(tmp_path, "../../etc", 0) is None
    assert transcript_file(tmp_path, "a/b", 0) is None
