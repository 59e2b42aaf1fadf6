"""Read and verify the native outputs of the last ``atlante build``.

A build writes host-native agent and skill files plus an ownership manifest
(``.atlante/opencode-native.json`` or ``.atlante/claude-code-native.json``) listing
each file's SHA-256. Eval never builds: it reads the manifest, checks its exact
shape, and re-hashes every file. Anything missing, malformed, symlinked or drifted
fails with ``native-outputs-not-verified`` and "run `atlante build`" as the next step.

:data:`NATIVE_HOSTS` is what this layer knows of each built-in host: where its
build's manifest is, the agents the host ships, and its release (the npm package
that ships its CLI and the versions eval supports, which ``eval.hostVersion``
must lie in).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._util.jsondoc import DocumentParseError, DocumentReadError, parse_document, read_document
from .._util.versions import VersionRange
from ..choices import HostName
from ..diagnostics import ATLANTE_ABOUT, DiagnosticError, error

__all__ = [
    "NATIVE_HOSTS",
    "NativeFile",
    "NativeHost",
    "NativeOutputs",
    "NativeOutputsError",
    "native_host",
    "read_native_outputs",
    "verify_native_outputs",
]


@dataclass(frozen=True, slots=True)
class NativeHost:
    """What the project layer knows of a built-in host before any host is created.

    The rest of a host's knowledge (command line, environment, stream parser,
    transcript normalizer, model endpoints) lives in its module under ``hosts/``,
    which this layer may not import.
    """

    path: str
    """Where ``atlante build`` writes the host's ownership manifest."""
    format: str
    """The manifest's ``format`` value."""
    label: str
    """The host's display name in messages."""
    builtin_agents: frozenset[str]
    """Agents the host ships, which a scenario may name without a native output."""
    package: str
    """The npm package that ships the host's CLI (managed installs, docs/hosts.md)."""
    command: str
    """The CLI's executable: the name the package's ``bin`` gives it and PATH finds."""
    versions: tuple[VersionRange, ...]
    """The supported versions, in order: a probed version and ``eval.hostVersion`` must
    lie in one (OpenCode's name its configuration dialect)."""


#: Per built-in host: its build's manifest, the agents it ships and its release.
NATIVE_HOSTS: dict[HostName, NativeHost] = {
    "opencode": NativeHost(
        path=".atlante/opencode-native.json",
        format="atlante-opencode-native",
        label="OpenCode",
        builtin_agents=frozenset({"build", "plan", "general", "explore"}),
        package="opencode-ai",
        command="opencode",
        versions=(VersionRange("V1", ">=1.18.29 <2.0.0"), VersionRange("V2", ">=2.0.0 <3.0.0")),
    ),
    "claude-code": NativeHost(
        path=".atlante/claude-code-native.json",
        format="atlante-claude-code-native",
        label="Claude Code",
        builtin_agents=frozenset({"general-purpose", "Explore", "Plan", "statusline-setup"}),
        package="@anthropic-ai/claude-code",
        command="claude",
        versions=(VersionRange("claude-code", ">=2.0.0 <3.0.0"),),
    ),
}


def native_host(host: str) -> NativeHost | None:
    """Return what is known of ``host``, or ``None`` for a name that is not a built-in host."""
    return next((known for name, known in NATIVE_HOSTS.items() if name == host), None)


_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ENTRY_KEYS = {"kind", "id", "path", "sha256"}
_MAX_NATIVE_FILE_BYTES = 16 * 1024 * 1024


class NativeOutputsError(Exception):
    """Raised by :func:`read_native_outputs` when the outputs cannot be verified."""


@dataclass(frozen=True, slots=True)
class NativeFile:
    """One verified native file and its exact bytes."""

    kind: Literal["agent", "skill"]
    id: str
    path: str
    sha256: str
    content: bytes


