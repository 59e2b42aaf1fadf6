"""The trial's git baseline and the changes an agent made since it.

The baseline is committed in the sandbox (so the agent works in an ordinary git
repository, as with the reference), and its objects are packed into a *private*
directory next to the sandbox. After the host session, changes are collected in a
*grading repository* created only then: a bare repository written by this module
(its config, attributes and refs are ours), into which the private pack is
imported with ``git index-pack``, which names every object by hashing its
content. Grading git runs with ``--git-dir`` on that repository and
``--work-tree`` on the sandbox, hardened settings and an allowlisted environment.

The agent runs as the same user and can reach the private directory (it is
``../baseline.git`` from its working directory), so nothing stored there is
trusted: config, hooks, attributes, replace refs or loose objects planted there
are never read, and a forged or damaged pack cannot yield the baseline commit,
whose id is kept in memory. An agent that rewrites, deletes or re-commits the
sandbox's ``.git``, sets index flags, plants hooks, filters or an fsmonitor, or
tampers with the private pack cannot change what grading sees, and no planted
code runs; sabotage at worst makes the diff uncollectable (``infra-error``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from .._util.environment import git_env
from .._util.jsondoc import DocumentReadError, read_document
from .gitindex import (
    IndexEntry,
    hash_worktree_file,
    read_index,
    store_loose,
    write_grading_index,
)
from .gitpack import WrittenBaseline, write_baseline
from .process import ProcessResult, run_process
from .treestate import TreeSnapshot, changed_paths, hash_missing, take_snapshot

__all__ = [
    "DIFF_LIMIT_CHARS",
    "Baseline",
    "Changes",
    "GitError",
    "collect_changes",
    "git_timeout_s",
    "make_baseline",
    "make_skeleton",
]

#: Longest diff evidence kept in a report.
DIFF_LIMIT_CHARS = 20_000
#: Time limit of a git command that handles no file content.
GIT_BASE_TIMEOUT_S = 60.0
#: Slowest rate of file content git is assumed to manage (hashing, compressing) under load.
GIT_MIN_BYTES_PER_S = 4 * 1024 * 1024
#: Largest changed file staged for the diff evidence (bigger ones are named, not shown).
DIFF_STAGE_FILE_BYTES = 8 * 1024 * 1024
#: Most bytes of changed files staged for the diff evidence.
DIFF_STAGE_TOTAL_BYTES = 64 * 1024 * 1024
#: Most changed paths staged for the diff evidence (it is capped anyway).
DIFF_STAGE_PATHS = 2000
_SHA = re.compile(r"^[0-9a-f]{40,64}$")

#: Settings forced on every git call: no hooks, no fsmonitor, fixed identity, no signing.
_HARDENING = (
    "-c", "core.fsmonitor=false",
    "-c", "core.quotePath=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.autocrlf=false",
    "-c", "core.safecrlf=false",
    "-c", "core.untrackedCache=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "core.logAllRefUpdates=false",
    "-c", "commit.gpgsign=false",
    "-c", "user.name=atlante-eval",
    "-c", "user.email=atlante-eval@atlante.local",
    "-c", "init.defaultBranch=atlante-eval",
    "-c", "advice.addEmbeddedRepo=false",
    # scratch repositories: nothing to make durable; one plain index file (read in-process)
    "-c", "core.fsync=none",
    "-c", "core.splitIndex=false",
    "-c", "index.version=2",
    "-c", "index.sparse=false",
)  # fmt: skip


class GitError(Exception):
    """Raised when a git command fails; the message names the command and its stderr."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """A trial's baseline: the commit and what the sandbox held."""

    commit: str
    """Baseline commit id."""
    tree: TreeSnapshot
    """Every entry of the sandbox at the baseline (what changed paths are decided from)."""
    entries: Mapping[str, IndexEntry]
    """Every committed path's mode and object id (the grading index is written from them)."""
    pack_digests: Mapping[str, str] = field(default_factory=dict)
    """SHA-256 of each file written in the private directory (its pack and index),
    taken before the session: grading uses copies that match them without ``git
    index-pack``; with none recorded, the copied packs are indexed by git."""
    commit_object: bytes | None = None
    """The commit object's content when the pack does not hold it (the baseline was
    written in-process, :mod:`.gitpack`): the grading repository gets it from here."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed in the sandbox since the baseline."""

    paths: tuple[str, ...]
    """Every changed path (modified, added, deleted, unreadable; committed or not), sorted.

    Undecodable bytes of a name are kept as surrogates (see :func:`display_path`).
    """
    diff: str
    """The unified diff against the baseline, capped at :data:`DIFF_LIMIT_CHARS`."""


