"""One trial's confinements under ``os`` isolation, its proxies, and what they denied.

Three phases, three policies (docs/isolation.md):

* ``session`` (the host): the sandbox and state directory writable; network
  through the filtering proxy to the host's model endpoints, the provider URLs
  its environment configures, and ``eval.network.allow``;
* ``setup``: the same files; network to ``eval.network.allow`` only (none when
  the list is empty);
* ``check`` (command checks): the same files; no network at all.
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
from ..report import DeniedAccess
from ..trial import SpawnWrapper
from .bwrap import FORWARDER_PORT, Confinement, NetworkAccess
from .proxy import FilterProxy, serve_proxy

__all__ = ["IsolationSettings", "Phase", "TrialIsolation", "open_trial_isolation"]

Phase = Literal["session", "setup", "check"]
_MAX_SOCKET_PATH = 100


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
    ) -> None:
        self.settings = settings
        self.root = root
        self.state = state
        self.proxy = proxy
        self.learn = learn

    def __call__(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
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
        )
        return confine(argv, cwd, env)


class TrialIsolation:
    """The confinements of one trial and the destinations its proxies refused."""

    def __init__(
        self,
        settings: IsolationSettings,
        session: tuple[FilterProxy, Path],
        setup: tuple[FilterProxy, Path] | None,
    ) -> None:
        self.settings = settings
        self._session = session
        self._setup = setup

    def wrapper(self, phase: Phase, root: Path, state: Path) -> SpawnWrapper:
        """The spawn wrapper confining ``phase`` to the sandbox ``root`` and ``state``."""
        proxy = {"session": self._session, "setup": self._setup, "check": None}[phase]
        return _Wrapper(self.settings, root, state, proxy, learn=phase == "session")

    def denied(self) -> list[DeniedAccess]:
        """Refused destinations, per phase, in a stable order."""
        found: list[DeniedAccess] = []
        phases: tuple[tuple[Literal["session", "setup"], tuple[FilterProxy, Path] | None], ...]
        phases = (("session", self._session), ("setup", self._setup))
        for phase, pair in phases:
            if pair is None:
                continue
            for target, count in sorted(pair[0].denied.items()):
                found.append(DeniedAccess(phase=phase, kind="network", target=target, count=count))
        return found


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
    settings: IsolationSettings, run_root: Path
) -> AsyncIterator[TrialIsolation]:
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
            yield TrialIsolation(
                settings,
                (session, session_path),
                (setup, setup_path) if setup is not None else None,
            )
    finally:
        for path in (session_path, setup_path):
            path.unlink(missing_ok=True)
        if owned:
            directory.rmdir()