@dataclass(frozen=True, slots=True)
class NativeOutputs:
    """The verified native outputs of one host."""

    host: str
    manifest_path: str
    files: tuple[NativeFile, ...]
    digest: str
    """SHA-256 of the manifest's bytes: identifies the harness revision in reports."""

    @property
    def agent_ids(self) -> tuple[str, ...]:
        """Ids of the native agents, sorted."""
        return tuple(sorted(f.id for f in self.files if f.kind == "agent"))

    @property
    def paths(self) -> frozenset[str]:
        """Sandbox-relative paths of every native file."""
        return frozenset(f.path for f in self.files)


def _fail(message: str) -> NativeOutputsError:
    return NativeOutputsError(f"native output verification failed: {message}")


def _check_parents(root: Path, relative: str) -> None:
    current = root
    for part in relative.split("/")[:-1]:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _fail(f"cannot inspect {current}: {exc.strerror}") from exc
        if stat.S_ISLNK(info.st_mode):
            raise _fail(f"a parent of {relative} is a symbolic link")
        if not stat.S_ISDIR(info.st_mode):
            raise _fail(f"a parent of {relative} is not a directory")


def _path_problem(path: str) -> str | None:
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return "unsafe path"
    if re.match(r"^[A-Za-z]:", path):
        return "unsafe path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "unsafe path"
    return None


def _shape_problem(kind: str, file_id: str, path: str) -> str | None:
    parts = path.split("/")
    if kind == "agent" and (len(parts) < 2 or parts[-1] != f"{file_id}.md"):
        return f"agent path must end with {file_id}.md"
    if kind == "skill" and (len(parts) < 3 or parts[-2] != file_id or parts[-1] != "SKILL.md"):
        return f"skill path must end with {file_id}/SKILL.md"
    return None


def _validate_manifest(  # noqa: C901 - the manifest's exact shape, checked field by field in order
    value: Any, known: NativeHost
) -> list[dict[str, str]]:
    if not isinstance(value, dict) or set(value) != {"format", "version", "files"}:
        raise _fail("the manifest must have exactly the keys format, version and files")
    if value["format"] != known.format:
        raise _fail(f"unsupported manifest format {value['format']!r}; expected {known.format!r}")
    if type(value["version"]) is not int or value["version"] != 1:
        raise _fail(f"unsupported manifest version {value['version']!r}; expected 1")
    files = value["files"]
    if not isinstance(files, list):
        raise _fail("manifest files must be an array")
    seen_ids: set[tuple[str, str]] = set()
    seen_paths: set[str] = set()
    entries: list[dict[str, str]] = []
    for index, entry in enumerate(files):
        where = f"manifest entry {index}"
        if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
            raise _fail(f"{where} must have exactly the keys kind, id, path and sha256")
        if not all(isinstance(entry[key], str) for key in _ENTRY_KEYS):
            raise _fail(f"{where} has a non-string value")
        if entry["kind"] not in ("agent", "skill"):
            raise _fail(f"{where} has unknown kind {entry['kind']!r}")
        if not _ID.match(entry["id"]) or len(entry["id"]) > 64:
            raise _fail(f"{where} has invalid id {entry['id']!r}")
        problem = _path_problem(entry["path"]) or _shape_problem(
            entry["kind"], entry["id"], entry["path"]
        )
        if problem:
            raise _fail(f"{where} ({entry['path']!r}): {problem}")
        if not _SHA256.match(entry["sha256"]):
            raise _fail(f"{where} has a digest that is not 64 lowercase hex characters")
        key = (entry["kind"], entry["id"])
        if key in seen_ids:
            raise _fail(f"duplicate {entry['kind']} id {entry['id']!r}")
        if entry["path"] in seen_paths:
            raise _fail(f"duplicate path {entry['path']!r}")
        seen_ids.add(key)
        seen_paths.add(entry["path"])
        entries.append(entry)
    return entries


