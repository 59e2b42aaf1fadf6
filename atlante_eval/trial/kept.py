"""Make a kept sandbox safe to inspect with git: no agent-written configuration or hook runs.

With ``--keep`` the sandbox stays on disk, and the documented way to look at it
is ``git -C <sandbox>/project diff atlante-eval``. Every repository in it is the
agent's (or the pack's setup's) to write, and git runs code its configuration
names as the user who inspects it: ``core.fsmonitor`` on ``diff`` and
``status``, ``core.pager``, ``diff.external``, hooks (``core.hooksPath``), and
the same in a nested repository git enters because the index holds a gitlink to
it. So before a kept sandbox is handed over, :func:`defuse_repositories`:

* rewrites the ``config`` of every git directory in the tree (the sandbox's
  ``.git``, nested ones, ``.git/modules/*``, ``.git/worktrees/*``) as a neutral
  one (only the object format is kept, from a known list), dropping includes;
* empties every ``hooks`` directory and removes ``config.worktree`` and
  ``commondir`` (which would read configuration elsewhere);
* removes every ``.git`` that is not a directory (a ``gitdir:`` file or a link
  can name a repository outside).

The engine's own git calls never needed this (they force ``core.fsmonitor=false``
and ``core.hooksPath=/dev/null``, see :mod:`.gitops`); the user's do. Files are
changed through descriptors opened without following links; nothing outside the
tree is touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from pathlib import Path

from .._util.fstree import WalkEntry, remove_tree, walk_tree
from .._util.jsondoc import DocumentReadError, read_document
from .._util.paths import UnsafePathError, resolve_no_follow

__all__ = ["NEUTRAL_CONFIG", "defuse_repositories"]

#: The configuration every git directory in a kept sandbox gets.
NEUTRAL_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
_SHA256_CONFIG = (
    "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n"
    "[extensions]\n\tobjectformat = sha256\n"
)
_SHA256 = re.compile(r"^\s*objectformat\s*=\s*sha256\s*$", re.IGNORECASE | re.MULTILINE)
#: Files of a git directory that make git read configuration from elsewhere.
_REDIRECTS = ("config.worktree", "commondir")
#: A ``HEAD`` below these is a ref or a reflog, not a git directory's.
_IN_REFS = frozenset({"refs", "logs"})
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _git_dirs(root: Path) -> tuple[set[str], int]:
    """The git directories below ``root`` (relative), after removing non-directory ``.git``.

    A git directory is one holding a ``HEAD`` file at or below a ``.git`` path segment
    (not inside ``refs`` or ``logs``, where ``HEAD`` names a ref or a reflog).
    """
    found: set[str] = set()
    removed = 0
    for item in walk_tree(root):
        if not isinstance(item, WalkEntry):
            continue
        parts = item.path.split("/")
        if item.name == ".git":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.name, dir_fd=item.dir_fd)
                removed += 1
        elif item.name == "HEAD" and ".git" in parts[:-1] and not _IN_REFS.intersection(parts):
            found.add("/".join(parts[:-1]))
    return found, removed


def _object_format_config(directory: int) -> str:
    """The neutral config, for SHA-256 when the old one said so (read safely, capped)."""
    try:
        old = read_document(Path(f"/proc/self/fd/{directory}/config"), max_bytes=1 << 20)
    except DocumentReadError:
        return NEUTRAL_CONFIG
    return _SHA256_CONFIG if _SHA256.search(old) else NEUTRAL_CONFIG


def _rewrite(directory: int, name: str, text: str) -> None:
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        os.unlink(name, dir_fd=directory)
    fd = os.open(name, _NEW_FILE, 0o644, dir_fd=directory)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _defuse(git_dir: Path) -> None:
    """Neutral config, empty hooks, no redirection, in the git directory ``git_dir``."""
    directory = os.open(git_dir, _NOFOLLOW_DIR)
    try:
        config = _object_format_config(directory)
        for name in ("config", *_REDIRECTS, "hooks"):
            try:
                info = os.stat(name, dir_fd=directory, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                remove_tree(git_dir / name)
            else:
                os.unlink(name, dir_fd=directory)
        _rewrite(directory, "config", config)
        os.mkdir("hooks", 0o755, dir_fd=directory)
    finally:
        os.close(directory)


def defuse_repositories(root: Path) -> int:
    """Defuse every git repository in the kept sandbox ``root``; return how many changed.

    Raises:
        OSError: the tree could not be walked or a repository could not be changed.
    """
    dirs, removed = _git_dirs(root)
    for relative in sorted(dirs, key=lambda rel: rel.count("/")):
        try:
            _defuse(resolve_no_follow(root, relative))
        except UnsafePathError:
            continue  # a component became a link since the walk: nothing is followed
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                raise
    return len(dirs) + removed
