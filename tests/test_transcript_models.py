"""The transcript entry models and load_transcript."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from atlante_eval import load_transcript
from atlante_eval.transcript import HeaderEntry, RawEntry, ToolCallEntry, TranscriptError


def _write(path: Path, *lines: object) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def test_load_transcript_returns_typed_entries_in_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "transcript.jsonl",
        {"kind": "header", "schema": 1, "host": "claude-code", "scenario": "s", "trial": 2, "t": 0},
        {
            "kind": "tool-call",
            "t": 5,
            "id": "c1",
            "name": "Bash",
            "toolKind": "shell",
            "input": {"command": "ls"},
            "output": "a\n",
            "status": "ok",
            "durationMs": 3,
            "newerField": True,
        },
        {"kind": "a-kind-from-the-future", "t": 9},
        "not json at all",
    )
    entries = load_transcript(path)
    assert isinstance(entries[0], HeaderEntry)
    assert entries[0].trial == 2
    call = entries[1]
    assert isinstance(call, ToolCallEntry)
    assert (call.name, call.tool_kind, call.input, call.duration_ms) == (
        "Bash",
        "shell",
        {"command": "ls"},
        3,
    )
    assert isinstance(entries[2], RawEntry)
    assert entries[2].t == 9
    assert entries[2].event == {"kind": "a-kind-from-the-future", "t": 9}
    assert isinstance(entries[3], RawEntry)
    assert entries[3].event == "not json at all"


def test_load_transcript_refuses_a_file_without_header(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no header"):
        load_transcript(_write(tmp_path / "t.jsonl", {"kind": "text", "text": "hi"}))
    with pytest.raises(TranscriptError, match="empty"):
        load_transcript(_write(tmp_path / "e.jsonl"))


def test_entries_serialize_with_camel_case_keys() -> None:
    entry = ToolCallEntry(id="c", name="write", tool_kind="write", duration_ms=4)
    data = json.loads(entry.model_dump_json(by_alias=True))
    assert data["toolKind"] == "write"
    assert data["durationMs"] == 4
    assert data["kind"] == "tool-call"
    header = json.loads(HeaderEntry(host="x", scenario="s", trial=0).model_dump_json(by_alias=True))
    assert header["schema"] == 1


def test_load_transcript_never_reads_a_fifo_or_follows_a_symlink(tmp_path: Path) -> None:
    """A FIFO (reading would block) or a symlink in a transcript's place is refused at once."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="regular file"):
        load_transcript(fifo)
    real = tmp_path / "real.jsonl"
    header = {"kind": "header", "schema": 1, "host": "opencode", "scenario": "s", "trial": 0}
    real.write_text(json.dumps(header) + "\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with pytest.raises(OSError, match="symbolic links"):
        load_transcript(link)
    assert len(load_transcript(real)) == 1
