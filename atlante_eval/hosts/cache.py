"""The managed host cache: one npm prefix per pinned host version, and its integrity.

Layout (``$ATLANTE_EVAL_HOST_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/atlante-eval/hosts``)::

    <root>/<host>/<version>/                 an npm prefix: package.json, package-lock.json,
                                             node_modules/ (the CLI and its platform package)
    <root>/<host>/<version>/atlante-host.json the record: the lock's integrity, the tree digest
    <root>/<host>/.<version>.install.lock     held while the version is checked or installed
    <root>/<host>/.<version>.use.lock         shared by every process running the version

The record is written last, so a directory without one is an unfinished install.
:func:`check_entry` re-hashes the whole tree on every use: a copy whose files, lock
or record changed since npm installed it is reported (and reinstalled by
:mod:`.managed`), never run.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from .._util.versions import parse_version
from ..choices import HostName
from ..diagnostics import DiagnosticError, error
from ..project.native import NATIVE_HOSTS
from ..project.pins import pin_error
from ..report import HostSource

__all__ = [
    "HOST_CACHE_ENV",
    "RECORD_FILE",
    "CacheLayout",
    "CacheRecord",
    "CachedHost",
    "HostPin",
    "check_entry",
    "host_cache_root",
    "lock_integrity",
    "parse_pin",
    "scan_cache",
    "tree_digest",
]

#: Names the managed host cache's root directory (default: the user's cache directory).
HOST_CACHE_ENV = "ATLANTE_EVAL_HOST_CACHE"
#: The record of a finished install, inside the version's directory.
RECORD_FILE = "atlante-host.json"
_CHUNK = 1 << 20


def host_cache_root(env: Mapping[str, str] | None = None) -> Path:
    """The managed host cache: ``$ATLANTE_EVAL_HOST_CACHE``, else the user's cache directory."""
    source = os.environ if env is None else env
    explicit = source.get(HOST_CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser().absolute()
    home = source.get("HOME") or str(Path.home())
    base = Path(source.get("XDG_CACHE_HOME") or Path(home) / ".cache")
    return base.absolute() / "atlante-eval" / "hosts"


@dataclass(frozen=True, slots=True)
class HostPin:
    """A built-in host at one exact version (``claude-code@2.1.332``)."""

    host: HostName
    version: str

    def __str__(self) -> str:
        return f"{self.host}@{self.version}"

    @property
    def package(self) -> str:
        """The npm package that ships the host's CLI."""
        return NATIVE_HOSTS[self.host].package

    @property
    def spec(self) -> str:
        """What npm installs: ``@anthropic-ai/claude-code@2.1.332``."""
        return f"{self.package}@{self.version}"

    @property
    def command(self) -> str:
        """The CLI's executable name (``claude``, ``opencode``)."""
        return NATIVE_HOSTS[self.host].command


def parse_pin(text: str, *, what: str = "HOST@VERSION") -> HostPin:
    """Read ``HOST@VERSION`` (``claude-code@2.1.332``), checking the version like a pin.

    Raises:
        DiagnosticError: ``invalid-option`` for an unknown host or a missing ``@``;
            ``invalid-host-version`` for a version that cannot be pinned (exit 2).
    """
    host, at, version = text.strip().rpartition("@")
    known = next((name for name in NATIVE_HOSTS if name == host), None)
    if not at or known is None:
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"{what} must name a built-in host and an exact version, got {text!r}",
                    expected=" or ".join(f"{name}@VERSION" for name in NATIVE_HOSTS),
                    next="e.g. `atlante-eval hosts install claude-code@2.1.332`",
                )
            ]
        )
    problem = pin_error(known, version, what=what)
    if problem is not None:
        raise DiagnosticError([problem])
    return HostPin(known, version)


class CacheRecord(BaseModel):
    """``atlante-host.json``: what was installed, and the digests it is checked against."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    format: Literal[1] = 1
    """Version of this record's layout."""
    host: str
    """The host name."""
    version: str
    """The host version."""
    package: str
    """The npm package."""
    integrity: str
    """The package's integrity in the npm lock file (``sha512-...``): npm checked the
    downloaded tarball against it, and the lock file must still say it."""
    executable: str
    """The CLI, relative to the version's directory (``node_modules/.bin/claude``)."""
    tree_digest: str
    """``sha256:`` digest of every path, link target, mode and content of the directory
    (this record excepted), as installed."""
    size_bytes: int
    """Bytes on disk (each hard-linked file counted once)."""
    installed_at: str
    """UTC time of the install, ISO 8601."""


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """Where one pinned version lives in a cache root."""

    root: Path
    pin: HostPin

    @property
    def directory(self) -> Path:
        """The version's npm prefix."""
        return self.root / self.pin.host / self.pin.version

    @property
    def record_path(self) -> Path:
        """Its ``atlante-host.json``."""
        return self.directory / RECORD_FILE

    @property
    def executable(self) -> Path:
        """The CLI npm links into ``node_modules/.bin``."""
        return self.directory / "node_modules" / ".bin" / self.pin.command

    @property
    def install_lock(self) -> Path:
        """Held (exclusive) while the version is checked, installed or removed."""
        return self.root / self.pin.host / f".{self.pin.version}.install.lock"

    @property
    def use_lock(self) -> Path:
        """Held (shared) by every process that runs the version; ``remove`` needs it alone."""
        return self.root / self.pin.host / f".{self.pin.version}.use.lock"


