"""Deliberately weakened engines: each patches a stream defence out, so a test sees the breach.

Every attack test of issue 22 runs once against the engine as it is and once
against one of these, where the attack must get through.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from atlante_eval.hosts import framing, streams
from atlante_eval.hosts.base import SessionUsage


def trusting_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weakened engine: every figure recorded as the stream says, negative or lower."""

    def tokens(self: SessionUsage, cumulative: int) -> None:
        self.tokens = cumulative
        if cumulative > self.max_tokens and not self.exceeded:
            self.exceeded = True
            if self._on_exceeded is not None:
                self._on_exceeded()

    def cost(self: SessionUsage, cumulative: float) -> None:
        self.cost = cumulative

    monkeypatch.setattr(SessionUsage, "observe_tokens", tokens)
    monkeypatch.setattr(SessionUsage, "observe_cost", cost)
    monkeypatch.setattr(streams, "_counted", lambda *_args: True)


def stop_counting_after_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weakened engine: the parser stops counting once a result was seen (the old rule)."""
    observe = streams.ClaudeStream._observe

    def observe_until_result(self: streams.ClaudeStream) -> None:
        if not self.result_seen:
            observe(self)

    monkeypatch.setattr(streams.ClaudeStream, "_observe", observe_until_result)


def framing_without_recovery(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weakened engine: a line that does not parse is dropped, an over-long one too."""

    def decode(self: framing.EventFraming, text: str) -> tuple[str, dict[str, Any]] | None:
        try:
            event = json.loads(text)
        except ValueError:
            return None
        return (text, event) if isinstance(event, dict) else None

    monkeypatch.setattr(framing.EventFraming, "decode", decode)
    monkeypatch.setattr(framing.EventFraming, "overlong", lambda _self, _tail: None)
