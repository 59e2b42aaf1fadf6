"""Build the bubblewrap command line that confines one process tree.

The confined tree gets new user, mount, PID, IPC, UTS, cgroup and network
namespaces. Its file system is a fresh root holding only: the system
directories read-only (``/usr``, the ``/bin``-style links, ``/etc`` without its
secrets), a private ``/proc``, ``/dev`` and ``/tmp``, the paths a
:class:`Confinement` makes writable (the trial's sandbox and state directory),
and read-only the install directory of the program run (so a host CLI installed
under a home directory or ``node_modules`` still starts). Everything else (the
user's home, the project, other trials, the rest of ``/tmp``) does not exist
inside. Every path keeps its absolute name, so configuration written for the
sandbox stays valid.

With a :class:`NetworkAccess`, the only way out of the empty network namespace
is a forwarder started inside: it listens on ``127.0.0.1`` (an HTTP proxy port
and each allowed loopback port) and relays to the engine's filtering proxy
through a Unix socket bind-mounted in.

Every confined tree runs under the seccomp filter of :mod:`.seccomp` (no
``ptrace``, no ``process_vm_readv``/``process_vm_writev``): bubblewrap reads the
compiled program from a pipe the spawned command inherits (``--seccomp FD``).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..trial import SpawnPlan
from .seccomp import filter_program

__all__ = [
    "FORWARDER_PORT",
    "TOOLCHAINS",
    "Confinement",
    "NetworkAccess",
    "executable_inside",
    "install_roots",
    "toolchain_roots",
]

#: Port of the in-sandbox HTTP proxy (``HTTP_PROXY``/``HTTPS_PROXY``).
FORWARDER_PORT = 3128
#: Where the engine's proxy socket appears inside the sandbox.
_INNER_SOCKET = "/run/atlante/proxy.sock"
_FORWARDER = Path(__file__).with_name("forwarder.py")
#: Directories the system is read from, bound read-only when they exist.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: ``/etc`` entries that hold secrets even a root-run engine must not expose.
_ETC_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
#: Prefixes already visible read-only: nothing to bind for a program under them.
_VISIBLE = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/")
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")
#: Environment variables pointing at per-user directories; redirected when outside.
_DIR_VARS = {
    "HOME": "home",
    "TMPDIR": "tmp",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_CACHE_HOME": "cache",
    "XDG_STATE_HOME": "state",
    "XDG_RUNTIME_DIR": "run",
}


@dataclass(frozen=True, slots=True)
class NetworkAccess:
    """How a confined tree reaches the engine's filtering proxy."""

    socket: Path
    """The proxy's Unix socket on the host."""
    loopback_ports: tuple[int, ...] = ()
    """Allowed ``127.0.0.1`` ports, forwarded to the same port on the host."""