@functools.lru_cache(maxsize=8)
def _git_program(path: str | None) -> str:
    """``git`` resolved on ``path`` once, so no call pays for a PATH search."""
    return shutil.which("git", path=path) or "git"


def copy_tree(source: Path, target: Path) -> None:
    """Copy a directory tree: directories, file contents and symlinks (no metadata).

    Leaner than :func:`shutil.copytree` (no mode, time or xattr copying), which is
    all a git directory needs.
    """
    os.mkdir(target)
    with os.scandir(source) as entries:
        for entry in entries:
            destination = target / entry.name
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), destination)
            elif entry.is_dir(follow_symlinks=False):
                copy_tree(Path(entry.path), destination)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(entry.path, destination, follow_symlinks=False)


def git_timeout_s(work_bytes: int) -> float:
    """Time limit of a git command that reads or writes ``work_bytes`` of file content.

    A fixed limit made a large fixture an ``infra-error`` as soon as trials ran
    side by side; the limit grows with the bytes, at a pessimistic rate.
    """
    return GIT_BASE_TIMEOUT_S + max(0, work_bytes) / GIT_MIN_BYTES_PER_S


async def _git(
    args: Sequence[str],
    *,
    work_tree: Path,
    git_dir: Path | None = None,
    head_bytes: int | None = None,
    tolerate: frozenset[int] = frozenset(),
    stdin: bytes | None = None,
    work_bytes: int = 0,
    stdout_sink: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    location = ["--git-dir", str(git_dir), "--work-tree", str(work_tree)] if git_dir else []
    env = git_env()
    argv = [_git_program(env.get("PATH")), *_HARDENING, *location, *args]
    result = await run_process(
        argv,
        cwd=work_tree,
        env=env,
        stdin=stdin,
        timeout_s=git_timeout_s(work_bytes),
        capture_bytes=64 * 1024 if head_bytes is None else 4096,
        stdout_head_bytes=head_bytes,
        stdout_sink=stdout_sink,
    )
    truncated = head_bytes is not None and result.aborted
    ok = result.returncode == 0 or result.returncode in tolerate or truncated
    if result.spawn_error or result.timed_out or not ok:
        cause = result.spawn_error or (
            "timed out" if result.timed_out else f"exit {result.returncode}"
        )
        tail = result.stderr.strip()[-400:]
        raise GitError(f"git {args[0]} failed ({cause}){': ' + tail if tail else ''}")
    return result


#: Written to ``info/attributes`` (highest precedence): no filter, text or eol
#: conversion, ident or encoding from a ``.gitattributes``, and no ``-diff``, so the
#: baseline and the changes are the bytes on disk and a planted attribute cannot
#: run a filter, hide a diff or normalise an edit away.
_NEUTRAL_ATTRIBUTES = "* !text !crlf !eol !filter !diff !ident !working-tree-encoding\n"


async def make_skeleton(run_root: Path) -> Path | None:
    """Create an empty repository once per run, to copy instead of ``git init`` per trial.

    It lives in a directory of ``run_root`` with a random name (mode 0700), so
    an agent cannot find it by name and plant configuration in later trials.
    Where the file system behaves as git assumes by default (executable bits,
    symbolic links, case-sensitive names), the files ``git init --template=``
    writes are written here, without a git process; elsewhere git writes them.

    Returns:
        The skeleton's git directory, or ``None`` when it could not be made (each
        trial then runs ``git init`` itself).
    """
    try:
        directory = Path(tempfile.mkdtemp(prefix=".git-skeleton-", dir=run_root))
        if not await anyio.to_thread.run_sync(_write_skeleton, directory):
            await _git(["init", "--quiet", "--template="], work_tree=directory)
    except (GitError, OSError):
        return None
    return directory / ".git"


#: What ``git init --template=`` writes on a file system with git's defaults.
_SKELETON_CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
    "\tlogallrefupdates = true\n"
)