def _read_owned(root: Path, relative: str) -> bytes:
    _check_parents(root, relative)
    target = root / relative
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # a FIFO must not block the read
    try:
        fd = os.open(target, flags)
    except FileNotFoundError as exc:
        raise _fail(f"owned {relative} target is missing") from exc
    except OSError as exc:
        if target.is_symlink():
            raise _fail(f"owned {relative} target is a symbolic link") from exc
        raise _fail(f"owned {relative} target cannot be read: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(f"owned {relative} target is not a regular file")
        if info.st_size > _MAX_NATIVE_FILE_BYTES:
            raise _fail(f"owned {relative} target is larger than 16 MiB")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise _fail(f"owned {relative} target cannot be read: {exc.strerror}") from exc
    finally:
        os.close(fd)


def read_native_outputs(project_root: Path, host: str) -> NativeOutputs:
    """Verify ``host``'s native outputs under ``project_root`` and return their bytes.

    Raises:
        NativeOutputsError: the manifest or a file is missing, malformed, a symlink,
            or drifted from its recorded SHA-256.
    """
    known = native_host(host)
    if known is None:
        raise _fail(f"unsupported eval host {host!r}")
    try:
        root_info = os.lstat(project_root)
    except OSError as exc:
        raise _fail(f"project root {project_root} is missing") from exc
    if stat.S_ISLNK(root_info.st_mode) or not stat.S_ISDIR(root_info.st_mode):
        raise _fail(f"project root {project_root} is not a real directory")
    _check_parents(project_root, known.path)
    manifest_file = project_root / known.path
    if not manifest_file.exists() and not manifest_file.is_symlink():
        raise _fail(f"{known.label} ownership manifest is missing ({known.path})")
    try:
        text = read_document(manifest_file)
    except DocumentReadError as exc:
        raise _fail(f"ownership manifest {known.path} {exc}") from exc
    try:
        value = parse_document(text, jsonc=False)
    except DocumentParseError as exc:
        raise _fail(
            f"ownership manifest {known.path} is malformed JSON "
            f"({exc.message} at line {exc.line}, column {exc.column})"
        ) from exc
    entries = _validate_manifest(value, known)
    files = []
    for entry in entries:
        content = _read_owned(project_root, entry["path"])
        if hashlib.sha256(content).hexdigest() != entry["sha256"]:
            raise _fail(f"owned {known.label} target drifted: {entry['path']}")
        files.append(
            NativeFile(
                kind=entry["kind"],  # type: ignore[arg-type]
                id=entry["id"],
                path=entry["path"],
                sha256=entry["sha256"],
                content=content,
            )
        )
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    ordered = tuple(sorted(files, key=lambda f: f.path))
    return NativeOutputs(host=host, manifest_path=known.path, files=ordered, digest=digest)


def verify_native_outputs(project_root: Path, host: str) -> NativeOutputs:
    """Like :func:`read_native_outputs`, but fail with a ``native-outputs-not-verified`` diagnostic.

    Raises:
        DiagnosticError: exit code 2.
    """
    try:
        return read_native_outputs(project_root, host)
    except NativeOutputsError as exc:
        known = native_host(host)
        label = known.label if known is not None else host
        raise DiagnosticError(
            [
                error(
                    "native-outputs-not-verified",
                    str(exc),
                    source=".atlante",
                    expected=f"verified native {label} outputs",
                    next=_rebuild_step(project_root),
                )
            ]
        ) from None


def _rebuild_step(project_root: Path) -> str:
    """``next`` for stale native outputs: rebuild, or the clone's manifest tool if it applies.

    The examples in an atlante-eval clone have hand-written native outputs whose
    manifests ``tools/native_manifest.py`` refreshes.
    """
    step = f"run `atlante build` ({ATLANTE_ABOUT}) and try again"
    for directory in (project_root, *project_root.parents):
        tool = directory / "tools" / "native_manifest.py"
        if tool.is_file() and (directory / "atlante_eval").is_dir():
            return (
                f"{step}; for hand-written native outputs (like examples/quickstart), "
                f"refresh the manifests with `python3 {tool} {project_root}`"
            )
    return step
