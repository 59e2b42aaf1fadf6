"""The one session of a built-in host: what every CLI host shares, and what each supplies.

:meth:`CliHost.run_session` is the same steps for every built-in host:

1. build the command line (:meth:`~CliHost.argv`) and the environment
   (:meth:`~CliHost.session_env`);
2. hand the trial's redactor and the transcript writer the values they must
   redact (:meth:`~CliHost.session_secrets`);
3. run the CLI with the prompt on stdin through
   :func:`~atlante_eval.hosts.base.run_json_stream` (its own process group, swept
   on the way out), feeding each JSON event to the host's stream parser
   (:meth:`~CliHost.stream_parser`) and each line to the transcript writer
   through the host's normalizer (:meth:`~CliHost.normalizer`);
4. tell the stream parser the stream ended (what came after its final result is
   tampering evidence), and judge how the session ended
   (:meth:`~CliHost.session_end`, by default
   :func:`~atlante_eval.hosts.streams.close_session`).

The engine owns time and budgets: the stream parser reports usage into the
:class:`~atlante_eval.hosts.base.SessionUsage` it is given, which cancels the
session as soon as ``maxTokens`` is exceeded, and the engine cancels it on the
trial's timeout; :func:`~atlante_eval.trial.run_process` then ends the process
group in order. A host therefore supplies only what differs between hosts.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._util.endpoints import Endpoint
from ..trial import ProcessResult
from .base import SessionEnd, SessionUsage, StreamParser, TrialContext, run_json_stream
from .streams import close_session

if TYPE_CHECKING:
    from ..transcript import Normalizer

__all__ = ["CliHost"]


class CliHost(abc.ABC):
    """What the built-in hosts share: an executable, a parent environment, the session.

    Subclasses set ``_path`` and ``_version`` in :meth:`probe`, and supply the
    abstract methods below; :meth:`run_session` is theirs unchanged.
    """

    #: The host's command name in messages (``claude``, ``opencode``).
    command: str
    #: The model-provider endpoints the host reaches by default: under
    #: ``--isolation os`` its sessions may reach them (docs/isolation.md).
    model_endpoints: tuple[Endpoint, ...] = ()

    def __init__(self, binary: str, *, env: Mapping[str, str] | None = None) -> None:
        """Create an unprobed host.

        Args:
            binary: the executable, looked up on PATH unless it is a path.
            env: the parent environment to use instead of ``os.environ`` (tests).
        """
        self._binary = binary
        self._env = env
        self._path: str | None = None
        self._version: str | None = None

    @property
    def version(self) -> str | None:
        """The probed version."""
        return self._version

    def check_pass_env(self, pass_env: Sequence[str]) -> None:  # noqa: B027 - a default, not a hook
        """Accept every ``--pass-env`` name (hosts that refuse some override this)."""

    @property
    def executable(self) -> str | None:
        """The absolute path of the probed executable."""
        return self._path

    def _parent_env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    @abc.abstractmethod
    def argv(self, context: TrialContext) -> list[str]:
        """Return the command line of one trial (the prompt goes on stdin)."""

    @abc.abstractmethod
    def session_env(self, context: TrialContext) -> dict[str, str]:
        """Return the environment of one trial's session (creating its private dirs)."""

    @abc.abstractmethod
    def stream_parser(self, usage: SessionUsage) -> StreamParser:
        """Return a fresh parser of the host's event stream, reporting into ``usage``."""

    @abc.abstractmethod
    def normalizer(self, context: TrialContext) -> Normalizer:
        """Return a fresh reader of the host's events as transcript entries."""

    @abc.abstractmethod
    def session_secrets(self, context: TrialContext, env: Mapping[str, str]) -> list[str]:
        """Return the values the session's transcript must never store.

        Args:
            context: the trial.
            env: the session's environment, as :meth:`session_env` built it.
        """

    def session_end(self, result: ProcessResult, stream: StreamParser) -> SessionEnd:
        """Judge how the session's process ended, given what its stream reported."""
        return close_session(self.command, result, host_error=stream.error)

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run the host's CLI in the sandbox, streaming usage into ``usage``."""
        argv = self.argv(context)
        env = self.session_env(context)
        stream = self.stream_parser(usage)
        secrets = self.session_secrets(context, env)
        if context.redact is not None:
            context.redact.add(secrets)
        if context.transcript is not None:
            context.transcript.add_secrets(secrets)
        result = await run_json_stream(
            argv,
            cwd=context.sandbox,
            env=env,
            on_event=stream.feed,
            stdin=context.prompt.encode("utf-8"),
            transcript=context.transcript,
            normalizer=self.normalizer(context),
            on_tamper=usage.tamper,
        )
        stream.finish()
        return self.session_end(result, stream)