def _write_skeleton(directory: Path) -> bool:
    """Write an empty repository's files in ``directory/.git``; ``False`` if git must probe."""
    probe = directory / "Probe"
    probe.write_bytes(b"")
    try:
        probe.chmod(0o755)
        executable = bool(os.stat(probe).st_mode & stat.S_IXUSR)
        probe.chmod(0o644)
        case_sensitive = not os.path.exists(directory / "probe")
        link = directory / "probe-link"
        try:
            link.symlink_to("Probe")
            link.unlink()
            links = True
        except OSError:
            links = False
    finally:
        probe.unlink()
    if not (executable and case_sensitive and links):
        return False
    git_dir = directory / ".git"
    # git init also makes objects/info and refs/tags; git makes them when it needs them
    for sub in ("objects/pack", "refs/heads"):
        (git_dir / sub).mkdir(parents=True)
    (git_dir / "HEAD").write_text("ref: refs/heads/atlante-eval\n", encoding="utf-8")
    (git_dir / "config").write_text(_SKELETON_CONFIG, encoding="utf-8")
    return True


def _prepare_repository(dot_git: Path, skeleton: Path | None) -> bool:
    """Install the skeleton (if given and no ``.git`` exists), neutral attributes, no index.

    Returns:
        Whether ``git init`` is still needed.
    """
    needs_init = True
    if skeleton is not None and not os.path.lexists(dot_git):
        copy_tree(skeleton, dot_git)
        needs_init = False
    if not needs_init:
        _neutralise(dot_git)
    return needs_init


def _neutralise(dot_git: Path) -> None:
    """Write the neutral attributes and drop any index (and with it any index flag)."""
    (dot_git / "info").mkdir(exist_ok=True)
    (dot_git / "info" / "attributes").write_text(_NEUTRAL_ATTRIBUTES, encoding="utf-8")
    (dot_git / "index").unlink(missing_ok=True)


async def make_baseline(
    sandbox: Path, private_git_dir: Path, *, skeleton: Path | None = None
) -> Baseline:
    """Commit the sandbox as the baseline and pack its objects into a private directory.

    A ``.git`` left by the scenario's setup is reused (its history stays), but its
    index is rebuilt, so no assume-unchanged or skip-worktree flag survives into
    the baseline. The sandbox's entries are recorded too (:func:`take_snapshot`);
    git's time limits grow with the bytes of the sandbox's files.

    Args:
        sandbox: the sandbox root.
        private_git_dir: a new directory for the pack of the baseline's objects
            (its parent must exist, on the sandbox's file system).
        skeleton: an empty repository (:func:`make_skeleton`) copied instead of
            running ``git init``.

    Returns:
        The baseline commit and snapshot.

    Raises:
        GitError: a git command failed or printed no commit id, or the sandbox
            could not be walked.
    """
    dot_git = sandbox / ".git"
    written: WrittenBaseline | None = None
    try:
        fresh = await anyio.to_thread.run_sync(_fresh_baseline, sandbox, private_git_dir, skeleton)
        if fresh is None:  # no skeleton, or a repository setup left: git init
            await _git(["init", "--quiet", "--template="], work_tree=sandbox)
            _neutralise(dot_git)
            snapshot = await anyio.to_thread.run_sync(
                functools.partial(take_snapshot, sandbox, clock_dir=private_git_dir.parent)
            )
        else:
            snapshot, written = fresh
    except OSError as exc:
        raise GitError(f"cannot prepare the baseline repository: {exc}") from exc
    if written is not None:
        return Baseline(
            commit=written.commit,
            tree=snapshot.with_oids({path: oid for path, (_, oid) in written.entries.items()}),
            entries=written.entries,
            pack_digests=written.pack_digests,
            commit_object=written.commit_object,
        )
    return await _commit_with_git(sandbox, private_git_dir, snapshot, make_private=fresh is None)


