"""A Host that drives tests/standin_host.py through the engine's real host seam."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from atlante_eval import SessionEnd, SessionUsage, TrialContext
from atlante_eval._util.environment import allowed_env
from atlante_eval.hosts.base import run_json_stream
from atlante_eval.hosts.claude_transcript import ClaudeNormalizer
from atlante_eval.hosts.opencode_transcript import OpenCodeNormalizer
from atlante_eval.transcript import Normalizer

SCRIPT = Path(__file__).with_name("standin_host.py")


def actions(*steps: dict[str, Any]) -> str:
    """Return a prompt that makes the stand-in host perform ``steps``."""
    return json.dumps({"actions": list(steps)})


class StandinHost:
    """Runs the stand-in host executable; parses its OpenCode-like events."""

    name = "standin"
    version: str | None = "1.0.0"
    ignored_changes: Sequence[str] = (".standin/runtime/**",)

    def __init__(self, *, config_file: bool = True, dialect: str = "opencode") -> None:
        self.config_file = config_file
        self.dialect = dialect
        """``opencode`` or ``claude-code``: whose normalizer reads the events it prints."""
        self.sessions = 0
        self.prepared: list[Path] = []
        self.streaming = anyio.Event()
        """Set when a session's first event arrives: its process is running."""

    async def probe(self) -> None:
        """Nothing to probe: the stand-in is always available."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Accept every ``--pass-env`` name."""

    def prepare(self, context: TrialContext) -> None:
        """Write a small host config into the sandbox (part of the baseline)."""
        self.prepared.append(context.sandbox)
        if self.config_file:
            config = context.sandbox / ".standin" / "config.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(json.dumps({"agent": context.agent}), encoding="utf-8")

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run the stand-in executable with the prompt on stdin."""
        self.sessions += 1
        home = context.state_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = {
            **allowed_env(extra=context.pass_env),
            "HOME": str(home),
            "ATLANTE_STANDIN_TRIAL": str(context.trial),
        }
        total = 0
        cost = 0.0

        def on_event(event: dict[str, Any]) -> None:
            nonlocal total, cost
            self.streaming.set()
            if isinstance(event.get("model"), str):
                usage.observe_model(event["model"])
            part = event.get("part")
            if event.get("type") == "step_finish" and isinstance(part, dict):
                tokens = part.get("tokens", {})
                if isinstance(tokens, dict) and isinstance(tokens.get("total"), int):
                    total += tokens["total"]
                    usage.observe_tokens(total)
                if isinstance(part.get("cost"), int | float):
                    cost += float(part["cost"])
                    usage.observe_cost(cost)

        # A private copy: under --isolation os the test tree is not visible to the session.
        script = context.state_dir / SCRIPT.name
        shutil.copyfile(SCRIPT, script)
        result = await run_json_stream(
            [sys.executable, str(script)],
            cwd=context.sandbox,
            env=env,
            on_event=on_event,
            stdin=context.prompt.encode(),
            transcript=context.transcript,
            normalizer=self._normalizer(),
        )
        if result.spawn_error:
            return SessionEnd(error=f"could not run the standin host: {result.spawn_error}")
        if result.returncode != 0:
            status = result.exit if result.exit is not None else result.signal_name
            tail = result.stderr.strip()[-2000:] or "no stderr output"
            return SessionEnd(error=f"standin run exited {status}: {tail}")
        return SessionEnd()

    def _normalizer(self) -> Normalizer:
        if self.dialect == "claude-code":
            return ClaudeNormalizer(version=self.version)
        return OpenCodeNormalizer(version=self.version, host=self.name)
