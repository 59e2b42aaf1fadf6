"""One trial's disposable sandbox, from fixture copy to cleanup.

Layout (all under a run root ``<tmp>/atlante-eval-<random>``, mode 0700)::

    <scenario>-trial-<i>-<random>/   mode 0700
        project/       the sandbox root: the agent's working directory
        state/         the host's private HOME, XDG dirs, credentials, temp files
        baseline.git/  pack of the baseline commit's objects (grading only)
        grading-*.git/ repository created after the session to collect changes

:func:`trial_sandbox` assembles the sandbox in the reference's order (fixture
copy, native outputs, host integration, setup, ``file-unchanged`` snapshot, git
baseline); :func:`trial_dirs`, the one owner of sandbox cleanup, removes every
trial directory created in its scope afterwards (unless ``keep``), even when the
trial is cancelled.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .._util import fstree
from .._util.fstree import RemovalFailure
from .._util.logs import get_logger
from .._util.paths import FORBIDDEN_SEGMENTS, UnsafePathError, resolve_no_follow, split_segments
from .._util.spread import spread_subdirectories
from ..project import SETUP_TIMEOUT_MS, FileUnchangedCheck, NativeOutputs, Scenario
from .gitops import Baseline, GitError, make_baseline
from .kept import defuse_repositories
from .process import SpawnWrapper, run_process
from .treestate import TreeSnapshot, differing_paths, take_snapshot

__all__ = [
    "RemovalFailure",
    "Sandbox",
    "SandboxError",
    "TrialDirs",
    "copy_fixture",
    "create_run_root",
    "file_digest",
    "remove_tree",
    "resolve_fixture",
    "trial_dirs",
    "trial_sandbox",
    "write_native_outputs",
]

_COPY_CHUNK = 1 << 20

log = get_logger("atlante_eval.trial.sandbox")


class SandboxError(Exception):
    """Raised while assembling a sandbox; the trial becomes ``infra-error`` with this text."""

    def __init__(
        self, message: str, *, trial_dir: Path | None = None, output: str | None = None
    ) -> None:
        super().__init__(message)
        self.trial_dir = trial_dir
        self.output = output
        """The whole captured output of a failed setup, when the message holds only its end."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """An assembled trial sandbox."""

    trial_dir: Path
    root: Path
    """The sandbox root (agent's working directory)."""
    state_dir: Path
    git_dir: Path
    """Private directory holding the pack of the baseline's objects."""
    baseline: Baseline
    """Baseline commit and snapshot."""
    snapshot: Mapping[str, str | None]
    """SHA-256 of each ``file-unchanged`` path before the trial (``None``: not a file)."""
    prepared: tuple[str, ...] | None = None
    """Paths host preparation and setup may have changed in the fixture and native
    outputs (``record_prepared``; ``None``: not recorded)."""


def create_run_root() -> Path:
    """Create the run root ``<tmp>/atlante-eval-<random>``, mode 0700.

    Its trials' directories are unrelated trees: the file system is asked to
    spread them apart (:func:`~atlante_eval._util.spread.spread_subdirectories`).
    """
    root = Path(tempfile.mkdtemp(prefix="atlante-eval-"))
    spread_subdirectories(root)
    return root


def remove_tree(path: Path) -> RemovalFailure | None:
    """Remove ``path`` and everything below it; never raises (see :func:`.fstree.remove_tree`).

    Returns:
        ``None`` when it is gone, else what was left behind and why.
    """
    try:
        return fstree.remove_tree(path)
    except Exception as exc:  # noqa: BLE001 - cleanup must never end a trial or a run
        return RemovalFailure(str(path), f"unexpected error: {type(exc).__name__}: {exc}")


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Open a directory, never through a symbolic link (ELOOP) and never a non-directory.
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC


def _open_dir_at(dir_fd: int, name: str) -> int:
    """Open the directory ``name`` in ``dir_fd`` without following a symbolic link.

    Raises:
        OSError: ``ELOOP`` when ``name`` is a symbolic link (Linux reports
            ``ENOTDIR`` for it with ``O_DIRECTORY``), ``ENOTDIR`` when it is another
            non-directory, or why it could not be opened.
    """
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except NotADirectoryError as exc:
        try:
            is_link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
        except OSError:
            is_link = False
        if is_link:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from exc
        raise


def _copy_file_at(dir_fd: int, name: str, target: Path, where: Path) -> None:
    """Copy the regular file ``name`` of the directory ``dir_fd`` to ``target``."""
    flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    try:
        src = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxError(f"fixture contains a symbolic link: {name}") from exc
        raise SandboxError(f"cannot read fixture file {where / name}: {exc.strerror}") from exc
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            return
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, info.st_mode & 0o777)
        try:
            while chunk := os.read(src, _COPY_CHUNK):
                os.write(dst, chunk)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def resolve_fixture(origin_root: Path, relative: str) -> Path:
    """Return the fixture directory ``origin_root/relative``, re-checked at run time.

    Discovery validated the fixture, but the tree may have changed since (another
    trial's agent has ordinary access to the project), so containment and the
    no-symlink rule are checked again for every component.

    Raises:
        SandboxError: the path escapes the root or traverses a symbolic link.
    """
    parts = split_segments(relative)
    if not parts or ".." in parts or relative[0] in "/\\":
        raise SandboxError("fixture must resolve inside the project")
    try:
        return resolve_no_follow(origin_root, relative)
    except UnsafePathError as exc:
        if exc.reason == "symlink":
            raise SandboxError(f"fixture path traverses a symbolic link: {relative}") from exc
        raise SandboxError(f"fixture cannot be inspected: {relative} ({exc})") from exc