async def _commit_with_git(
    sandbox: Path, private_git_dir: Path, snapshot: TreeSnapshot, *, make_private: bool
) -> Baseline:
    """Commit the sandbox with ``git add`` and ``commit``; pack it with ``pack-objects``.

    Raises:
        GitError: a git command failed or printed no commit id, or the sandbox
            could not be read.
    """
    dot_git = sandbox / ".git"
    work = snapshot.total_bytes
    await _git(["add", "--all", "--force"], work_tree=sandbox, work_bytes=work)
    await _git(
        ["commit", "--quiet", "--allow-empty", "--no-verify", "-m", "atlante-eval baseline"],
        work_tree=sandbox,
    )
    head = await anyio.to_thread.run_sync(_head_from_files, dot_git)
    if head is None:
        head = (await _git(["rev-parse", "HEAD"], work_tree=sandbox)).stdout.strip()
    if not _SHA.match(head):
        raise GitError(f"git rev-parse HEAD printed no commit id: {head[:80]!r}")
    if make_private:
        try:
            await anyio.Path(private_git_dir).mkdir()
        except OSError as exc:
            raise GitError(f"cannot create the private baseline directory: {exc}") from exc
    await _git(
        ["pack-objects", "--revs", "--quiet", str(private_git_dir / "baseline")],
        work_tree=sandbox,
        stdin=f"{head}\n".encode(),
        work_bytes=work,
    )
    digests = await anyio.to_thread.run_sync(_pack_digests, private_git_dir)
    entries = await _committed_entries(sandbox, head)
    snapshot = snapshot.with_oids(
        {path: oid for path, (mode, oid) in entries.items() if mode != _GITLINK}
    )
    try:
        snapshot = await anyio.to_thread.run_sync(
            functools.partial(hash_missing, sandbox, snapshot, sha256=len(head) == 64)
        )
    except OSError as exc:
        raise GitError(f"cannot read the baseline files: {exc}") from exc
    return Baseline(commit=head, tree=snapshot, entries=entries, pack_digests=digests)


_GITLINK = 0o160000


def _fresh_baseline(
    sandbox: Path, private_git_dir: Path, skeleton: Path | None
) -> tuple[TreeSnapshot, WrittenBaseline | None] | None:
    """Install the skeleton, snapshot the sandbox and commit it without git, in one thread.

    Returns:
        ``None`` when ``git init`` is needed (no skeleton, or a ``.git`` left by
        setup); else the snapshot and the commit (``None``: git must write it).
        The private directory is created here.
    """
    if _prepare_repository(sandbox / ".git", skeleton):
        return None
    snapshot = take_snapshot(sandbox, clock_dir=private_git_dir.parent)
    os.mkdir(private_git_dir)
    return snapshot, write_baseline(sandbox, snapshot, private_git_dir)


def _pack_digests(private_git_dir: Path) -> dict[str, str]:
    """SHA-256 of the pack and its index that ``pack-objects`` just wrote (none: ``{}``)."""
    digests: dict[str, str] = {}
    try:
        with os.scandir(private_git_dir) as entries:
            names = sorted(e.name for e in entries if e.is_file(follow_symlinks=False))
        for name in names:
            if name.endswith((".pack", ".idx")):
                digests[name] = hashlib.sha256((private_git_dir / name).read_bytes()).hexdigest()
    except OSError:
        return {}
    packs = {n.removesuffix(".pack") for n in digests if n.endswith(".pack")}
    indexes = {n.removesuffix(".idx") for n in digests if n.endswith(".idx")}
    return digests if packs and packs == indexes else {}


async def _committed_entries(sandbox: Path, head: str) -> dict[str, IndexEntry]:
    """Every path of the baseline commit with its mode and object id.

    Read from the index ``git commit`` just wrote (no agent has run yet), or,
    when that index is in a form :func:`read_index` does not read, from ``git
    ls-tree``.
    """
    entries = await anyio.to_thread.run_sync(
        functools.partial(read_index, sandbox / ".git" / "index", sha256=len(head) == 64)
    )
    if entries is not None:
        return entries
    blobs = _BlobIds()
    await _git(
        ["ls-tree", "-r", "-z", "--full-tree", head],
        work_tree=sandbox,
        stdout_sink=blobs.feed,
    )
    return blobs.finish()


