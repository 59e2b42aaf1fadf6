"""Pure parsers for the hosts' JSON event streams, and how a session's end is judged.

:class:`OpenCodeStream` and :class:`ClaudeStream` are fed one decoded event at a
time and report token usage, cost and model identity into a
:class:`~atlante_eval.hosts.base.SessionUsage` as they go, so the engine can
enforce ``maxTokens`` while the session runs. They also remember the first host
error the stream reported. Neither does any I/O.

Token rules (reference §6.6/§6.7, with the reference's Claude undercount fixed):

* OpenCode: each ``step_finish`` reports its own usage; the running total is the
  sum. Other events count only until the first step usage is seen.
* Claude Code: each assistant message's usage counts once, keyed by message id
  (a later snapshot of the same message raises each part to its larger value), so
  the budget binds while the session runs; each ``result`` event then raises the
  figure to its ``modelUsage`` (the session's total, subagents included) when
  present, else to the sum of the result events' ``usage`` (each counts the main
  agent's calls since the previous result; a background subagent's completion
  adds a second result). Messages after a result keep counting on top of it.

What an agent can write into the host's stdout cannot lower a figure or stop the
accounting (docs/reliability.md): a negative part is ignored and kept as
tampering evidence, a smaller snapshot never replaces a larger one, a ``result``
event does not end the counting, and events after the session's final result are
tampering evidence. Every per-session table is bounded.
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ..choices import TOKEN_CEILING
from ..transcript import TranscriptEntry, UsageEntry
from ..trial import ProcessResult
from .base import SessionEnd, SessionUsage

__all__ = [
    "ERROR_LIMIT",
    "HTTP_REASONS",
    "MESSAGES_LIMIT",
    "ClaudeStream",
    "OpenCodeStream",
    "UsageSnapshots",
    "bounded",
    "close_session",
    "find_model",
    "normalize_claude_usage",
    "normalize_tokens",
    "status_reason",
]

#: Longest host error summary or stderr excerpt kept in an ``infra-error`` text.
ERROR_LIMIT = 2000
#: Longest host-supplied message kept inside an error summary.
_MESSAGE_LIMIT = 500
#: Most permission denials kept as trial evidence.
_DENIALS_LIMIT = 20
#: Most messages whose usage snapshots are kept open (older ones are settled in the sum).
MESSAGES_LIMIT = 256

#: Readable reasons for HTTP statuses a model API answers with.
HTTP_REASONS: Mapping[int, str] = {
    400: "bad request",
    401: "authentication failed",
    403: "permission denied",
    404: "not found",
    408: "request timed out",
    429: "rate limited",
    500: "host service error",
    502: "host service error",
    503: "host service unavailable",
    504: "host service timed out",
}

_ERROR_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")
_MODEL_KEYS = ("model", "modelInfo", "modelRef")
#: Keys holding tool arguments, results or text: agent-controlled, never searched for a model.
_CONTENT_KEYS = frozenset({"state", "input", "output", "metadata", "text", "content", "args"})
_MAX_DEPTH = 6


def bounded(text: str, limit: int = ERROR_LIMIT) -> str:
    """Return ``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else f"{text[:limit]}… truncated"


def status_reason(status: int) -> str:
    """Return a readable reason for an HTTP ``status`` (e.g. 429 -> ``rate limited``)."""
    return HTTP_REASONS.get(status, "host request failed")


