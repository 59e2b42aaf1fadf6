"""The model-call record: what the provider answered each of a trial's model calls.

With the gateway on (docs/gateway.md) every trial gets
``<run dir>/trials/<scenario>/<i>/model-calls.jsonl`` beside its transcript: one
JSON object per line, a :class:`ModelCall` for each call the gateway forwarded,
in the order the calls ended, then a :class:`~.models.TruncatedEntry` when the
record's cap left calls out. Unlike the transcript, nothing in it comes from the
host's process: the engine read it from the provider's own responses. The models
read leniently (unknown keys are ignored), like the transcript's.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from .models import TruncatedEntry, read_transcript_lines

__all__ = [
    "MODEL_CALLS_FILE",
    "ModelApi",
    "ModelCall",
    "ModelCallLine",
    "ModelToolCall",
    "load_model_calls",
    "parse_model_call_line",
]

#: Name of the model-call record inside a trial's directory.
MODEL_CALLS_FILE = "model-calls.jsonl"

#: The provider API a call spoke, by the request's path (``unknown``: none the gateway reads).
ModelApi = Literal["anthropic-messages", "openai-chat", "openai-responses", "unknown"]


class _Line(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        populate_by_name=True,
        ser_json_inf_nan="null",
        defer_build=True,
    )
    __field_docs__: ClassVar[bool] = True
    """Field docstrings are read when a JSON Schema is generated (:mod:`.fielddocs`)."""


class ModelToolCall(_Line):
    """A tool call the model asked for in its answer."""

    id: str | None = None
    """The provider's call id (``toolu_...``, ``call_...``), which the hosts keep."""
    name: str
    """The tool's name as the model wrote it."""
    input: Any = None
    """The call's arguments (capped; a ``{"truncated", "preview"}`` object when cut)."""


class ModelCall(_Line):
    """One model call the gateway forwarded, as the provider answered it."""

    kind: Literal["model-call"] = "model-call"
    t: int = 0
    """Milliseconds since the trial's route opened, when the call began."""
    at: str | None = None
    """UTC time the call began (ISO 8601)."""
    api: ModelApi = "unknown"
    """The provider API, from the request's path."""
    path: str = ""
    """The request's path below the trial's route (``/v1/messages``)."""
    status: int | None = None
    """The provider's HTTP status (``None``: no answer)."""
    model: str | None = None
    """The model the provider said it served."""
    streamed: bool = False
    """Whether the answer was server-sent events."""
    input_tokens: int | None = None
    """Input tokens the provider counted (not read from cache)."""
    output_tokens: int | None = None
    """Output tokens the provider counted."""
    cache_read_tokens: int | None = None
    """Input tokens read from the prompt cache."""
    cache_write_tokens: int | None = None
    """Input tokens written to the prompt cache."""
    tokens: int | None = None
    """All four, summed (``None``: the answer carried no usage)."""
    duration_ms: int = 0
    """Time from the request to the end of the answer."""
    stop_reason: str | None = None
    """Why the model stopped (``end_turn``, ``tool_use``, ``stop``, ``tool_calls``, ...)."""
    tool_calls: list[ModelToolCall] = Field(default_factory=list)
    """The tool calls the model asked for (at most 64)."""
    tool_calls_omitted: int | None = None
    """How many more tool calls the answer asked for than ``toolCalls`` keeps."""
    readable: bool = True
    """Whether the gateway could read the answer's usage (else the trial's figures are
    the host's)."""
    ended: str | None = None
    """Why the call ended early: ``budget`` (the gateway cut it at ``maxTokens``),
    ``closed`` (the host hung up), ``upstream`` (the provider failed), ``route-closed``."""


ModelCallLine = Annotated[ModelCall | TruncatedEntry, Field(discriminator="kind")]
"""One line of a model-call record."""


@functools.cache
def _adapter() -> TypeAdapter[ModelCallLine]:
    return TypeAdapter(ModelCallLine)


def parse_model_call_line(value: object) -> ModelCall | TruncatedEntry | None:
    """Return the record line ``value`` holds, or ``None`` when it is none."""
    try:
        return _adapter().validate_python(value)
    except ValidationError:
        return None


def load_model_calls(path: Path | str) -> list[ModelCall | TruncatedEntry]:
    """Read a trial's ``model-calls.jsonl`` into typed lines, in file order.

    A line that is no model call (damage, or a newer kind) is skipped; a final
    :class:`~.models.TruncatedEntry` says how many calls the record's cap left out.

    Raises:
        OSError: the file cannot be read (also when it is a symlink or not a regular file).
    """
    read = read_transcript_lines(Path(path))
    found = [parse_model_call_line(line.value) for line in read.lines if line.is_json]
    return [line for line in found if line is not None]