class _BlobIds:
    """Parse ``git ls-tree -r -z`` output as it streams in: path → (mode, object id)."""

    def __init__(self) -> None:
        self._pending = b""
        self.oids: dict[str, IndexEntry] = {}

    def feed(self, chunk: bytes) -> None:
        """Take the next chunk; complete records are parsed, a partial one is kept."""
        data = self._pending + chunk
        end = data.rfind(b"\0")
        if end < 0:
            self._pending = data
            return
        self._pending = data[end + 1 :]
        for record in data[:end].split(b"\0"):
            self._record(record)

    def _record(self, record: bytes) -> None:
        meta, tab, path = record.partition(b"\t")
        fields = meta.split(b" ")
        if tab and len(fields) == 3 and fields[1] in (b"blob", b"commit"):
            mode = int(fields[0], 8)
            self.oids[os.fsdecode(path)] = (mode, bytes.fromhex(fields[2].decode("ascii")))

    def finish(self) -> dict[str, IndexEntry]:
        """The entries (a trailing record without NUL is parsed too)."""
        if self._pending:
            self._record(self._pending)
            self._pending = b""
        return self.oids


def _head_from_files(git_dir: Path) -> str | None:
    """Read the commit id of HEAD from the repository files (no git process).

    The files are in the sandbox: each is read without blocking (a FIFO is refused),
    regular files only, never through a symbolic link, at most 4 KiB.
    """
    try:
        head = read_document(git_dir / "HEAD", max_bytes=_REF_BYTES).strip()
        if head.startswith("ref: "):
            ref = head[len("ref: ") :]
            if not ref.startswith("refs/heads/") or ".." in ref.split("/"):
                return None
            head = read_document(git_dir / ref, max_bytes=_REF_BYTES).strip()
    except DocumentReadError:
        return None
    return head if _SHA.match(head) else None


#: Largest ``HEAD`` or branch file read from a sandbox's repository.
_REF_BYTES = 4096
#: The whole configuration of a grading repository.
_GRADING_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"


def _grading_repository(
    sandbox: Path, private_git_dir: Path, baseline: Baseline
) -> tuple[Path, list[Path]]:
    """Create a fresh bare repository next to the sandbox holding copies of the private packs.

    With the baseline's digests (the pack and index files as written before the
    session), exactly those files are copied, and each copy must match its digest;
    a commit object kept in memory is written too.

    Returns:
        The repository and the copied pack files still to be indexed (none when
        ``digests`` verified the pack and its index).

    Raises:
        GitError: the sandbox root is no longer a real directory, or the private
            directory holds no pack.
        OSError: the repository could not be written.
    """
    try:
        root_mode = os.lstat(sandbox).st_mode
    except OSError as exc:
        raise GitError(f"cannot inspect the sandbox root: {exc.strerror}") from exc
    if not stat.S_ISDIR(root_mode):
        raise GitError("the sandbox root was replaced during the session (not a real directory)")
    digests = baseline.pack_digests
    packs = _private_packs(private_git_dir) if not digests else []
    if not packs and not digests:
        raise GitError(_DAMAGED)
    repository = Path(tempfile.mkdtemp(prefix="grading-", suffix=".git", dir=sandbox.parent))
    for directory in ("objects/pack", "refs", "info"):
        (repository / directory).mkdir(parents=True)
    (repository / "HEAD").write_text("ref: refs/heads/atlante-eval\n", encoding="utf-8")
    (repository / "config").write_text(_GRADING_CONFIG, encoding="utf-8")
    (repository / "info" / "attributes").write_text(_NEUTRAL_ATTRIBUTES, encoding="utf-8")
    if baseline.commit_object is not None:
        commit = bytes.fromhex(baseline.commit)
        store_loose(repository / "objects", commit, baseline.commit_object, kind=b"commit")
    pack_dir = repository / "objects" / "pack"
    for name, digest in digests.items():
        try:
            copied = _copy_no_follow(private_git_dir / name, pack_dir / f"pack-{name}")
        except FileNotFoundError as exc:
            raise GitError(_DAMAGED) from exc
        if copied != digest:
            raise GitError(_DAMAGED)
    copies = []
    for number, pack in enumerate(packs):
        copy = pack_dir / f"pack-baseline-{number}.pack"
        _copy_no_follow(Path(pack), copy)
        copies.append(copy)
    return repository, copies


