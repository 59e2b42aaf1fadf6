"""The host seam: what the engine needs from a host, and usage accounting.

A host turns one prepared sandbox and a prompt into one agent session. The engine
owns time and budgets: it runs :meth:`Host.run_session` inside a cancel scope for
the trial's timeout and another for its token budget, which
:class:`SessionUsage` cancels as soon as the observed cumulative usage exceeds
``maxTokens``. A host only streams events into :class:`SessionUsage` and reports
how its process ended.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._util.endpoints import Endpoint
from ..choices import TOKEN_CEILING
from ..project import NativeOutputs, Scenario
from ..report import TamperEvidence, TamperKind, model_version_of
from ..trial import ProcessResult, run_process
from .framing import EventFraming, TamperSink

if TYPE_CHECKING:
    from ..transcript import Normalizer, Redactor, TranscriptWriter

__all__ = [
    "COST_CEILING",
    "TAMPER_LIMIT",
    "DeclaresModelEndpoints",
    "Host",
    "HostError",
    "ModelRoute",
    "SessionEnd",
    "SessionUsage",
    "StreamParser",
    "TrialContext",
    "model_endpoints",
    "model_version_of",
    "run_json_stream",
    "secret_values",
]


#: The largest cost magnitude (USD) a session records.
COST_CEILING = 1e12
#: Most pieces of tampering evidence a trial keeps (the rest are counted).
TAMPER_LIMIT = 20
#: Longest detail text of one piece of tampering evidence.
_DETAIL_CHARS = 300


class HostError(Exception):
    """Raised by :meth:`Host.prepare` when a trial's sandbox cannot be prepared.

    The engine records the message as the trial's ``infra-error``.
    """


@runtime_checkable
class ModelRoute(Protocol):
    """A trial's way to its model through the engine's gateway (docs/gateway.md).

    The engine opens one per trial when the gateway is on and hands it to the host
    on :attr:`TrialContext.gateway`. A host that can route its CLI points it at
    :attr:`base_url` (the provider path is appended below it), names the real
    provider URL with :meth:`bind` and gives the sandbox :meth:`stand_in` tokens
    instead of its API keys; a host that cannot says why with :meth:`decline`. A
    host that does neither calls its provider directly, and the trial's figures
    are the host's own (``usage.source: host``).
    """

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/t/<trial token>``: what the host's CLI calls instead."""
        ...

    @property
    def bound(self) -> bool:
        """Whether :meth:`bind` was called."""
        ...

    def bind(self, upstream: str) -> None:
        """Forward the trial's model calls to ``upstream`` (the provider's base URL)."""
        ...

    def decline(self, reason: str) -> None:
        """Say why the host calls its provider directly (kept in the trial's ``usage``)."""
        ...

    def stand_in(self, credential: str) -> str:
        """Return the per-trial token the sandbox gets instead of ``credential``."""
        ...


@dataclass(frozen=True, slots=True)
class TrialContext:
    """Everything a host needs for one trial."""

    scenario: Scenario
    trial: int
    """0-based trial index."""
    sandbox: Path
    """The sandbox root: the agent's working directory."""
    state_dir: Path
    """A private directory for the host's HOME, XDG dirs, credentials and temp files."""
    native: NativeOutputs
    """The verified native outputs written into the sandbox."""
    model: str | None
    """``eval.model``, if set."""
    pass_env: tuple[str, ...] = ()
    """Extra parent variables the user allowed through (``--pass-env``)."""
    project_root: Path | None = None
    """The project root (OpenCode picks its sandbox config path from the project's)."""
    transcript: TranscriptWriter | None = None
    """Where the session's lines and normalized entries go (``None``: not recorded).

    A host hands it to :func:`run_json_stream` with the normalizer of its dialect,
    and first tells it the values to redact (:meth:`TranscriptWriter.add_secret_env`).
    """
    redact: Redactor | None = None
    """The trial's redactor (``None``: none): a host adds the values its session must
    never leak (its stored credentials too), and the engine removes them from every
    field of the trial's report entry."""
    gateway: ModelRoute | None = None
    """The trial's route through the engine's model gateway (``None``: the gateway is off)."""

    @property
    def prompt(self) -> str:
        """The scenario's prompt."""
        return self.scenario.document.task.prompt

    @property
    def agent(self) -> str | None:
        """The scenario's agent, if any."""
        return self.scenario.document.task.agent


