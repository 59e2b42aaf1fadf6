"""Line framing of a host's stdout: no forged fragment or flood can hide the host's next line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from atlante_eval.hosts import framing
from atlante_eval.hosts.framing import RECOVERY_WORK, EventFraming, recover
from atlante_eval.report import TamperKind
from atlante_eval.trial import run_process
from atlante_eval.trial.pipes import MAX_LINE_BYTES, OVERLONG_TAIL_BYTES

WRITE = {
    "type": "assistant",
    "message": {
        "id": "m1",
        "content": [{"type": "tool_use", "id": "c1", "name": "Write", "input": {"a": {"b": [1]}}}],
        "usage": {"input_tokens": 5, "cache_creation": {"x": 1}},
    },
}
HOST_LINE = json.dumps(WRITE)


class Evidence:
    """Collects what the framing reports."""

    def __init__(self) -> None:
        self.seen: list[tuple[TamperKind, str, int | None]] = []

    def __call__(self, kind: TamperKind, detail: str, line: int | None) -> None:
        self.seen.append((kind, detail, line))

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.seen]


@pytest.mark.parametrize(
    "prefix",
    [
        '{"type":"assistant","message":{"content":[{"type":"text","text":"',
        '{"type": "x", "a": ',
        "garbage without braces ",
        '{"a":"{\\"type\\":1}", "b": [',
        '{"type"' * 50,
    ],
)
def test_a_host_line_glued_behind_a_fragment_is_recovered(prefix: str) -> None:
    """The event after any forged prefix is found whole, and the prefix is evidence."""
    evidence = Evidence()
    found = EventFraming(evidence).decode(prefix + HOST_LINE)
    assert found == (HOST_LINE, WRITE)
    assert evidence.kinds == ["glued-line"]
    assert evidence.seen[0][2] == 1


def test_whole_lines_and_plain_text_are_not_evidence() -> None:
    """A JSON line is an event; a text line is ignored; neither is evidence."""
    evidence = Evidence()
    reader = EventFraming(evidence)
    assert reader.decode(HOST_LINE) == (HOST_LINE, WRITE)
    assert reader.decode("npm warn something") is None
    assert reader.decode('[1, 2, {"a": 1}]') is None
    assert reader.decode(HOST_LINE) is not None
    assert evidence.seen == []


def test_a_malformed_line_is_evidence_only_once_another_line_follows() -> None:
    """A session's cut-off last line hides nothing; a broken line before another does."""
    evidence = Evidence()
    reader = EventFraming(evidence)
    assert reader.decode('{"type":"assistant","message":{"cont') is None
    assert evidence.seen == []
    reader.decode(HOST_LINE)
    assert evidence.kinds == ["malformed-line"]
    assert evidence.seen[0][2] == 1


def test_an_overlong_line_tail_gives_back_the_event_behind_it() -> None:
    """The end of a dropped over-long line is searched too."""
    evidence = Evidence()
    reader = EventFraming(evidence)
    found = reader.overlong(("x" * 5000 + HOST_LINE).encode())
    assert found == (HOST_LINE, WRITE)
    assert evidence.kinds == ["glued-line"]
    assert reader.overlong(b"y" * 5000) is None
    reader.decode(HOST_LINE)
    assert evidence.kinds == ["glued-line", "malformed-line"]


class _Counting(json.JSONDecoder):
    """Counts the characters handed to ``raw_decode``."""

    def __init__(self) -> None:
        super().__init__()
        self.parsed = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        self.parsed += len(s) - idx
        return super().raw_decode(s, idx)


@pytest.mark.parametrize(
    "hostile",
    [
        '{"a":[0,' * 900 + '{"a":[' + "0," * 200_000,
        '{"' * 400_000,
        '{"type"' * 100_000,
        '{"a":"' * 100_000,
    ],
)
def test_the_search_is_bounded_whatever_the_line(
    monkeypatch: pytest.MonkeyPatch, hostile: str
) -> None:
    """A line built to make the search quadratic costs a bounded multiple of its length."""
    counting = _Counting()
    monkeypatch.setattr(framing, "_DECODER", counting)
    assert recover(hostile) is None
    assert counting.parsed <= RECOVERY_WORK * len(hostile) + (1 << 20) + len(hostile)


@pytest.mark.anyio
async def test_the_pipe_reader_hands_over_the_end_of_an_overlong_line(tmp_path: Path) -> None:
    """A line over MAX_LINE_BYTES is dropped, and its last bytes go to on_overlong."""
    code = (
        "import sys\n"
        f"sys.stdout.buffer.write(b'z' * {MAX_LINE_BYTES + (1 << 20)})\n"
        f"sys.stdout.buffer.write({HOST_LINE.encode()!r} + b'\\n' + b'{{\"after\": 1}}\\n')\n"
    )
    lines: list[str] = []
    tails: list[bytes] = []

    def on_line(line: str) -> bool:
        lines.append(line)
        return False

    result = await run_process(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        on_line=on_line,
        on_overlong=tails.append,
    )
    assert result.returncode == 0
    assert lines == ['{"after": 1}']
    [tail] = tails
    assert len(tail) <= OVERLONG_TAIL_BYTES
    assert tail.endswith(HOST_LINE.encode())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_run_json_stream_delivers_the_recovered_event(tmp_path: Path) -> None:
    """Through the host seam: the glued event reaches on_event, the evidence on_tamper."""
    from atlante_eval.hosts.base import run_json_stream

    text = '{"type":"assistant","message":{"content":[{"type":"text","text":"' + HOST_LINE
    code = f"import sys; sys.stdout.write({text!r} + '\\n')"
    events: list[dict[str, Any]] = []
    evidence = Evidence()
    anyio.run(
        lambda: run_json_stream(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            on_event=events.append,
            on_tamper=evidence,
        )
    )
    assert events == [WRITE]
    assert evidence.kinds == ["glued-line"]
