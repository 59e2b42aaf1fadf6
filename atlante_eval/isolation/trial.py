"""One trial's confinements under ``os`` isolation, its proxies, its limits, and what they denied.

Three phases, three policies (docs/isolation.md):

* ``session`` (the host): the sandbox and state directory writable; network
  through the filtering proxy to the host's model endpoints, the provider URLs
  its environment configures, and ``eval.network.allow``;
* ``setup``: the same files; network to ``eval.network.allow`` only (none when
  the list is empty);
* ``check`` (command checks): the same files; no network at all.

With resource limits (:mod:`.limits`), under ``os`` or ``none``, every phase's
processes also join the trial's control group, and what they reach is recorded.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .._util.endpoints import Endpoint, endpoints_in_env, parse_endpoint
from .._util.errors import sole_error
from ..report import DeniedAccess, TrialResult
from ..trial import SpawnPlan, SpawnWrapper
from .bwrap import FORWARDER_PORT, Confinement, NetworkAccess
from .limits import LimitSettings, TrialLimits, limited, open_trial_limits, with_limits
from .proxy import FilterProxy, serve_proxy

__all__ = ["IsolationSettings", "Phase", "TrialIsolation", "open_trial_isolation"]

Phase = Literal["session", "setup", "check"]
_MAX_SOCKET_PATH = 100
_Proxies = tuple[tuple[FilterProxy, Path], tuple[FilterProxy, Path] | None]


@dataclass(frozen=True, slots=True)
class IsolationSettings:
    """How a run isolates its trials under ``os`` (built once the preflight passed)."""

    bwrap: str
    """The ``bwrap`` executable the preflight proved."""
    endpoints: tuple[Endpoint, ...]
    """The host's model endpoints, which its sessions may reach (``hosts.model_endpoints``)."""
    allow: tuple[Endpoint, ...] = ()
    """``eval.network.allow``."""

    @classmethod
    def build(
        cls, bwrap: str, endpoints: Sequence[Endpoint], allow: Sequence[str]
    ) -> IsolationSettings:
        """Settings with ``allow`` entries parsed (validated with the project)."""
        return cls(
            bwrap=bwrap, endpoints=tuple(endpoints), allow=tuple(parse_endpoint(a) for a in allow)
        )


class _Wrapper:
    """A :data:`SpawnWrapper` for one phase; session wrappers learn provider URLs from env."""

    def __init__(
        self,
        settings: IsolationSettings,
        root: Path,
        state: Path,
        proxy: tuple[FilterProxy, Path] | None,
        *,
        learn: bool,
        tmp_bytes: int | None = None,
        hidden: tuple[Path, ...] = (),
    ) -> None:
        self.settings = settings
        self.root = root
        self.state = state
        self.proxy = proxy
        self.learn = learn
        self.tmp_bytes = tmp_bytes
        self.hidden = hidden

    def __call__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        network: NetworkAccess | None = None
        if self.proxy is not None:
            proxy, socket = self.proxy
            if self.learn:
                proxy.allow |= frozenset(endpoints_in_env(env))
            ports = sorted({e.port for e in proxy.allow if e.loopback and e.port != FORWARDER_PORT})
            network = NetworkAccess(socket=socket, loopback_ports=tuple(ports))
        confine = Confinement(
            bwrap=self.settings.bwrap,
            state_dir=self.state,
            writable=(self.root, self.state),
            network=network,
            tmp_bytes=self.tmp_bytes,
            hidden=self.hidden,
        )
        return confine(argv, cwd, env)


class _Limited:
    """A :data:`SpawnWrapper` that runs a phase inside the trial's limits (then or not confined)."""

    def __init__(self, limits: TrialLimits, phase: Phase, confine: _Wrapper | None) -> None:
        self.limits = limits
        self.phase = phase
        self.confine = confine

    def __call__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        if self.confine is None:
            return self.limits.plan(self.phase, argv, cwd, env, confined=False)
        confined = self.confine(argv, cwd, env)
        limited = self.limits.plan(self.phase, confined.argv, cwd, confined.env, confined=True)
        return _joined(confined, limited)


def _joined(inner: SpawnPlan, outer: SpawnPlan) -> SpawnPlan:
    """``outer`` (the limits around a confinement) keeping ``inner``'s descriptors and steps."""

    def after_spawn(pid: int) -> None:
        for plan in (inner, outer):
            if plan.after_spawn is not None:
                plan.after_spawn(pid)

    def after_exit() -> None:
        try:
            if inner.after_exit is not None:
                inner.after_exit()
        finally:
            if outer.after_exit is not None:
                outer.after_exit()

    return SpawnPlan(
        outer.argv,
        outer.env,
        pass_fds=(*inner.pass_fds, *outer.pass_fds),
        after_spawn=after_spawn,
        after_exit=after_exit,
        confined=True,
    )