class SessionUsage:
    """Token, cost and model identity observed while a host session streams.

    ``on_exceeded`` is called once, as soon as an observed cumulative token count is
    strictly greater than ``max_tokens``; the engine passes a cancel-scope's
    ``cancel`` so the session ends at once.

    The figures only ever grow: a cumulative value lower than the one recorded (a
    forged or stale event) is ignored, and a negative one is ignored and kept as
    tampering evidence, so nothing an agent writes into the host's stream can lower
    what the session spent or switch the budget off.
    """

    def __init__(self, max_tokens: int, on_exceeded: Callable[[], None] | None = None) -> None:
        self.max_tokens = max_tokens
        self._on_exceeded = on_exceeded
        self.tokens: int | None = None
        self.cost: float | None = None
        self.model: str | None = None
        self.model_version: str | None = None
        self.exceeded = False
        self.evidence: dict[str, Any] = {}
        self.tampered: list[TamperEvidence] = []
        """Signs the host's stream was written to by someone else (at most :data:`TAMPER_LIMIT`)."""
        self.tampered_omitted = 0
        """How many more signs were seen than :attr:`tampered` keeps."""

    def observe_tokens(self, cumulative: int) -> None:
        """Record the session's cumulative token count so far.

        A magnitude beyond :data:`TOKEN_CEILING` (only a broken or hostile stream
        reports one) is recorded as the ceiling, so it still exceeds any real budget
        and every statistic over it stays a finite float. A count lower than the
        one recorded is ignored; a negative one is tampering evidence.
        """
        if cumulative < 0:
            self.tamper("negative-usage", f"a cumulative token count of {cumulative}")
            return
        cumulative = min(cumulative, TOKEN_CEILING)
        if self.tokens is not None and cumulative <= self.tokens:
            return
        self.tokens = cumulative
        if cumulative > self.max_tokens and not self.exceeded:
            self.exceeded = True
            if self._on_exceeded is not None:
                self._on_exceeded()

    def observe_cost(self, cumulative: float) -> None:
        """Record the session's cumulative cost (USD) so far.

        A non-finite value is ignored and a magnitude beyond :data:`COST_CEILING` is
        recorded as the ceiling, so sums and means over trials stay finite. A cost
        lower than the one recorded is ignored; a negative one is tampering evidence.
        """
        if not math.isfinite(cumulative):
            return
        if cumulative < 0:
            self.tamper("negative-usage", f"a cumulative cost of {cumulative} USD")
            return
        cumulative = min(cumulative, COST_CEILING)
        if self.cost is None or cumulative > self.cost:
            self.cost = cumulative

    def observe_model(self, model: str, version: str | None = None) -> None:
        """Record the model identity, if none was recorded yet."""
        if self.model is None:
            self.model = model
            self.model_version = version if version is not None else model_version_of(model)

    def tamper(self, kind: TamperKind, detail: str, line: int | None = None) -> None:
        """Keep one sign that the host's stream was tampered with (counted past the cap)."""
        if len(self.tampered) >= TAMPER_LIMIT:
            self.tampered_omitted += 1
            return
        text = detail if len(detail) <= _DETAIL_CHARS else f"{detail[:_DETAIL_CHARS]}…"
        self.tampered.append(TamperEvidence(kind=kind, detail=text, line=line))


@dataclass(frozen=True, slots=True)
class SessionEnd:
    """How a host session ended, as the host judged it."""

    error: str | None = None
    """``None`` when the session completed; otherwise the ``infra-error`` text."""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """Extra facts for the trial's report entry (e.g. permission denials)."""