def _number(value: object) -> float | None:
    """A finite number, or ``None`` (booleans, non-numbers, NaN, infinities, huge ints)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _status(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 100 <= value <= 599 else None


def _sum(values: list[float | None]) -> int | None:
    present = [v for v in values if v is not None]
    total = sum(present)  # floats: an overflow is infinite, never an error
    return round(total) if present and math.isfinite(total) else None


def normalize_tokens(value: object) -> int | None:
    """Return a token count from a number, ``{total}``, or OpenCode's token parts.

    Parts are ``input``, ``output``, ``reasoning``, ``cache.read`` and
    ``cache.write``; ``None`` when nothing numeric is present.
    """
    number = _number(value)
    if number is not None:
        return round(number)
    if not isinstance(value, dict):
        return None
    total = _number(value.get("total"))
    if total is not None:
        return round(total)
    cache = value.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    return _sum(
        [
            _number(value.get("input")),
            _number(value.get("output")),
            _number(value.get("reasoning")),
            _number(cache.get("read")),
            _number(cache.get("write")),
        ]
    )


_ANTHROPIC_PARTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def normalize_claude_usage(value: object) -> int | None:
    """Return a token count from an Anthropic ``usage`` object (or OpenCode's shapes)."""
    number = _number(value)
    if number is not None:
        return round(number)
    if not isinstance(value, dict):
        return None
    total = _number(value.get("total"))
    if total is not None:
        return round(total)
    if any(key in value for key in _ANTHROPIC_PARTS):
        return _sum([_number(value.get(key)) for key in _ANTHROPIC_PARTS])
    return normalize_tokens(value)


def _pair(value: Mapping[str, Any], *, container: bool) -> tuple[str, str] | None:
    provider = value.get("providerID", value.get("providerId"))
    model = value.get("modelID", value.get("modelId"))
    if isinstance(provider, str) and provider and isinstance(model, str) and model:
        return provider, model
    if isinstance(provider, str) and provider:
        named = value.get("model")
        if isinstance(named, str) and named:
            if "/" in named:
                head, tail = named.split("/", 1)
                return (head, tail) if head and tail else None
            return provider, named
        ident = value.get("id")
        if container and isinstance(ident, str) and ident:
            return provider, ident
    return None


def _from_string(value: object) -> tuple[str, str] | None:
    if isinstance(value, str) and "/" in value:
        head, tail = value.split("/", 1)
        if head and tail and not any(c.isspace() for c in value):
            return head, tail
    return None


def find_model(  # noqa: C901 - one walk over every model-carrying shape of both hosts' events
    value: object, *, _depth: int = 0, _container: bool = False
) -> tuple[str, str] | None:
    """Search an OpenCode event for a ``(provider, model)`` pair.

    Keys ``model``, ``modelInfo`` and ``modelRef`` are searched first. Accepted
    shapes: ``{providerID, modelID}``; a provider with a string ``model`` (which
    may itself be ``provider/model``); a provider with an ``id`` under a model key;
    a ``"provider/model"`` string under a model key. Tool inputs, outputs and text
    (agent-controlled content) are never searched.
    """
    if _depth > _MAX_DEPTH:
        return None
    if isinstance(value, list):
        for item in value:
            found = find_model(item, _depth=_depth + 1)
            if found:
                return found
        return None
    if not isinstance(value, dict):
        return _from_string(value) if _container else None
    for key in _MODEL_KEYS:
        if key in value:
            found = find_model(value[key], _depth=_depth + 1, _container=True)
            if found:
                return found
    found = _pair(value, container=_container)
    if found:
        return found
    for key, item in value.items():
        if key not in _MODEL_KEYS and key not in _CONTENT_KEYS and isinstance(item, dict | list):
            found = find_model(item, _depth=_depth + 1)
            if found:
                return found
    return None


def _opencode_error(error: Mapping[str, Any]) -> str:
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    name = error.get("name")
    parts = [name if isinstance(name, str) and _ERROR_NAME.match(name) else "host error"]
    status = _status(error.get("statusCode")) or _status(data.get("statusCode"))
    if status is not None:
        parts += [status_reason(status), f"status {status}"]
    message = data.get("message", error.get("message"))
    if isinstance(message, str) and message.strip():
        parts.append(bounded(message.strip(), _MESSAGE_LIMIT))
    return bounded(": ".join(parts))


def _counted(usage: SessionUsage, value: float, what: str) -> bool:
    """Whether ``value`` may count; a negative one is kept as tampering evidence instead."""
    if value >= 0:
        return True
    usage.tamper("negative-usage", f"a negative {what} figure ({value}) in the host's stream")
    return False


class _StepSum:
    """OpenCode's rule for one figure: step events add up; before any step, the latest wins."""

    def __init__(self) -> None:
        self.total: float = 0
        self.stepped = False

    def add(self, value: float, *, step: bool) -> float | None:
        """Account for ``value``; return the figure to record, or ``None`` to keep the old one."""
        if step:
            self.total += value
            self.stepped = True
            return self.total
        return None if self.stepped else value


class OpenCodeStream:
    """Reads ``opencode run --format json`` events into a :class:`SessionUsage`."""

    def __init__(self, usage: SessionUsage) -> None:
        self.usage = usage
        self.error: str | None = None
        """The first error event's summary."""
        self._tokens = _StepSum()
        self._cost = _StepSum()

    def feed(self, event: Mapping[str, Any]) -> None:
        """Account for one event."""
        kind = event.get("type")
        part = event.get("part")
        part = part if isinstance(part, dict) else {}
        step = kind in ("step_finish", "step-finish")
        tokens = normalize_tokens(part.get("tokens"))
        if tokens is None:
            tokens = normalize_tokens(event.get("tokens"))
        if tokens is not None and _counted(self.usage, tokens, "tokens"):
            total = self._tokens.add(tokens, step=step)
            if total is not None:
                self.usage.observe_tokens(int(total))
        cost = _number(part.get("cost"))
        if cost is None:
            cost = _number(event.get("cost"))
        if cost is not None and _counted(self.usage, cost, "cost"):
            figure = self._cost.add(cost, step=step)
            if figure is not None:
                self.usage.observe_cost(figure)
        if self.usage.model is None:
            found = find_model(event)
            if found:
                provider, model = found
                self.usage.observe_model(f"{provider}/{model}", model)
        error = event.get("error")
        if kind == "error" and isinstance(error, dict) and self.error is None:
            self.error = _opencode_error(error)

    def finish(self) -> None:
        """Nothing to account for at the end: OpenCode prints no result event."""


_MODEL_USAGE_PARTS = (
    "inputTokens",
    "outputTokens",
    "cacheReadInputTokens",
    "cacheCreationInputTokens",
)


def _model_usage_total(value: object) -> int | None:
    """Tokens of a Claude ``modelUsage`` object (per model), summed; ``None`` when absent."""
    if not isinstance(value, dict):
        return None
    parts = [
        _number(entry.get(key))
        for entry in value.values()
        if isinstance(entry, dict)
        for key in _MODEL_USAGE_PARTS
    ]
    return _sum(parts)


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, list):
        texts = [item.strip() for item in value if isinstance(item, str) and item.strip()]
        return "; ".join(texts) or None
    return None