@dataclass(frozen=True, slots=True)
class Confinement:
    """One phase's confinement: what is writable, readable and reachable."""

    bwrap: str
    """Absolute path of the ``bwrap`` executable."""
    state_dir: Path
    """The trial's private state directory (HOME, TMPDIR... live under it)."""
    writable: tuple[Path, ...]
    """Paths bound read-write (the sandbox, the state directory)."""
    readonly: tuple[Path, ...] = ()
    """Extra paths bound read-only."""
    network: NetworkAccess | None = None
    """``None``: no network at all (only an empty loopback)."""
    tmp_bytes: int | None = None
    """Size of each private tmpfs (``/tmp``, ``/var``, ``/run``, ``/dev/shm``); ``None``:
    the kernel's default (half the machine's memory)."""
    hidden: tuple[Path, ...] = ()
    """Trees beyond ``writable`` that nothing is bound from (the run root: every
    trial's sandbox); like the writable paths, their files never widen the view."""
    _python: tuple[str, tuple[Path, ...]] = field(default_factory=lambda: _forwarder_python())

    def __call__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> SpawnPlan:
        """Return the bubblewrap command that runs ``argv`` confined.

        Its ``pass_fds`` holds the pipe bubblewrap reads the seccomp filter from; the
        plan closes it once the child started, or could not.
        """
        child_env = self._environment(env)
        program = _resolve(argv[0], env.get("PATH", os.defpath), cwd) if argv else None
        if program is None or not os.path.exists(program):
            name = argv[0] if argv else ""
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
        untrusted = (*self.writable, *self.hidden)
        readonly = list(self.readonly)
        for path in (
            *install_roots(program, untrusted=untrusted),
            *toolchain_roots(env, untrusted=untrusted),
        ):
            if path not in readonly:
                readonly.append(path)
        inner = list(argv)
        if self.network is not None:
            python, roots = self._python
            readonly.extend(r for r in roots if r not in readonly)
            readonly.append(_FORWARDER)
            forward = [
                python,
                "-I",
                "-S",
                str(_FORWARDER),
                _INNER_SOCKET,
                str(FORWARDER_PORT),
                ",".join(str(p) for p in self.network.loopback_ports),
                "--",
            ]
            inner = forward + inner
        outer = [self.bwrap, *self._namespaces(), *self._mounts(readonly)]
        if self.network is not None:
            outer += ["--bind", str(self.network.socket), _INNER_SOCKET]
        outer += ["--remount-ro", "/", "--chdir", str(cwd)]
        if os.path.isabs(argv[0]) or "/" not in argv[0]:
            inner[len(inner) - len(argv)] = executable_inside(program, untrusted=untrusted)
        seccomp = _seccomp_pipe()
        if seccomp is not None:
            outer += ["--seccomp", str(seccomp)]
        command = [*outer, "--", *inner]
        if seccomp is None:
            return SpawnPlan(command, child_env)
        close = _Closer(seccomp)
        return SpawnPlan(
            command,
            child_env,
            pass_fds=(seccomp,),
            after_spawn=lambda _pid: close(),  # the child holds its own copy
            after_exit=close,  # also when it could not start
        )

    def _namespaces(self) -> list[str]:
        return [
            "--unshare-user",
            "--disable-userns",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
            "--unshare-cgroup-try",
            "--hostname",
            "atlante-sandbox",
            "--die-with-parent",
            "--new-session",
        ]

    def _mounts(self, readonly: Sequence[Path]) -> list[str]:
        args: list[str] = []
        for name in _SYSTEM:
            if os.path.islink(name):
                args += ["--symlink", os.readlink(name), name]
            elif os.path.isdir(name):
                args += ["--ro-bind", name, name]
        args += ["--ro-bind", "/etc", "/etc"]
        for secret in _ETC_SECRETS:
            if os.path.isdir(secret) and not os.path.islink(secret):
                args += ["--tmpfs", secret, "--remount-ro", secret]
            elif os.path.lexists(secret):
                args += ["--ro-bind", os.devnull, secret]
        # Mount points inside the new root, not files the engine creates.
        args += ["--proc", "/proc", "--dev", "/dev"]
        for mount in ("/tmp", "/run", "/var", "/dev/shm"):  # noqa: S108 - tmpfs.TMPFS_MOUNTS
            args += [*self._size(), "--tmpfs", mount]
        args += ["--dir", "/var/tmp"]  # noqa: S108
        for path in readonly:
            if os.path.lexists(path):
                args += ["--ro-bind", str(path), str(path)]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        return args

    def _size(self) -> list[str]:
        """The ``--size`` option for the next ``--tmpfs`` (none without a size)."""
        return [] if self.tmp_bytes is None else ["--size", str(self.tmp_bytes)]

    def _environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with per-user directories inside the sandbox and the proxy set (or unset)."""
        result = dict(env)
        for name, relative in _DIR_VARS.items():
            value = result.get(name)
            if value is None and name not in ("HOME", "TMPDIR"):
                continue
            if value is None or not self._is_writable(Path(value)):
                target = self.state_dir / relative
                target.mkdir(parents=True, exist_ok=True)
                result[name] = str(target)
        for name in _PROXY_VARS:
            result.pop(name, None)
        if self.network is not None:
            proxy = f"http://127.0.0.1:{FORWARDER_PORT}"
            for name in _PROXY_VARS[:4]:
                result[name] = proxy
            result["NO_PROXY"] = result["no_proxy"] = "localhost,127.0.0.1,::1"
        return result

    def _is_writable(self, path: Path) -> bool:
        resolved = Path(os.path.abspath(path))
        return any(resolved == w or resolved.is_relative_to(w) for w in self.writable)


class _Closer:
    """Closes one descriptor, once, whichever step calls it first."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def __call__(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _seccomp_pipe() -> int | None:
    """A pipe's read end holding the seccomp filter (``None``: no filter for this machine)."""
    program = filter_program()
    if program is None:
        return None
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: the pipe's buffer takes them at once
    except OSError:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


def _resolve(program: str, search: str, cwd: Path | None = None) -> str | None:
    """The absolute path of ``program`` (looked up on ``search`` unless it has a slash)."""
    if "/" in program:
        return os.path.abspath(os.path.join(cwd or os.getcwd(), program))
    return shutil.which(program, path=search)


def _is_visible(path: str) -> bool:
    return any(path.startswith(prefix) for prefix in _VISIBLE)


def _within(path: Path, trees: Sequence[Path]) -> bool:
    return any(path == tree or path.is_relative_to(tree) for tree in trees)


def _trees(untrusted: Sequence[Path]) -> list[Path]:
    """The untrusted trees under both spellings: as given and with links resolved."""
    found: list[Path] = []
    for tree in untrusted:
        for spelling in (Path(os.path.abspath(tree)), Path(os.path.realpath(tree))):
            if spelling not in found:
                found.append(spelling)
    return found


def _bindable(root: Path, trees: Sequence[Path]) -> bool:
    """Whether binding ``root`` read-only shows nothing it must not.

    Never a path inside an untrusted tree (another trial's sandbox, the run root),
    never a directory holding one (``/tmp`` around the run root), never ``/`` and
    never a directory holding the user's home (a program directly in ``~``).
    """
    home = Path(os.path.realpath(os.path.expanduser("~")))
    if root == Path(root.anchor) or _within(root, trees):
        return False
    return not any(tree.is_relative_to(root) for tree in (*trees, home))