def _open_fixture(origin_root: Path, relative: str) -> int:
    """Open the fixture directory component by component, never following a symlink.

    :func:`resolve_fixture` checked the path, but a component may be swapped for a
    symbolic link at any time; walking with directory descriptors makes the
    fixture that is copied the one that was checked, or fails.
    """
    fixture = origin_root / relative
    current = os.open(origin_root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        for part in split_segments(relative):
            try:
                child = _open_dir_at(current, part)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise SandboxError(
                        f"fixture path traverses a symbolic link: {relative}"
                    ) from exc
                if exc.errno == errno.ENOTDIR:
                    raise SandboxError("fixture is not a directory") from exc
                raise SandboxError(f"fixture does not exist: {fixture}") from exc
            os.close(current)
            current = child
    except BaseException:
        os.close(current)
        raise
    return current


def copy_fixture(fixture: Path, target: Path) -> None:
    """Copy the fixture directory tree into ``target`` (which must not exist).

    Raises:
        SandboxError: the fixture is missing, not a real directory, or contains a
            symbolic link, ``.git`` or ``node_modules``.
    """
    try:
        info = os.lstat(fixture)
    except OSError as exc:
        raise SandboxError(f"fixture does not exist: {fixture}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise SandboxError("fixture must not be a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise SandboxError("fixture is not a directory")
    try:
        fd = os.open(fixture, _DIR_FLAGS)
    except OSError as exc:
        raise SandboxError("fixture must not be a symbolic link") from exc
    _copy_tree_at(fd, target, fixture)


def _list_dir(fd: int, where: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as entries:
            return list(entries)
    except OSError as exc:
        raise SandboxError(f"cannot read fixture directory {where}: {exc}") from exc


def _copy_tree_at(root_fd: int, target: Path, where: Path) -> None:
    """Copy the directory open as ``root_fd`` (closed here) into a new ``target``.

    Every directory is entered through a descriptor opened with ``O_NOFOLLOW``
    relative to its parent's, and every file is opened the same way, so an entry
    swapped for a symbolic link while the copy runs is refused, never followed.
    At most one descriptor per directory level is open.
    """
    stack: list[tuple[int, Iterator[os.DirEntry[str]], Path, Path]] = []
    owned = True  # root_fd is closed here until the stack takes it over
    try:
        target.mkdir()
        stack.append((root_fd, iter(_list_dir(root_fd, where)), target, where))
        owned = False
        while stack:
            fd, entries, target_dir, source_dir = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(fd)
                stack.pop()
                continue
            name = entry.name
            if name in FORBIDDEN_SEGMENTS:
                raise SandboxError(f"fixture contains a forbidden entry: {name}")
            if entry.is_symlink():
                raise SandboxError(f"fixture contains a symbolic link: {name}")
            destination = target_dir / name
            if entry.is_dir(follow_symlinks=False):
                try:
                    child = _open_dir_at(fd, name)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise SandboxError(f"fixture contains a symbolic link: {name}") from exc
                    raise SandboxError(
                        f"cannot read fixture directory {source_dir / name}: {exc}"
                    ) from exc
                try:
                    destination.mkdir()
                    listing = _list_dir(child, source_dir / name)
                except BaseException:
                    os.close(child)
                    raise
                stack.append((child, iter(listing), destination, source_dir / name))
            elif entry.is_file(follow_symlinks=False):
                _copy_file_at(fd, name, destination, source_dir)
    finally:
        if owned:
            os.close(root_fd)
        for fd, *_rest in stack:
            os.close(fd)


def _collision(path: str) -> SandboxError:
    return SandboxError(
        f"fixture file collides with a verified native output at {path}; "
        "rename or remove it in the fixture"
    )


def write_native_outputs(native: NativeOutputs, root: Path) -> None:
    """Write each verified native file at its manifest path with exclusive create.

    Parents are created and entered through descriptors opened with
    ``O_NOFOLLOW``, so nothing is ever written through a symbolic link, even one
    planted while the files are written.

    Raises:
        SandboxError: a fixture file already sits at a native path, or a path
            component is a symbolic link.
    """
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise SandboxError(f"cannot write native outputs: {exc.strerror}") from exc
    try:
        for item in native.files:
            _write_native_at(root_fd, item.path, item.content)
    finally:
        os.close(root_fd)


def _write_native_at(root_fd: int, path: str, content: bytes) -> None:
    parts = split_segments(path)
    if not parts or ".." in parts or path[0] in "/\\":
        raise SandboxError(f"cannot write native output {path}: unsafe path")
    opened: list[int] = []
    fd = root_fd
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass  # an existing directory is entered below; anything else is refused there
            except OSError as exc:
                raise SandboxError(f"cannot write native output {path}: {exc.strerror}") from exc
            try:
                fd = _open_dir_at(fd, part)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    shown = "/".join(parts[: index + 1])
                    raise SandboxError(
                        f"cannot write native output {path}: "
                        f"path traverses a symbolic link at {shown}"
                    ) from exc
                if exc.errno == errno.ENOTDIR:
                    raise _collision(path) from exc
                raise SandboxError(f"cannot write native output {path}: {exc.strerror}") from exc
            opened.append(fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            out = os.open(parts[-1], flags, 0o666, dir_fd=fd)
        except FileExistsError:
            raise _collision(path) from None
        except OSError as exc:
            raise SandboxError(f"cannot write native output {path}: {exc.strerror}") from exc
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
    finally:
        for each in opened:
            os.close(each)


def file_digest(root: Path, relative: str) -> str | None:
    """SHA-256 of a regular file at ``relative``; ``None`` if missing or not a regular file.

    Raises:
        UnsafePathError: the path escapes the root or crosses a symbolic link.
        OSError: the file exists but cannot be read.
    """
    path = resolve_no_follow(root, relative)
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return None  # swapped for a FIFO or a device since the lstat: never read
        left = opened.st_size  # a file that grows while it is hashed is read to its size
        while left > 0 and (chunk := os.read(fd, min(left, _COPY_CHUNK))):
            digest.update(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _snapshot(root: Path, scenario: Scenario) -> dict[str, str | None]:
    snapshot: dict[str, str | None] = {}
    for check in scenario.document.checks:
        if isinstance(check, FileUnchangedCheck):
            try:
                snapshot[check.path] = file_digest(root, check.path)
            except (UnsafePathError, OSError):
                snapshot[check.path] = None
    return snapshot


async def _run_setup(
    argv: list[str], root: Path, wrap: SpawnWrapper | None, env: Mapping[str, str] | None
) -> None:
    """Run ``setup`` in the sandbox: with ``env``, else the full environment (the reference's)."""
    result = await run_process(
        argv,
        cwd=root,
        env=dict(os.environ if env is None else env),
        timeout_s=SETUP_TIMEOUT_MS / 1000,
        wrap=wrap,
    )
    if result.timed_out:
        raise SandboxError(f"setup timed out after {SETUP_TIMEOUT_MS}ms")
    if result.spawn_error:
        raise SandboxError(f"setup failed: {result.spawn_error}")
    if result.returncode != 0:
        status = f"exit {result.returncode}" if result.exit is not None else result.signal_name
        tail = result.stderr.strip()[-400:]
        output = f"{result.stdout}\n{result.stderr}".strip()
        raise SandboxError(
            f"setup failed: {status}{': ' + tail if tail else ''}",
            output=output if len(output) > len(tail) else None,
        )


@asynccontextmanager
async def trial_sandbox(
    run_root: Path,
    scenario: Scenario,
    trial: int,
    *,
    native: NativeOutputs,
    prepare_host: Callable[[Path, Path], None],
    owner: TrialDirs,
    skeleton: Path | None = None,
    confine_setup: Callable[[Path, Path], SpawnWrapper] | None = None,
    setup_env: Mapping[str, str] | None = None,
    record_prepared: bool = False,
) -> AsyncIterator[Sandbox]:
    """Assemble a trial's sandbox and yield it; ``owner`` removes it later.

    Args:
        run_root: the run's root directory.
        scenario: the scenario being run.
        trial: 0-based trial index.
        native: verified native outputs to write into the sandbox.
        prepare_host: writes the host's configuration; called with the sandbox root
            and the state directory, before setup. May raise ``HostError``.
        owner: the :func:`trial_dirs` scope that removes the trial directory (it is
            registered as soon as it exists, so a failed assembly is removed too).
        skeleton: an empty repository to copy instead of running ``git init``.
        confine_setup: called with the sandbox root and state directory; returns
            the wrapper that confines ``setup`` (``--isolation os``).
        setup_env: the whole environment of ``setup`` (``--isolation os``: the
            allowlist and ``--pass-env``); ``None`` passes the full environment.
        record_prepared: snapshot the assembled fixture and native outputs, so the
            sandbox says which paths host preparation and setup changed
            (:attr:`Sandbox.prepared`, for the trial's final state).

    Raises:
        SandboxError: assembly failed (the trial is an ``infra-error``).
    """
    trial_dir = _fresh_dir(run_root, f"{scenario.name}-trial-{trial}")
    owner.paths.append(trial_dir)
    root = trial_dir / "project"
    state = trial_dir / "state"
    git_dir = trial_dir / "baseline.git"
    try:
        assembled = await anyio.to_thread.run_sync(
            _assemble, scenario, native, root, state, trial_dir if record_prepared else None
        )
        prepare_host(root, state)
        if scenario.document.task.setup:
            wrap = confine_setup(root, state) if confine_setup is not None else None
            await _run_setup(list(scenario.document.task.setup), root, wrap, setup_env)
        snapshot = await anyio.to_thread.run_sync(_snapshot, root, scenario)
        baseline = await make_baseline(root, git_dir, skeleton=skeleton)
        prepared = (
            tuple(differing_paths(assembled, baseline.tree)) if assembled is not None else None
        )
    except GitError as exc:
        raise SandboxError(str(exc), trial_dir=trial_dir) from exc
    except SandboxError as exc:
        exc.trial_dir = trial_dir
        raise
    except OSError as exc:
        raise SandboxError(f"cannot assemble the sandbox: {exc}", trial_dir=trial_dir) from exc
    yield Sandbox(
        trial_dir=trial_dir,
        root=root,
        state_dir=state,
        git_dir=git_dir,
        baseline=baseline,
        snapshot=snapshot,
        prepared=prepared,
    )


@dataclass
class TrialDirs:
    """The trial directories of one trial (one per attempt), removed together."""

    paths: list[Path] = field(default_factory=list)


@asynccontextmanager
async def trial_dirs(
    *, keep: bool, failures: list[RemovalFailure] | None = None
) -> AsyncIterator[TrialDirs]:
    """Own the removal of every trial directory created inside the scope.

    The one owner of sandbox cleanup: on exit (also on error or cancellation,
    shielded) each registered directory is removed, unless ``keep``. The engine
    holds this scope around a whole trial, so its slot is given back before the
    trees are removed. Removal never raises: what cannot be removed is appended
    to ``failures`` (and left in place). With ``keep``, the kept sandboxes' git
    repositories are defused instead (:mod:`.kept`), so inspecting them with git
    runs no code the agent wrote.
    """
    owned = TrialDirs()
    try:
        yield owned
    finally:
        if keep and owned.paths:
            with anyio.CancelScope(shield=True):
                for path in owned.paths:
                    await anyio.to_thread.run_sync(_defuse_kept, path / "project")
        if not keep and owned.paths:
            with anyio.CancelScope(shield=True):
                for path in owned.paths:
                    failure = await anyio.to_thread.run_sync(remove_tree, path)
                    if failure is not None and failures is not None:
                        failures.append(failure)


def _defuse_kept(sandbox: Path) -> None:
    """Defuse a kept sandbox's repositories; a failure is logged, never raised."""
    if not os.path.isdir(sandbox) or os.path.islink(sandbox):
        return
    try:
        defuse_repositories(sandbox)
    except Exception as exc:  # noqa: BLE001 - keeping a sandbox must never end a run
        log.warning("sandbox.defuse-failed", sandbox=str(sandbox), error=str(exc))


def _fresh_dir(run_root: Path, name: str) -> Path:
    """Create ``run_root/name-<random>``, mode 0700: a name no other trial can guess."""
    try:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=run_root))
    except OSError as exc:
        raise SandboxError(f"cannot create the trial directory: {exc}") from exc


def _assemble(
    scenario: Scenario, native: NativeOutputs, root: Path, state: Path, clock_dir: Path | None
) -> TreeSnapshot | None:
    """Assemble the files and, given ``clock_dir``, snapshot them (one worker-thread hop)."""
    _assemble_files(scenario, native, root, state)
    return take_snapshot(root, clock_dir=clock_dir) if clock_dir is not None else None


def _assemble_files(scenario: Scenario, native: NativeOutputs, root: Path, state: Path) -> None:
    """Copy the fixture, write the native outputs and create the state directory."""
    state.mkdir()
    relative = scenario.document.task.fixture
    fixture = resolve_fixture(scenario.origin.root, relative)
    fd = _open_fixture(scenario.origin.root, relative)
    _copy_tree_at(fd, root, fixture)
    write_native_outputs(native, root)
