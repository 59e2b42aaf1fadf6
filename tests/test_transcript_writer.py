"""TranscriptWriter on its own: per-entry caps, per-trial caps, redaction, raw stream."""

from __future__ import annotations

import errno
import gzip
import io
import json
from pathlib import Path

import pytest

from atlante_eval import load_transcript
from atlante_eval.hosts.opencode_transcript import OpenCodeNormalizer
from atlante_eval.report import RunFiles
from atlante_eval.transcript import (
    RAW_FILE,
    ErrorEntry,
    RawEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptWriter,
    TruncatedEntry,
)
from atlante_eval.transcript.writer import TranscriptLimits

SECRET = 'sk-"quoted"\\slash-0123456789'


class _Writer(TranscriptWriter):
    """A writer into ``tmp_path/trials/s/0``, with the paths the tests read back."""

    def __init__(self, tmp_path: Path, limits: TranscriptLimits) -> None:
        info = tmp_path.stat()
        run = RunFiles.open(tmp_path, (info.st_dev, info.st_ino))
        files = run.trial("s", 0)
        run.close()
        assert files is not None
        super().__init__(
            files, host="opencode", scenario="s", trial=0, secrets=[SECRET, "short"], limits=limits
        )
        self.directory = tmp_path / "trials" / "s" / "0"
        self.path = tmp_path / self.relative_path

    def __enter__(self) -> _Writer:
        self.open()
        return self


def _writer(tmp_path: Path, **limits: int) -> _Writer:
    return _Writer(tmp_path, TranscriptLimits(**limits))


def _line(event: dict[str, object]) -> tuple[str, dict[str, object]]:
    text = json.dumps(event)
    return text, json.loads(text)


def test_each_entry_is_capped_with_a_mark(tmp_path: Path) -> None:
    with _writer(tmp_path, text_chars=100, input_chars=200, raw_event_chars=150) as writer:
        writer.write(TextEntry(text="x" * 1000))
        writer.write(
            ToolCallEntry(id="c", name="bash", input={"command": "y" * 1000}, output="z" * 500)
        )
        writer.write(ToolCallEntry(id="d", name="bash", input={str(i): i for i in range(500)}))
        writer.write(RawEntry(event={"blob": "w" * 1000}))
    assert writer.relative_path == "trials/s/0/transcript.jsonl"
    _, text, call, many, raw = load_transcript(writer.path)
    assert isinstance(text, TextEntry)
    assert text.text == "x" * 100 + "… [truncated 900 characters]"
    assert isinstance(call, ToolCallEntry)
    assert call.output == "z" * 100 + "… [truncated 400 characters]"
    assert str(call.input["command"]).endswith("characters]")
    assert len(json.dumps(call.input)) <= 250
    assert isinstance(many, ToolCallEntry)
    assert many.input["truncated"] > 200
    assert isinstance(raw, RawEntry)
    assert isinstance(raw.event, dict)
    assert len(json.dumps(raw.event)) < 400


def test_the_trial_cap_leaves_a_truncated_entry_and_keeps_the_ending(tmp_path: Path) -> None:
    with _writer(tmp_path, max_entries=5, reserve=2) as writer:
        for number in range(20):
            writer.write(TextEntry(text=f"t{number}"))
        writer.write(ErrorEntry(message="the end"))
    entries = load_transcript(writer.path)
    assert [e.kind for e in entries] == ["header"] + ["text"] * 4 + ["error", "truncated"]
    marker = entries[-1]
    assert isinstance(marker, TruncatedEntry)
    assert (marker.dropped, marker.unit) == (16, "entries")
    assert writer.activity().first_error == "the end"


def test_secrets_are_redacted_as_written_and_as_json_escapes_them(tmp_path: Path) -> None:
    normalizer = OpenCodeNormalizer()
    with _writer(tmp_path, raw_bytes=10_000) as writer:
        text, event = _line({"type": "text", "part": {"text": f"key {SECRET} short"}})
        writer.line(text, normalizer, event)
        writer.line(f"plain {SECRET}", normalizer, None)
        writer.write(ErrorEntry(message=f"stderr said {SECRET}"))
    stored = (
        writer.path.read_text()
        + gzip.decompress((writer.directory / RAW_FILE).read_bytes()).decode()
    )
    assert SECRET not in stored
    assert json.dumps(SECRET)[1:-1] not in stored
    assert "sk-" not in stored
    assert stored.count("[redacted]") == 4
    assert "short" in stored  # too short to redact without erasing ordinary words
    texts = [e for e in load_transcript(writer.path) if isinstance(e, TextEntry)]
    assert [t.text for t in texts] == ["key [redacted] short"]


def test_the_raw_stream_is_capped_with_a_marker(tmp_path: Path) -> None:
    normalizer = OpenCodeNormalizer()
    with _writer(tmp_path, raw_bytes=1000) as writer:
        for _ in range(50):
            writer.line("x" * 99, normalizer, None)
    lines = gzip.decompress((writer.directory / RAW_FILE).read_bytes()).decode().splitlines()
    assert lines[:-1] == ["x" * 99] * 10
    assert json.loads(lines[-1]) == {"atlante": "truncated", "dropped": 4000, "unit": "bytes"}


def test_a_broken_normalizer_becomes_a_raw_entry(tmp_path: Path) -> None:
    class Broken:
        def feed(self, event: object, t: int) -> list[object]:
            raise RuntimeError("bug")

        def finish(self, t: int) -> list[object]:
            return []

    with _writer(tmp_path) as writer:
        text, event = _line({"type": "text"})
        writer.line(text, Broken(), event)  # type: ignore[arg-type]
    [_, raw] = load_transcript(writer.path)
    assert isinstance(raw, RawEntry)
    assert raw.event == {"normalizerError": "RuntimeError: bug", "event": {"type": "text"}}


class _FullDisk(io.BytesIO):
    """A file whose every flush fails as on a full disk."""

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_close_closes_every_file_even_when_the_disk_is_full(tmp_path: Path) -> None:
    """A failing flush is raised, but the raw stream and the directory are closed too."""
    writer = _writer(tmp_path).open()
    writer.write(TextEntry(text="x"))
    assert writer._file is not None
    assert writer._raw_file is not None
    writer._file.close()
    writer._file = io.TextIOWrapper(_FullDisk(), encoding="utf-8")
    raw_file = writer._raw_file
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert raw_file.closed
    assert writer._raw is not None
    assert writer._raw.fileobj is None
    assert writer._files._fd == -1