@runtime_checkable
class Host(Protocol):
    """A coding-agent host the engine can run trials on."""

    @property
    def name(self) -> str:
        """Host name recorded as ``meta.host``."""
        ...

    @property
    def version(self) -> str | None:
        """Host version found by :meth:`probe` (``None`` if unknown)."""
        ...

    @property
    def ignored_changes(self) -> Sequence[str]:
        """Globs of the host's own runtime artefacts that ``diff-allowlist`` ignores."""
        ...

    async def probe(self) -> None:
        """Check the host can run (version, credentials) once per run.

        Raises:
            DiagnosticError: with a run-level code (exit 3).
        """
        ...

    def prepare(self, context: TrialContext) -> None:
        """Write the host's configuration and credentials for one trial.

        Files written inside the sandbox become part of the baseline.

        Raises:
            HostError: the trial cannot run (e.g. a fixture file collides).
        """
        ...

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        """Refuse ``--pass-env`` names this host would refuse for every trial.

        The run calls it once, before any trial (``invalid-option``, exit 2); a host
        that accepts every name does nothing.

        Raises:
            HostError: naming the refused variable.
        """
        ...

    async def run_session(self, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        """Run one agent session in ``context.sandbox``, streaming usage into ``usage``.

        Must be cancellable at any point: the engine cancels it for timeouts and
        token budgets, and the host's processes must be gone when it returns.
        """
        ...


@runtime_checkable
class DeclaresModelEndpoints(Protocol):
    """A host that names the model-provider endpoints its sessions reach by default."""

    model_endpoints: tuple[Endpoint, ...]
    """Under ``--isolation os`` a session may reach these (docs/isolation.md)."""


def model_endpoints(host: Host) -> tuple[Endpoint, ...]:
    """Return the model-provider endpoints ``host`` declares (none when it declares none).

    Every built-in host declares its own (``tests/test_registries.py`` fails for one
    that does not); a custom or stand-in host without ``model_endpoints`` reaches
    only the provider URLs its session's environment names and ``eval.network.allow``.
    """
    return tuple(host.model_endpoints) if isinstance(host, DeclaresModelEndpoints) else ()


class StreamParser(Protocol):
    """Reads one host's decoded JSON events into a :class:`SessionUsage`, with no I/O."""

    usage: SessionUsage
    error: str | None
    """The first error the stream reported, summarised (``None``: none)."""

    def feed(self, event: Mapping[str, Any]) -> None:
        """Account for one event."""
        ...

    def finish(self) -> None:
        """Account for the end of the stream (e.g. keep what came after its final result)."""
        ...


#: Variable names whose values are treated as secrets wherever they appear.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)


def secret_values(
    env: Mapping[str, str], *, credentials: Sequence[str] = (), pass_env: Sequence[str] = ()
) -> list[str]:
    """Return the values a session's transcript must never store.

    These are the credential variables the host received, the ``--pass-env``
    variables, and any variable whose name says it is a secret (``*KEY*``,
    ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``*CREDENTIAL*``, ``*AUTH*``, ``*COOKIE*``).
    """
    names = {*credentials, *pass_env, *(n for n in env if SECRET_NAME.search(n))}
    return [env[name] for name in sorted(names) if env.get(name)]


async def run_json_stream(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_event: Callable[[dict[str, Any]], None],
    stdin: bytes | None = None,
    capture_bytes: int = 64 * 1024,
    transcript: TranscriptWriter | None = None,
    normalizer: Normalizer | None = None,
    on_tamper: TamperSink | None = None,
) -> ProcessResult:
    """Run a host process and hand each JSON-object line of its stdout to ``on_event``.

    Lines that are not JSON objects are ignored, except that a host event glued
    behind foreign bytes (or behind an over-long line) is recovered and reported to
    ``on_tamper`` (:class:`~atlante_eval.hosts.framing.EventFraming`). Errors inside
    ``on_event`` are not swallowed. With a ``transcript`` and a ``normalizer``,
    every line also goes to the transcript as it arrives (the raw stream keeps
    non-JSON lines too), and what the normalizer still holds is written when the
    process ends or is cancelled.
    """
    record = transcript if normalizer is not None else None
    framing = EventFraming(on_tamper)

    def deliver(line: str, found: tuple[str, dict[str, Any]] | None) -> None:
        if record is not None and normalizer is not None:
            if found is not None and found[0] != line:
                # The foreign bytes in front of a recovered event: in the raw stream only.
                record.line(line[: len(line) - len(found[0])], normalizer, None)
            record.line(found[0] if found else line, normalizer, found[1] if found else None)
        if found is not None:
            on_event(found[1])

    def on_line(line: str) -> bool:
        deliver(line, framing.decode(line))
        return False

    def on_overlong(tail: bytes) -> None:
        found = framing.overlong(tail)
        if found is not None:
            deliver(found[0], found)

    try:
        return await run_process(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            on_line=on_line,
            capture_bytes=capture_bytes,
            sweep=True,  # an agent's daemons must not outlive its session
            on_overlong=on_overlong,
        )
    finally:
        if record is not None and normalizer is not None:
            record.finish(normalizer)
