"""Run ids and report publication: fresh directories, atomic writes, no symlinks.

The default location is ``<project>/.atlante/eval/<runId>/report.json`` (and
``eval/`` is added to ``<project>/.atlante/.gitignore``); ``--out DIR`` replaces
``<project>/.atlante/eval``. A run directory is reserved with a non-recursive
``mkdir`` (a collision re-rolls the id); a run's directory is first made under a
hidden staging name, given its first files (the journal), and renamed into place
without replacing anything, so even a run killed at once leaves either no run
directory or one holding its journal. Every file is written to a temporary
name, flushed to disk, then linked into place, so a crash never leaves a
half-written report and nothing existing is ever overwritten.

The run directory is the engine's from the moment it is reserved. Before each
publication (and before the report is assembled) anything in it the engine did
not create itself (a forged ``report.json``, a replaced journal, any other file)
is moved aside into ``tampered-<n>/`` in the same directory, kept, never
deleted, and reported as tampering; so the real report is always published.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..diagnostics import Diagnostic, DiagnosticError, error, warning
from .staging import Seed, seeded, sweep_staging

__all__ = [
    "PublishError",
    "ReportDir",
    "TamperedEntry",
    "UnsafeOutputError",
    "atomic_write",
    "check_below",
    "check_no_symlinks",
    "check_output_target",
    "check_unchanged",
    "dir_identity",
    "ensure_gitignore",
    "new_run_id",
    "publish_error",
    "report_base",
    "report_failed",
    "reserve_report_dir",
    "reserve_run_dir",
    "tampering_warning",
]

_RUN_ID_ATTEMPTS = 8


class PublishError(Exception):
    """Raised when a report location is unsafe or cannot be written."""


class UnsafeOutputError(PublishError):
    """Raised by :func:`atomic_write` for a target that is neither a regular file nor new."""


def check_output_target(path: Path) -> None:
    """Refuse an output path that exists and is not a regular file (a FIFO, a device, a link).

    Writing goes through a temporary file renamed over the target, which would
    turn ``/dev/full`` or a FIFO into a plain file; such targets are refused instead.

    Raises:
        UnsafeOutputError: ``path`` is a directory, symlink, FIFO, socket or device.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PublishError(f"cannot inspect {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise UnsafeOutputError(f"{path} is {kind}; refusing to replace it")


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def new_run_id(now: datetime | None = None) -> str:
    """Return ``YYYY-MM-DDTHH-MM-SS-xxxx`` (local time, 4 random hex digits)."""
    moment = now or datetime.now()
    return f"{moment:%Y-%m-%dT%H-%M-%S}-{secrets.randbelow(0xFFFF):04x}"


def check_no_symlinks(path: Path) -> None:
    """Refuse ``path`` if its deepest existing ancestor, or any part of it, is a symlink.

    Raises:
        PublishError: a component is a symbolic link or not a directory.
    """
    absolute = path.absolute()
    existing = absolute
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    try:
        info = os.lstat(existing)
    except OSError as exc:
        raise PublishError(f"cannot inspect {existing}: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise PublishError(f"report output path traverses a symbolic link: {existing}")
    if existing != absolute and not stat.S_ISDIR(info.st_mode):
        raise PublishError(f"report output path is not a directory: {existing}")


def _mkdirs(path: Path) -> None:
    """Create ``path`` and missing parents one by one, refusing symlinks at every step."""
    absolute = path.absolute()
    missing = []
    current = absolute
    while not os.path.lexists(current):
        missing.append(current)
        current = current.parent
    check_no_symlinks(current)
    if os.path.lexists(absolute) and not absolute.is_dir():
        raise PublishError(f"report output path is not a directory: {absolute}")
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        check_no_symlinks(directory)
    check_no_symlinks(absolute)
    if not absolute.is_dir():
        raise PublishError(f"report output path is not a directory: {absolute}")


def check_below(anchor: Path, path: Path) -> None:
    """Refuse ``path`` if any existing component between ``anchor`` and it is a symlink.

    Used for the default location, where every part below the project root
    (``.atlante``, ``.atlante/eval``) is ours and must be a real directory.

    Raises:
        PublishError: a component is a symbolic link.
    """
    try:
        relative = path.absolute().relative_to(anchor.absolute())
    except ValueError:
        return
    current = anchor.absolute()
    for part in relative.parts:
        current = current / part
        if os.path.islink(current):
            raise PublishError(f"report output path traverses a symbolic link: {current}")


def dir_identity(path: Path) -> tuple[int, int]:
    """Return the device and inode of ``path`` (not followed), to recognise it later.

    Raises:
        PublishError: ``path`` cannot be inspected.
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise PublishError(f"cannot inspect {path}: {exc.strerror}") from exc
    return info.st_dev, info.st_ino


def check_unchanged(run_dir: Path, identity: tuple[int, int], *, anchor: Path | None) -> None:
    """Refuse a run directory that was replaced, or put behind a symlink, since reserved.

    A run takes long; the report path is checked again right before publishing, so
    a component swapped for a symbolic link meanwhile (or the directory replaced by
    another one) is refused instead of followed.

    Args:
        run_dir: the reserved run directory.
        identity: its :func:`dir_identity` when it was reserved.
        anchor: as for :func:`reserve_run_dir`.

    Raises:
        PublishError: the path now traverses a symlink or leads to another directory.
    """
    if anchor is not None:
        check_below(anchor, run_dir)
    check_no_symlinks(run_dir.parent)
    try:
        info = os.lstat(run_dir)
    except OSError as exc:
        raise PublishError(f"the run directory disappeared during the run: {run_dir}") from exc
    if stat.S_ISLNK(info.st_mode) or (info.st_dev, info.st_ino) != identity:
        raise PublishError(f"report output path changed during the run: {run_dir}")


def reserve_run_dir(
    base: Path, run_id: str, *, anchor: Path | None = None, seed: Seed | None = None
) -> tuple[str, Path]:
    """Create ``base`` if needed and reserve a fresh ``base/<run id>`` directory.

    Args:
        base: the report base directory.
        run_id: the preferred run id.
        anchor: when given, no component of ``base`` below it may be a symlink.
        seed: called with a hidden staging directory and the run id before the
            directory gets its name, to write its first files (a run's journal);
            the directory then appears under ``base/<run id>`` with them, at once.
            It returns how to undo its work, called when the id must be re-rolled.

    Returns:
        The run id actually used (re-rolled on collision) and the directory.

    Raises:
        PublishError: unsafe or unwritable location, or no free id in 8 attempts.
    """
    try:
        if anchor is not None:
            check_below(anchor, base)
        _mkdirs(base)
        if seed is not None:
            sweep_staging(base)
        for _ in range(_RUN_ID_ATTEMPTS):
            candidate = base / run_id
            reserved = seeded(base, run_id, seed) if seed is not None else _made(candidate)
            if not reserved:
                run_id = new_run_id()
                continue
            check_no_symlinks(candidate)
            return run_id, candidate
    except OSError as exc:
        raise PublishError(f"cannot create {base}: {exc.strerror or exc}") from exc
    raise PublishError(f"could not allocate a fresh eval run id under {_RUN_ID_ATTEMPTS} attempts")


def _made(candidate: Path) -> bool:
    """Make ``candidate``; ``False`` when it exists."""
    try:
        candidate.mkdir()
    except FileExistsError:
        return False
    return True


def atomic_write(path: Path, data: bytes, *, replace: bool = False) -> None:
    """Write ``data`` to ``path`` through a flushed temporary file.

    With ``replace=False`` the final name is created exclusively: an existing file
    is never overwritten. With ``replace=True`` only a regular file is replaced.

    Raises:
        UnsafeOutputError: the target exists and is not a regular file.
        PublishError: the directory is unsafe or the write failed.
    """
    check_output_target(path)
    check_no_symlinks(path.parent)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temporary, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
            os.unlink(temporary)
        _fsync_dir(path.parent)
    except FileExistsError as exc:
        _discard(temporary)
        raise PublishError(f"refusing to overwrite {path}") from exc
    except OSError as exc:
        _discard(temporary)
        raise PublishError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def ensure_gitignore(atlante_dir: Path) -> None:
    """Make sure ``<project>/.atlante/.gitignore`` has an ``eval/`` line.

    Raises:
        PublishError: the file or its directory is unsafe or cannot be written.
    """
    path = atlante_dir / ".gitignore"
    if os.path.islink(path):
        raise PublishError(f"report output path traverses a symbolic link: {path}")
    try:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"cannot read {path}: {exc}") from exc
    if any(line.strip() == "eval/" for line in current.splitlines()):
        return
    prefix = current if not current or current.endswith("\n") else current + "\n"
    atomic_write(path, (prefix + "eval/\n").encode("utf-8"), replace=True)


def report_failed(
    location: Path,
    exc: Exception,
    *,
    action: str,
    next: str = "choose a writable path and try again",
) -> DiagnosticError:
    """The one ``eval-report-failed`` diagnostic (exit 3): an output could not be written.

    A target refused because it is a FIFO, a device, a directory or a symlink
    (:class:`UnsafeOutputError`) is ``invalid-output-path`` instead (exit 2).

    Args:
        location: the file or directory that could not be written.
        exc: why (its text becomes the message's tail and the ``cause``).
        action: what failed, e.g. ``publish the report`` or ``write the JUnit file``.
        next: what the user should do.
    """
    unsafe = isinstance(exc, UnsafeOutputError)
    return DiagnosticError(
        [
            error(
                "invalid-output-path" if unsafe else "eval-report-failed",
                f"could not {action}: {exc}",
                source=str(location),
                cause=str(exc),
                next="write to a new path or a regular file ('-' is standard output where "
                "the option allows it)"
                if unsafe
                else next,
            )
        ]
    )


def publish_error(location: Path, exc: Exception) -> DiagnosticError:
    """The ``eval-report-failed`` diagnostic for a failed publication (exit 3)."""
    return report_failed(
        location,
        exc,
        action="publish the report",
        next="choose a writable report location (--out) and try again",
    )


def tampering_warning(run_dir: Path, entries: list[TamperedEntry]) -> Diagnostic:
    """The run-level ``eval-run-dir-tampered`` warning for entries moved aside."""
    names = ", ".join(entry.path for entry in entries[:5])
    more = f" and {len(entries) - 5} more" if len(entries) > 5 else ""
    return warning(
        "eval-run-dir-tampered",
        f"something other than atlante-eval wrote into the run directory ({names}{more}); "
        "it was moved aside and the real report published",
        source=str(run_dir),
        next="look at the tampered-* directories there; an agent may be writing outside "
        "its sandbox (see docs/reliability.md)",
    )


def report_base(project_root: Path, out: Path | None) -> Path:
    """The report base directory: ``out``, else ``<project>/.atlante/eval``."""
    return out if out is not None else project_root / ".atlante" / "eval"


#: Run-directory entries the engine creates as plain directories (transcripts, and
#: the store of the trials' final files: docs/regrade.md).
ENGINE_DIRS = frozenset({"trials", "final-state"})
_TAMPERED_PREFIX = "tampered-"
_PUBLISH_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class TamperedEntry:
    """A foreign entry found in a run directory and where it was moved."""

    path: str
    """Its name in the run directory."""
    moved_to: str
    """Where it is now, relative to the run directory (``tampered-<n>/<name>``)."""


@dataclass(frozen=True, slots=True)
class ReportDir:
    """A reserved run directory, published into only while it is still the one reserved."""

    run_id: str
    path: Path
    identity: tuple[int, int]
    anchor: Path | None
    owned: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Entries the engine created (name: device and inode)."""
    tampered: list[TamperedEntry] = field(default_factory=list)
    """Every foreign entry moved aside so far."""

    def adopt(self, name: str) -> None:
        """Record ``name``, just created by the engine, as the engine's own."""
        self.owned[name] = dir_identity(self.path / name)

    def _foreign(self, entry: os.DirEntry[str]) -> bool:
        owned = self.owned.get(entry.name)
        if owned is not None:
            info = entry.stat(follow_symlinks=False)
            return (info.st_dev, info.st_ino) != owned
        return not (entry.name in ENGINE_DIRS and entry.is_dir(follow_symlinks=False))

    def sweep(self) -> list[TamperedEntry]:
        """Move every entry the engine did not create into a fresh ``tampered-<n>/``.

        Returns the entries moved by this call (also appended to :attr:`tampered`).

        Raises:
            PublishError: the directory cannot be listed or an entry cannot be moved.
        """
        try:
            check_unchanged(self.path, self.identity, anchor=self.anchor)
            with os.scandir(self.path) as entries:
                foreign = sorted(e.name for e in entries if self._foreign(e))
            if not foreign:
                return []
            aside = self._aside_dir()
            moved = []
            for name in foreign:
                try:
                    os.rename(self.path / name, self.path / aside / name)
                except FileNotFoundError:
                    continue  # gone since it was listed
                self.owned.pop(name, None)
                moved.append(TamperedEntry(path=name, moved_to=f"{aside}/{name}"))
        except OSError as exc:
            raise PublishError(
                f"cannot move foreign files aside in {self.path}: {exc.strerror or exc}"
            ) from exc
        self.tampered.extend(moved)
        return moved

    def _aside_dir(self) -> str:
        """Create and own the first free ``tampered-<n>`` directory; return its name."""
        number = 1
        while True:
            name = f"{_TAMPERED_PREFIX}{number}"
            try:
                os.mkdir(self.path / name, 0o700)
            except FileExistsError:
                number += 1
                continue
            self.adopt(name)
            return name

    def publish(self, name: str, data: bytes) -> Path:
        """Move foreign entries aside, then write ``name`` atomically; return its path.

        A forgery planted under ``name`` (even during the publication) is moved aside,
        so the engine's own file is the one published.

        Raises:
            DiagnosticError: ``eval-report-failed`` (exit 3) when the directory was
                replaced or put behind a symlink since it was reserved, or the write
                failed.
        """
        target = self.path / name
        try:
            for attempt in range(_PUBLISH_ATTEMPTS):
                self.sweep()
                try:
                    atomic_write(target, data)
                except PublishError:
                    if attempt + 1 < _PUBLISH_ATTEMPTS and os.path.lexists(target):
                        continue  # planted between the sweep and the link: sweep again
                    raise
                break
            self.adopt(name)
        except PublishError as exc:
            raise publish_error(self.path, exc) from None
        return target


def reserve_report_dir(
    base: Path, run_id: str, *, project_root: Path | None = None, seed: Seed | None = None
) -> ReportDir:
    """Reserve ``base/<run id>`` before anything runs.

    Args:
        base: the report base directory (see :func:`report_base`).
        run_id: the preferred run id (re-rolled on collision).
        project_root: set when ``base`` is the project's default location: then no
            component below the project root may be a symlink, and ``eval/`` is
            added to ``<project>/.atlante/.gitignore``.
        seed: writes the directory's first files before it appears (see
            :func:`reserve_run_dir`).

    Raises:
        DiagnosticError: ``eval-report-failed`` (exit 3).
    """
    try:
        run_id, run_dir = reserve_run_dir(base, run_id, anchor=project_root, seed=seed)
        identity = dir_identity(run_dir)
        if project_root is not None:
            ensure_gitignore(project_root / ".atlante")
    except PublishError as exc:
        raise publish_error(base, exc) from None
    return ReportDir(run_id=run_id, path=run_dir, identity=identity, anchor=project_root)