@dataclass(frozen=True, slots=True)
class CachedHost:
    """One pinned version in the cache, as checked."""

    host: str
    version: str
    directory: Path
    executable: Path
    state: Literal["ok", "missing", "corrupted"]
    """``ok``: it passed its integrity check; ``missing``: not installed; ``corrupted``:
    it failed the check (or its install never finished) and must be reinstalled."""
    record: CacheRecord | None
    """The install's record (``None``: an unfinished or broken install)."""
    problem: str | None = None
    """Why a ``corrupted`` copy cannot be used."""

    @property
    def ok(self) -> bool:
        """Whether the copy passed its integrity check."""
        return self.state == "ok"

    @property
    def integrity(self) -> str | None:
        """The package's npm integrity, as recorded."""
        return self.record.integrity if self.record is not None else None

    @property
    def size_bytes(self) -> int | None:
        """Bytes on disk, as recorded."""
        return self.record.size_bytes if self.record is not None else None

    def source(self) -> HostSource:
        """The report's ``meta.hostSource`` of a run on this copy."""
        return HostSource(
            kind="managed",
            executable=str(self.executable),
            package=f"{self.record.package}@{self.version}" if self.record else None,
            integrity=self.integrity,
        )


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb", buffering=0) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(directory: Path) -> tuple[str, int]:
    """The ``sha256:`` digest of ``directory``'s tree (its record excepted) and its size.

    Every entry contributes its relative path and kind; a link its target; a file its
    executable bit and content digest (a hard-linked file is read once).

    Raises:
        OSError: an entry cannot be read.
    """
    lines: list[bytes] = []
    seen: dict[tuple[int, int], str] = {}
    size = 0
    for current, dirs, files in os.walk(directory, onerror=_raise):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(current, name)
            relative = path.relative_to(directory).as_posix()
            if relative == RECORD_FILE:
                continue
            info = path.lstat()
            key = os.fsencode(relative)
            if stat.S_ISLNK(info.st_mode):
                lines.append(b"L " + key + b" -> " + os.fsencode(path.readlink()))
            elif stat.S_ISDIR(info.st_mode):
                lines.append(b"D " + key)
            elif stat.S_ISREG(info.st_mode):
                inode = (info.st_dev, info.st_ino)
                if inode not in seen:
                    seen[inode] = _file_digest(path)
                    size += info.st_size
                executable = b"x" if info.st_mode & stat.S_IXUSR else b"-"
                lines.append(b"F " + key + b" " + executable + b" " + seen[inode].encode())
            else:
                lines.append(b"? " + key)
    return "sha256:" + hashlib.sha256(b"\0".join(lines)).hexdigest(), size


def _raise(exc: OSError) -> None:
    raise exc


def lock_integrity(directory: Path, pin: HostPin) -> tuple[str | None, str | None]:
    """The version and integrity npm's lock file records for the pinned package."""
    try:
        lock = json.loads((directory / "package-lock.json").read_text(encoding="utf-8"))
        entry: Any = lock["packages"][f"node_modules/{pin.package}"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    if not isinstance(entry, dict):
        return None, None
    version, integrity = entry.get("version"), entry.get("integrity")
    return (
        version if isinstance(version, str) else None,
        integrity if isinstance(integrity, str) else None,
    )


def _read_record(layout: CacheLayout) -> CacheRecord | None:
    try:
        return CacheRecord.model_validate_json(layout.record_path.read_bytes())
    except (OSError, ValidationError):
        return None


def _record_problem(layout: CacheLayout, record: CacheRecord) -> str | None:
    """A mismatch between the record, the pin and npm's lock file, or a missing executable."""
    pin = layout.pin
    if (record.host, record.version, record.package) != (pin.host, pin.version, pin.package):
        return f"its record names {record.package}@{record.version}, not {pin.spec}"
    version, integrity = lock_integrity(layout.directory, pin)
    if version != pin.version or integrity != record.integrity:
        return f"npm's lock file no longer records {pin.spec} with the installed integrity"
    executable = layout.directory / record.executable
    if not os.access(executable, os.X_OK) or executable != layout.executable:
        return f"its executable {layout.executable} is missing or not executable"
    return None


def check_entry(layout: CacheLayout) -> CachedHost:
    """Check one cached version: its record, npm's lock file and every file's digest."""
    if not layout.directory.is_dir() and not layout.directory.is_symlink():
        return CachedHost(
            host=layout.pin.host,
            version=layout.pin.version,
            directory=layout.directory,
            executable=layout.executable,
            state="missing",
            record=None,
        )
    record = _read_record(layout)
    problem: str | None
    if layout.directory.is_symlink() or not layout.directory.is_dir():
        problem = "it is not a directory"
    elif record is None:
        problem = f"it has no valid {RECORD_FILE} (an unfinished or interrupted install)"
    else:
        problem = _record_problem(layout, record)
        if problem is None:
            try:
                digest, _size = tree_digest(layout.directory)
            except OSError as exc:
                digest = f"unreadable ({exc.strerror or exc})"
            if digest != record.tree_digest:
                problem = "its files differ from those npm installed (a file was changed, "
                problem += "added or removed)"
    return CachedHost(
        host=layout.pin.host,
        version=layout.pin.version,
        directory=layout.directory,
        executable=layout.executable,
        state="ok" if problem is None else "corrupted",
        record=record,
        problem=problem,
    )


def _version_order(name: str) -> tuple[int, int, int, str]:
    """Order version directories numerically (``2.1.9`` before ``2.1.10``), others last."""
    parsed = parse_version(name)
    if parsed is None:
        return (1 << 30, 0, 0, name)
    return (parsed.major, parsed.minor, parsed.patch, name)


def scan_cache(root: Path) -> list[CachedHost]:
    """Check every version in the cache root, by host then version."""
    found: list[CachedHost] = []
    for host in NATIVE_HOSTS:
        folder = root / host
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        for name in sorted(names, key=_version_order):
            if name.startswith(".") or not (folder / name).is_dir():
                continue
            found.append(check_entry(CacheLayout(root, HostPin(host, name))))
    return found