_DAMAGED = "the private baseline was removed or damaged during the session"


def _private_packs(private_git_dir: Path) -> list[str]:
    try:
        with os.scandir(private_git_dir) as entries:
            return sorted(
                entry.path
                for entry in entries
                if entry.name.endswith(".pack") and entry.is_file(follow_symlinks=False)
            )
    except OSError:
        return []


def _copy_no_follow(source: Path, target: Path) -> str:
    """Copy a regular file without following a symbolic link at ``source``; return its SHA-256."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(source, flags | getattr(os, "O_NONBLOCK", 0))
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GitError(_DAMAGED)
        with open(fd, "rb", closefd=False) as reader, open(target, "xb") as writer:
            while chunk := reader.read(1 << 20):
                digest.update(chunk)
                writer.write(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _is_dot_git(path: str) -> bool:
    """Whether a path has a component git refuses to index (``.git`` in any case)."""
    return any(part.lower().rstrip(". ") in (".git", "git~1") for part in path.split("/"))


@dataclass(frozen=True, slots=True)
class _Staging:
    """How each changed path enters the diff evidence's index."""

    add: list[str]
    """Regular files and symlinks to hash into the index."""
    remove: list[str]
    """Paths that are no file or symlink now (deleted, a directory, a special file)."""
    unshown: int
    """Changed paths left out of the diff (too large, unreadable, inside a ``.git``)."""
    runtime: int
    """The host's runtime artefacts among the changed paths (never in the diff)."""
    add_bytes: int


def _staging(sandbox: Path, paths: Sequence[str], ignored: Callable[[str], bool]) -> _Staging:
    """Decide how each changed path enters the diff (the host's runtime artefacts never do)."""
    add: list[str] = []
    remove: list[str] = []
    unshown = 0
    total = 0
    graded = [path for path in paths if not ignored(path)]
    for number, path in enumerate(graded):
        if number >= DIFF_STAGE_PATHS:
            unshown += len(graded) - number
            break
        if _is_dot_git(path):
            unshown += 1
            continue
        try:
            info = os.lstat(sandbox / path)
        except (FileNotFoundError, NotADirectoryError):
            remove.append(path)
            continue
        except OSError:
            unshown += 1
            continue
        if stat.S_ISLNK(info.st_mode):
            add.append(path)
        elif not stat.S_ISREG(info.st_mode):
            remove.append(path)
        elif (
            info.st_size > DIFF_STAGE_FILE_BYTES
            or total + info.st_size > DIFF_STAGE_TOTAL_BYTES
            or not os.access(sandbox / path, os.R_OK)
        ):
            unshown += 1
        else:
            add.append(path)
            total += info.st_size
    return _Staging(
        add=add,
        remove=remove,
        unshown=unshown,
        runtime=len(paths) - len(graded),
        add_bytes=total,
    )


async def collect_changes(
    sandbox: Path,
    private_git_dir: Path,
    baseline: Baseline,
    *,
    ignored: Callable[[str], bool] = lambda _path: False,
) -> Changes:
    """Return every path changed since ``baseline`` and the capped diff evidence.

    The paths come from a walk of the sandbox compared with the baseline's
    snapshot (:func:`changed_paths`), complete whatever their number. The diff is
    made in a fresh grading repository built from the private pack (see the
    module docstring), so nothing the agent did to either ``.git`` affects it;
    files too large for the evidence are counted in it, not read, and so are
    the paths ``ignored`` (the host's runtime artefacts), whose contents are
    no evidence of the agent's work.

    Raises:
        GitError: the sandbox root was replaced, the baseline could not be
            recovered, or a git command failed.
    """
    grading, packs, paths, staging = await anyio.to_thread.run_sync(
        _prepare_grading, sandbox, private_git_dir, baseline, ignored
    )
    if packs:
        await _import_and_stage(grading, packs, sandbox, baseline, staging)
    return Changes(paths=tuple(paths), diff=await _diff(grading, sandbox, baseline, staging))