class TrialIsolation:
    """The confinements and limits of one trial, and what its proxies refused."""

    def __init__(
        self,
        settings: IsolationSettings | None,
        proxies: _Proxies | None,
        limits: TrialLimits | None = None,
        *,
        run_root: Path | None = None,
    ) -> None:
        self.settings = settings
        self._proxies = proxies
        self.limits = limits
        self.run_root = run_root
        """Every trial's sandbox is below it: nothing is ever bound from it."""

    def wrapper(self, phase: Phase, root: Path, state: Path) -> SpawnWrapper:
        """The spawn wrapper confining ``phase`` to the sandbox ``root`` and ``state``."""
        confine: _Wrapper | None = None
        if self.settings is not None and self._proxies is not None:
            session, setup = self._proxies
            proxy = {"session": session, "setup": setup, "check": None}[phase]
            tmp = self.limits.tmp_bytes if self.limits is not None else None
            hidden = (self.run_root,) if self.run_root is not None else ()
            confine = _Wrapper(
                self.settings,
                root,
                state,
                proxy,
                learn=phase == "session",
                tmp_bytes=tmp,
                hidden=hidden,
            )
        if self.limits is not None:
            return _Limited(self.limits, phase, confine)
        assert confine is not None, "a trial isolation confines, limits, or both"
        return confine

    def denied(self) -> list[DeniedAccess]:
        """Refused destinations, per phase, in a stable order."""
        found: list[DeniedAccess] = []
        if self._proxies is None:
            return found
        phases: tuple[tuple[Literal["session", "setup"], tuple[FilterProxy, Path] | None], ...]
        phases = (("session", self._proxies[0]), ("setup", self._proxies[1]))
        for phase, pair in phases:
            if pair is None:
                continue
            for target, count in sorted(pair[0].denied.items()):
                found.append(DeniedAccess(phase=phase, kind="network", target=target, count=count))
        return found

    def settle(self, result: TrialResult) -> TrialResult:
        """``result`` with what the trial's isolation refused and the limits it reached."""
        if denied := self.denied():
            omitted = self.denied_omitted() or None
            result = result.model_copy(update={"denied": denied, "denied_omitted": omitted})
        if self.limits is not None:
            result = with_limits(result, self.limits.reached())
        return result

    def denied_omitted(self) -> int:
        """Refusals :meth:`denied` leaves out (destinations past the proxies' caps)."""
        if self._proxies is None:
            return 0
        return sum(pair[0].denied_omitted for pair in self._proxies if pair is not None)


def _socket_dir(run_root: Path) -> tuple[Path, bool]:
    """A private directory for the trial's proxy sockets (short enough for AF_UNIX).

    Returns the directory and whether it is the trial's own (to remove afterwards)
    rather than the run root's ``net/``.
    """
    base = run_root / "net"
    if len(str(base)) + 40 <= _MAX_SOCKET_PATH:
        base.mkdir(mode=0o700, exist_ok=True)
        return base, False
    short = "/tmp" if Path("/tmp").is_dir() else None  # noqa: S108 - a short path for AF_UNIX
    return Path(tempfile.mkdtemp(prefix="atlante-net-", dir=short)), True


@contextlib.asynccontextmanager
async def open_trial_isolation(
    settings: IsolationSettings | None, limits: LimitSettings | None, run_root: Path
) -> AsyncIterator[TrialIsolation | None]:
    """The trial's isolation for the block: its limits' group and, under ``os``, its proxies.

    Yields ``None`` when the run neither confines nor limits its trials. This is
    the isolation layer's boundary: an error inside its block (a failed setup, a
    full disk) or from its proxies leaves it as itself, never wrapped in the
    exception group of the task groups that serve the proxies
    (:func:`~atlante_eval._util.errors.sole_error`).

    Raises:
        SandboxError: the trial's control group could not be created.
        ProxyError: a proxy could not listen, or stopped accepting connections.
    """
    if settings is None and not limited(limits):
        yield None
        return
    try:
        async with contextlib.AsyncExitStack() as stack:
            trial_limits = None
            if limited(limits):
                trial_limits = await stack.enter_async_context(open_trial_limits(limits))
            proxies = None
            if settings is not None:
                proxies = await stack.enter_async_context(_proxies(settings, run_root))
            yield TrialIsolation(settings, proxies, trial_limits, run_root=run_root)
    except BaseExceptionGroup as group:
        cause = sole_error(group)
        if cause is group:
            raise
        raise cause from None


@contextlib.asynccontextmanager
async def _proxies(settings: IsolationSettings, run_root: Path) -> AsyncIterator[_Proxies]:
    """Start the trial's proxies (session, and setup when ``allow`` is set) for the block."""
    directory, owned = _socket_dir(run_root)
    token = secrets.token_hex(8)
    session_allow = (*settings.endpoints, *settings.allow)
    session_path = directory / f"{token}-s.sock"
    setup_path = directory / f"{token}-u.sock"
    try:
        async with contextlib.AsyncExitStack() as stack:
            session = await stack.enter_async_context(
                serve_proxy(FilterProxy(session_allow), session_path)
            )
            setup = None
            if settings.allow:
                setup = await stack.enter_async_context(
                    serve_proxy(FilterProxy(settings.allow), setup_path)
                )
            yield (session, session_path), (setup, setup_path) if setup is not None else None
    finally:
        for path in (session_path, setup_path):
            path.unlink(missing_ok=True)
        if owned:
            directory.rmdir()