def _denial(entry: object) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {"denial": bounded(str(entry), _MESSAGE_LIMIT)}
    kept: dict[str, Any] = {}
    tool = entry.get("tool_name", entry.get("tool"))
    if isinstance(tool, str):
        kept["tool"] = tool
    tool_input = entry.get("tool_input", entry.get("input"))
    if tool_input is not None:
        kept["input"] = bounded(json.dumps(tool_input, ensure_ascii=False), _MESSAGE_LIMIT)
    return kept


class ClaudeStream:
    """Reads ``claude -p --output-format stream-json --verbose`` events into a usage."""

    def __init__(self, usage: SessionUsage) -> None:
        self.usage = usage
        self.error: str | None = None
        """Why the result event says the session failed, if it does."""
        self.result_seen = False
        self._messages: OrderedDict[str, dict[str, float]] = OrderedDict()
        """The open messages' usage snapshots (the most recent :data:`MESSAGES_LIMIT`)."""
        self._sum = 0.0
        """Every message's usage, summed (settled messages included)."""
        self._base = 0.0
        """The figure the last result set."""
        self._anchor = 0.0
        """:attr:`_sum` when the last result arrived: messages after it add on top."""
        self._result_tokens = 0
        self._after_result: list[str] = []
        """The types of the events since the last result (the first few), and their count."""
        self._after_count = 0

    def _message_usage(self, message_id: object, usage: object) -> None:
        if not isinstance(message_id, str) or not isinstance(usage, dict):
            return
        parts = {
            k: n
            for k in _ANTHROPIC_PARTS
            if (n := _number(usage.get(k))) is not None and _counted(self.usage, n, k)
        }
        if not parts:
            return
        known = self._messages.pop(message_id, {})
        merged = {**known, **{k: max(v, known[k]) if k in known else v for k, v in parts.items()}}
        self._messages[message_id] = merged
        if len(self._messages) > MESSAGES_LIMIT:
            self._messages.popitem(last=False)  # settled: its last snapshot stays in the sum
        self._sum += sum(merged.values()) - sum(known.values())
        self._observe()

    def _observe(self) -> None:
        figure = self._base + (self._sum - self._anchor)
        if math.isfinite(figure):
            self.usage.observe_tokens(round(min(figure, TOKEN_CEILING)))

    def feed(self, event: Mapping[str, Any]) -> None:
        """Account for one event."""
        kind = event.get("type")
        if self.result_seen and kind != "result":
            self._after_count += 1
            if len(self._after_result) < 3:
                self._after_result.append(bounded(str(kind), 40))
        message = event.get("message")
        if kind == "assistant" and isinstance(message, dict):
            self._message_usage(message.get("id"), message.get("usage"))
        elif kind == "stream_event" and isinstance(event.get("event"), dict):
            inner = event["event"]
            start = inner.get("message")
            if inner.get("type") == "message_start" and isinstance(start, dict):
                self._message_usage(start.get("id"), start.get("usage"))
            elif inner.get("type") == "message_delta":
                self._message_usage(event.get("api_message_id"), inner.get("usage"))
        candidates = [c for c in (event, message, event.get("result")) if isinstance(c, dict)]
        self._identity(candidates)
        if kind == "result":
            self._after_result, self._after_count = [], 0
            self._result(event, candidates)

    def finish(self) -> None:
        """Keep events after the session's final result as tampering evidence."""
        if self._after_count:
            kinds = ", ".join(self._after_result)
            self.usage.tamper(
                "after-result",
                f"{self._after_count} event(s) after the session's final result ({kinds})",
            )

    def _identity(self, candidates: Sequence[Mapping[str, Any]]) -> None:
        if self.usage.model is not None:
            return
        for candidate in candidates:
            model = candidate.get("model")
            if isinstance(model, str) and model.strip() and not model.startswith("<"):
                self.usage.observe_model(model.strip())
                return

    def _result(  # noqa: C901 - every field of Claude's result event, in one place
        self, event: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]]
    ) -> None:
        self.result_seen = True
        # ``modelUsage`` is the session's cumulative total, subagents included; ``usage``
        # counts only the main agent's calls since the previous result event.
        session = _model_usage_total(event.get("modelUsage"))
        if session is not None and not _counted(self.usage, session, "modelUsage"):
            session = None
        for candidate in candidates:
            tokens = normalize_claude_usage(candidate.get("usage"))
            if tokens is not None:
                if _counted(self.usage, tokens, "result usage"):
                    self._result_tokens += tokens
                break
        else:
            tokens = None
        figure = self._base + (self._sum - self._anchor)
        if session is not None:
            figure = max(figure, session)
        elif tokens is not None:
            figure = max(figure, self._result_tokens)
        # A result never lowers the figure nor ends the counting: later messages add to it.
        self._base, self._anchor = figure, self._sum
        if session is not None or tokens is not None:
            self._observe()
        for candidate in candidates:
            cost = next(
                (
                    c
                    for key in ("total_cost_usd", "totalCostUsd", "cost")
                    if (c := _number(candidate.get(key))) is not None
                ),
                None,
            )
            if cost is not None:
                if _counted(self.usage, cost, "cost"):
                    self.usage.observe_cost(cost)
                break
        denials = event.get("permission_denials")
        if isinstance(denials, list) and denials:
            self.usage.evidence["permissionDenials"] = [
                _denial(d) for d in denials[:_DENIALS_LIMIT]
            ]
            if len(denials) > _DENIALS_LIMIT:
                self.usage.evidence["permissionDenialsOmitted"] = len(denials) - _DENIALS_LIMIT
        subtype = event.get("subtype")
        if isinstance(subtype, str) and subtype != "success":
            detail = (
                _text(event.get("error"))
                or _text(event.get("message"))
                or _text(event.get("errors"))
                or _text(event.get("result"))
            )
            text = f"claude run {subtype}"
            self.error = bounded(f"{text}: {bounded(detail, _MESSAGE_LIMIT)}" if detail else text)
        elif event.get("is_error") is True:
            parts = ["claude run failed"]
            status = _status(event.get("api_error_status"))
            if status is not None:
                parts += [status_reason(status), f"status {status}"]
            detail = _text(event.get("result"))
            if detail:
                parts.append(bounded(detail, _MESSAGE_LIMIT))
            self.error = bounded(": ".join(parts))


