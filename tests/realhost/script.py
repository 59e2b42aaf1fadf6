"""Scripts for the mock model: what it answers at each step of a conversation.

A test describes a conversation as a list of turns, independent of the client:
``[WriteFile("hello.txt", "hi"), Reply("done")]``. The mock turns each turn
into the tool name and argument names of the client that asked (``Write`` with
``file_path`` for Claude Code, ``write`` with ``filePath`` for OpenCode).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Client = Literal["claude", "opencode"]
"""The naming convention of a client's tools: Claude Code's or OpenCode's."""

SCRIPT_MARKER_PREFIX = "[script:"
"""A prompt selects its script by containing ``[script:NAME]``."""

DEFAULT_SCRIPT = "default"
"""The script used for a conversation whose prompt carries no marker."""


@dataclass(frozen=True)
class Usage:
    """Token counts the mock reports for one model call.

    ``input_tokens`` excludes cached tokens, as in the Anthropic API; on the
    OpenAI wire the mock sends ``prompt_tokens = input_tokens + cache_read_tokens``.
    """

    input_tokens: int = 100
    """Fresh (uncached) prompt tokens."""
    output_tokens: int = 10
    """Completion tokens."""
    cache_read_tokens: int = 0
    """Prompt tokens served from the cache."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the cache (Anthropic wire only)."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One model call in a script; the base of every action."""

    usage: Usage = field(default_factory=Usage)
    """What the response reports as token usage."""
    delay: float = 0.0
    """Seconds to wait before answering (simulated latency)."""
    gate: str | None = None
    """A name: when this turn's request arrives, the mock creates ``<workdir>/<gate>.arrived``
    and answers only once ``<workdir>/<gate>.go`` exists, so the agent's own tool (a
    daemon it left) can act between the request and the answer, event-driven."""


@dataclass(frozen=True)
class Reply(Turn):
    """Answer with plain text and end the turn."""

    text: str
    """The assistant's text."""


@dataclass(frozen=True)
class WriteFile(Turn):
    """Call the client's write tool."""

    path: str
    """Target file; a relative path is joined to the conversation's working directory."""
    content: str
    """File content."""


@dataclass(frozen=True)
class RunBash(Turn):
    """Call the client's shell tool."""

    command: str
    """The command line."""
    description: str = "Run a command"
    """Sent only when the client's tool declares a ``description`` argument."""


@dataclass(frozen=True)
class CallTool(Turn):
    """Call any tool, spelled out per client (the escape hatch for other tools)."""

    claude: tuple[str, Mapping[str, Any]]
    """Tool name and arguments for Claude Code."""
    opencode: tuple[str, Mapping[str, Any]]
    """Tool name and arguments for OpenCode."""


@dataclass(frozen=True)
class Fail(Turn):
    """Answer with an HTTP error in the API's own error format."""

    status: int
    """HTTP status code, e.g. 400, 401, 429, 500, 529."""
    message: str = "mock error"
    """The error message in the body."""
    retry_after_ms: int | None = None
    """When set, sent as the ``retry-after-ms`` header (and ``retry-after`` in seconds)."""


Action = Reply | WriteFile | RunBash | CallTool | Fail
"""Every kind of scripted turn."""


@dataclass(frozen=True)
class Script:
    """A named conversation: turn ``i`` answers the request that carries ``i`` tool results."""

    name: str
    """Matched against the ``[script:NAME]`` marker in the prompt."""
    turns: Sequence[Action]
    """One action per model call, in order."""
    workdir: str | None = None
    """Absolute working directory for relative paths; else read from the system prompt."""
    when_exhausted: Action = Reply("[mock] script finished")
    """What to answer once every turn is used (the request log marks it ``exhausted``)."""

    def turn_at(self, step: int) -> tuple[Action, bool]:
        """Return the action for ``step`` and whether the script ran out of turns."""
        if 0 <= step < len(self.turns):
            return self.turns[step], False
        return self.when_exhausted, True


@dataclass(frozen=True)
class ToolCallSpec:
    """A resolved tool call: the client's tool name and its arguments."""

    name: str
    """Tool name as the client declared it."""
    arguments: dict[str, Any]
    """Arguments with the client's argument names."""


_WRITE = {"claude": ("Write", "file_path"), "opencode": ("write", "filePath")}
_BASH = {"claude": "Bash", "opencode": "bash"}


def client_for_tools(tool_names: Sequence[str], *, fallback: Client) -> Client:
    """Guess the client from the tool names it offers (capitalised names are Claude Code's)."""
    names = set(tool_names)
    if {"Write", "Bash"} & names:
        return "claude"
    if {"write", "bash"} & names:
        return "opencode"
    return fallback


def resolve_tool_call(
    action: WriteFile | RunBash | CallTool,
    *,
    client: Client,
    workdir: str | None,
    tool_params: Mapping[str, Sequence[str]],
) -> ToolCallSpec:
    """Spell ``action`` the way ``client`` expects.

    Args:
        action: The scripted tool call.
        client: Whose naming to use.
        workdir: Absolute directory that relative paths are joined to, if known.
        tool_params: Declared argument names of each tool in the request.
    """
    if isinstance(action, WriteFile):
        name, path_arg = _WRITE[client]
        path = action.path
        if workdir and not posixpath.isabs(path):
            path = posixpath.join(workdir, path)
        return ToolCallSpec(name, {path_arg: path, "content": action.content})
    if isinstance(action, RunBash):
        name = _BASH[client]
        arguments: dict[str, Any] = {"command": action.command}
        if "description" in tool_params.get(name, ()):
            arguments["description"] = action.description
        return ToolCallSpec(name, arguments)
    name, args = action.claude if client == "claude" else action.opencode
    return ToolCallSpec(name, dict(args))
