"""The stand-in host read as Claude Code: the engine's real session, parser and normalizer.

:class:`ClaudeDialectStandin` is a :class:`~atlante_eval.hosts.session.CliHost`, so a
trial runs the same ``run_session`` as the built-in hosts (line framing, tampering
evidence, the stream's end), with Claude Code's own stream parser and transcript
normalizer. The stand-in script (``tests/standin_host.py``) prints what the test's
prompt says, Claude ``stream-json`` events included (:func:`assistant`,
:func:`result`), and its ``forge`` actions write into its own stdout from a child
process through ``/proc``, as a hostile agent's tool would.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from atlante_eval import SessionUsage, TrialContext
from atlante_eval._util.environment import allowed_env
from atlante_eval.hosts.base import StreamParser, secret_values
from atlante_eval.hosts.claude_transcript import ClaudeNormalizer
from atlante_eval.hosts.session import CliHost
from atlante_eval.hosts.streams import ClaudeStream

SCRIPT = Path(__file__).with_name("standin_host.py")
#: The credential the stand-in's session gets, as Claude Code's would.
CREDENTIAL_VARIABLE = "ANTHROPIC_API_KEY"


def assistant(message_id: str, *blocks: dict[str, Any], tokens: int = 0) -> dict[str, Any]:
    """A Claude ``assistant`` event with ``blocks`` and ``tokens`` of input usage."""
    usage = {"input_tokens": tokens, "output_tokens": 0}
    return {
        "type": "assistant",
        "message": {"id": message_id, "content": list(blocks), "usage": usage},
    }


def tool_use(call: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` content block."""
    return {"type": "tool_use", "id": call, "name": name, "input": arguments}


def tool_result(call: str, text: str = "ok") -> dict[str, Any]:
    """A Claude ``user`` event carrying one tool result."""
    block = {"type": "tool_result", "tool_use_id": call, "content": text}
    return {"type": "user", "message": {"content": [block]}}


def result(tokens: int, *, cost: float = 0.0, turns: int = 1) -> dict[str, Any]:
    """A Claude ``result`` event (success) reporting ``tokens`` in all."""
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": turns,
        "usage": {"input_tokens": tokens, "output_tokens": 0},
        "total_cost_usd": cost,
        "result": "done",
    }


def line(event: dict[str, Any]) -> str:
    """``event`` as the one line a host prints."""
    return json.dumps(event) + "\n"


class ClaudeDialectStandin(CliHost):
    """Runs ``tests/standin_host.py`` and reads its stdout as Claude Code's ``stream-json``."""

    name = "standin-claude"
    command = "standin"
    ignored_changes: Sequence[str] = (".standin/runtime/**",)

    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        super().__init__(sys.executable, env=env)
        self._path = sys.executable
        self._version = "1.0.0"

    async def probe(self) -> None:
        """Nothing to probe: the stand-in is always available."""

    def prepare(self, context: TrialContext) -> None:
        """Copy the script into the state directory (the test tree is hidden under ``os``)."""
        shutil.copyfile(SCRIPT, context.state_dir / SCRIPT.name)

    def argv(self, context: TrialContext) -> list[str]:
        """Run the private copy of the script."""
        return [sys.executable, str(context.state_dir / SCRIPT.name)]

    def session_env(self, context: TrialContext) -> dict[str, str]:
        """The allowed environment, a private HOME, and the credential, as Claude Code gets it."""
        home = context.state_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            **allowed_env(extra=context.pass_env),
            "HOME": str(home),
            "ATLANTE_STANDIN_DIALECT": "claude",
        }
        credential = self._parent_env().get(CREDENTIAL_VARIABLE)
        if credential:
            env[CREDENTIAL_VARIABLE] = credential
        return env

    def stream_parser(self, usage: SessionUsage) -> StreamParser:
        """Claude Code's own parser."""
        return ClaudeStream(usage)

    def normalizer(self, context: TrialContext) -> ClaudeNormalizer:
        """Claude Code's own normalizer."""
        return ClaudeNormalizer(version=self._version)

    def session_secrets(self, context: TrialContext, env: Mapping[str, str]) -> list[str]:
        """The credential and any secret-named variable, as for Claude Code."""
        return secret_values(env, credentials=(CREDENTIAL_VARIABLE,), pass_env=context.pass_env)