def close_session(
    label: str, result: ProcessResult, *, host_error: str | None, error_when_ok: bool = True
) -> SessionEnd:
    """Judge how a host process ended.

    Args:
        label: the host's command name in messages (``opencode``, ``claude``).
        result: the finished process.
        host_error: the error the stream reported, if any.
        error_when_ok: whether ``host_error`` makes a zero exit an ``infra-error``.
    """
    if result.spawn_error:
        return SessionEnd(error=f"could not run the {label} host: {result.spawn_error}")
    if result.returncode != 0:
        status = result.exit if result.exit is not None else result.signal_name
        detail = host_error or result.stderr.strip()[-ERROR_LIMIT:] or "no stderr output"
        return SessionEnd(error=f"{label} run exited {status}: {detail}")
    if host_error is not None and error_when_ok:
        return SessionEnd(error=host_error)
    return SessionEnd()


#: A budget no real session reaches: the normalizers' private usage never cancels anything.
_UNBOUNDED = TOKEN_CEILING * 2


class UsageSnapshots:
    """Emit a :class:`UsageEntry` whenever the shared stream parser's figures change."""

    def __init__(self) -> None:
        self.usage = SessionUsage(_UNBOUNDED)
        self._last: tuple[int | None, float | None] = (None, None)

    def snapshot(self, t: int, ts: str | None) -> list[TranscriptEntry]:
        current = (self.usage.tokens, self.usage.cost)
        if current == self._last or current == (None, None):
            return []
        self._last = current
        return [UsageEntry(t=t, ts=ts, tokens=current[0], cost_usd=current[1])]