def _venv_of(path: str) -> Path | None:
    """The virtual environment ``path`` is a program of (``bin/`` beside ``pyvenv.cfg``).

    Only whether ``pyvenv.cfg`` exists is asked: the file is never read.
    """
    parent = Path(path).parent
    if parent.name == "bin" and (parent.parent / "pyvenv.cfg").exists():
        return parent.parent
    return None


def _venv_interpreter(venv: Path) -> str | None:
    """The resolved file the environment's own ``bin/python3`` (or ``bin/python``) link names."""
    for name in ("python3", "python"):
        link = venv / "bin" / name
        if os.path.lexists(link):
            return os.path.realpath(link)
    return None


def _root_of(real: str) -> Path:
    """The install directory that must be visible for the (resolved) program ``real`` to run.

    The outermost ``node_modules`` (a package and its siblings: platform binaries);
    a Python installation for a ``python*`` executable in ``bin/`` beside
    ``lib/python3*``; else the program's own directory only (so a binary under
    ``~/.local/share/...`` exposes its version directory, not the home).
    """
    parts = Path(real).parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules") + 1])
    parent = Path(real).parent
    if (
        parent.name == "bin"
        and Path(real).name.startswith("python")
        and any(parent.parent.glob("lib/python3*"))
    ):
        return parent.parent
    return parent


def executable_inside(program: str, *, untrusted: Sequence[Path] = ()) -> str:
    """The path to execute inside: the name as given for a venv or ``node_modules``
    program (their layout matters) and for a program in an untrusted tree (it is
    visible where it is; its links are never followed outside), else the resolved
    file (its directory alone is bound, so a link elsewhere, e.g.
    ``~/.local/bin/claude``, would not resolve)."""
    if _is_visible(program) or _within(Path(os.path.abspath(program)), _trees(untrusted)):
        return program
    if _venv_of(program) is not None or "node_modules" in Path(program).parts:
        return program
    return os.path.realpath(program)


def install_roots(program: str, *, untrusted: Sequence[Path] = ()) -> list[Path]:
    """Paths to bind read-only so ``program`` can run, decided without reading any file.

    Only what the engine resolves itself counts: the path of the program and, for a
    program outside every ``untrusted`` tree (the sandbox, the state directory, the
    run root), the file its links resolve to. Bound: a virtual environment's
    directory and its interpreter's installation (where the environment's own
    ``bin/python3`` link resolves), the outermost ``node_modules`` of a package
    program, and the install directory of the resolved file (:func:`_root_of`)
    unless it is a system path already visible. A program inside an untrusted tree
    adds nothing: the tree's files (``pyvenv.cfg``, ``#!`` lines, links) are the
    agent's or the pack's and never widen the view. No root is ever bound that
    :func:`_bindable` refuses.
    """
    trees = _trees(untrusted)
    name = Path(os.path.abspath(program))
    real = os.path.realpath(name)
    if _within(name, trees) or _within(Path(real), trees):
        return []
    candidates: list[Path] = []
    venv = _venv_of(str(name))
    if venv is not None:
        candidates.append(venv)
        base = _venv_interpreter(venv)
        if base is not None and not _is_visible(base):
            candidates.append(_root_of(base))
    if "node_modules" in name.parts:
        candidates.append(_root_of(str(name)))
    if not _is_visible(real):
        candidates.append(_root_of(real))
    roots: list[Path] = []
    for root in candidates:
        if root not in roots and _bindable(root, trees):
            roots.append(root)
    return roots


#: Interpreters a program made inside the sandbox may need (a virtual environment's
#: ``bin/python`` links to its base; a package's ``#!/usr/bin/env node``).
TOOLCHAINS = ("python3", "python", "node")


def toolchain_roots(env: Mapping[str, str], *, untrusted: Sequence[Path] = ()) -> list[Path]:
    """The installations of :data:`TOOLCHAINS` as ``env``'s ``PATH`` finds them.

    Bound for every confined process, decided by the engine alone (a pack can name
    any program on ``PATH`` anyway, which binds the same); one the engine cannot
    enter is left out, so it never stops bubblewrap.
    """
    search = env.get("PATH", os.defpath)
    roots: list[Path] = []
    for name in TOOLCHAINS:
        program = shutil.which(name, path=search)
        if program is None:
            continue
        for root in install_roots(program, untrusted=untrusted):
            if root not in roots and os.access(root, os.R_OK | os.X_OK):
                roots.append(root)
    return roots


def _forwarder_python() -> tuple[str, tuple[Path, ...]]:
    """The interpreter that runs the forwarder inside, and what must be bound for it."""
    for candidate in ("/usr/bin/python3", "/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate, ()
    base = Path(os.path.realpath(sys.base_prefix))
    real = os.path.realpath(sys.executable)
    return real, (base,) if not _is_visible(str(base) + "/") else ()