def _prepare_grading(
    sandbox: Path, private_git_dir: Path, baseline: Baseline, ignored: Callable[[str], bool]
) -> tuple[Path, list[Path], list[str], _Staging]:
    """All of grading before git, in one worker thread: the grading repository, the changed
    paths, what to stage and, unless a copied pack must be imported first, the index.

    Returns:
        The repository, the packs still to import, the changed paths and the staging.

    Raises:
        GitError: the repository could not be created, the sandbox walked or the
            index written.
    """
    try:
        grading, packs = _grading_repository(sandbox, private_git_dir, baseline)
    except OSError as exc:
        raise GitError(f"cannot create the grading repository: {exc}") from exc
    try:
        paths = changed_paths(sandbox, baseline.tree, sha256=len(baseline.commit) == 64)
        staging = _staging(sandbox, paths, ignored)
    except OSError as exc:
        raise GitError(f"cannot walk the sandbox: {exc}") from exc
    if not packs:
        _index_or_fail(grading, sandbox, baseline, staging)
    return grading, packs, paths, staging


async def _import_and_stage(
    grading: Path, packs: Sequence[Path], sandbox: Path, baseline: Baseline, staging: _Staging
) -> None:
    """Import the copied packs, then write the index: the baseline with the changes over it.

    Raises:
        GitError: a git command failed (a forged pack cannot supply the baseline).
    """
    work = baseline.tree.total_bytes
    for pack in packs:
        # index-pack names each object by hashing it: a forged pack cannot supply
        # the baseline commit, whose id was kept in memory.
        await _git(["index-pack", str(pack)], work_tree=sandbox, git_dir=grading, work_bytes=work)
    await anyio.to_thread.run_sync(_index_or_fail, grading, sandbox, baseline, staging)


def _index_or_fail(grading: Path, sandbox: Path, baseline: Baseline, staging: _Staging) -> None:
    try:
        _write_index(grading, sandbox, baseline, staging)
    except OSError as exc:
        raise GitError(f"cannot write the grading index: {exc}") from exc


def _write_index(grading: Path, sandbox: Path, baseline: Baseline, staging: _Staging) -> None:
    """The grading index, as ``read-tree`` of the baseline then ``update-index`` would make it.

    Each staged path is read once, never through a symbolic link; one that is no
    longer a file or link when it is read is left out, as a removed path.
    """
    sha256 = len(baseline.commit) == 64
    added: dict[str, tuple[IndexEntry, bytes]] = {}
    for path in staging.add:
        hashed = _hash_staged(sandbox, path, sha256=sha256)
        if hashed is not None:
            added[path] = hashed
    gone = [*staging.remove, *(path for path in staging.add if path not in added)]
    write_grading_index(grading, baseline.entries, remove=gone, add=added, sha256=sha256)


_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _hash_staged(sandbox: Path, path: str, *, sha256: bool) -> tuple[IndexEntry, bytes] | None:
    """Hash the sandbox file ``path``, its parents entered without following a symbolic link."""
    *parents, name = path.split("/")
    try:
        fd = os.open(sandbox, _DIR_OPEN)
    except OSError:
        return None
    try:
        for part in parents:
            child = os.open(part, _DIR_OPEN, dir_fd=fd)
            os.close(fd)
            fd = child
        return hash_worktree_file(fd, name, sha256=sha256)
    except OSError:
        return None
    finally:
        os.close(fd)


async def _diff(grading: Path, sandbox: Path, baseline: Baseline, staging: _Staging) -> str:
    """The staged changes as a patch, capped, with a note of every change it leaves out.

    Raises:
        GitError: git could not make the diff.
    """
    patch = await _git(
        [
            "diff",
            "--cached",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            baseline.commit,
        ],
        work_tree=sandbox,
        git_dir=grading,
        head_bytes=DIFF_LIMIT_CHARS * 4,
    )
    diff = patch.stdout
    if len(diff) > DIFF_LIMIT_CHARS or patch.aborted:
        diff = diff[:DIFF_LIMIT_CHARS] + "\n… truncated"
    if staging.unshown:
        diff += (
            f"\n… {staging.unshown} changed path(s) not shown in this diff "
            "(larger than the diff's limits, unreadable, or inside a .git directory)"
        )
    if staging.runtime:
        diff += f"\n… {staging.runtime} changed runtime artefact path(s) of the host not shown"
    return diff
