"""Iterative tree walks and removal: any depth, bounded descriptors, no symlink followed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from atlante_eval._util import fstree
from atlante_eval._util.fstree import OPEN_DIRS, Unreadable, WalkEntry, remove_tree, walk_tree

DEPTH = 1500


def _deep(root: Path, depth: int = DEPTH) -> str:
    """Make ``depth`` nested directories ``d`` under ``root`` with a file at the bottom."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    return "d/" * depth + "bottom.txt"


@pytest.fixture
def deep_root(tmp_path: Path) -> Iterator[Path]:
    """Where a test builds a deep tree; removed afterwards (pytest's own cleanup recurses)."""
    root = tmp_path / "tree"
    yield root
    assert remove_tree(root) is None


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_walk_reaches_the_bottom_of_a_deep_tree_with_few_descriptors(deep_root: Path) -> None:
    """A 1,500-level tree is walked without recursion, holding at most OPEN_DIRS descriptors."""
    bottom = _deep(deep_root)
    before = _open_fds()
    seen = []
    for item in walk_tree(deep_root):
        assert isinstance(item, WalkEntry)
        seen.append(item.path)
        assert _open_fds() <= before + OPEN_DIRS + 2
    assert seen == [bottom]
    assert _open_fds() == before


def test_walk_lists_siblings_after_leaving_a_deep_branch(deep_root: Path) -> None:
    """After a deep branch, the walk climbs back (reopening ancestors) and lists the rest."""
    bottom = _deep(deep_root, depth=OPEN_DIRS * 3)
    (deep_root / "z.txt").write_text("z")
    (deep_root / "d" / "d" / "mid.txt").write_text("m")
    paths = sorted(i.path for i in walk_tree(deep_root) if isinstance(i, WalkEntry))
    assert paths == sorted([bottom, "d/d/mid.txt", "z.txt"])


def test_walk_never_follows_a_symbolic_link(tmp_path: Path) -> None:
    """A symlinked directory is one entry, never entered; the top-level skip list applies."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    root = tmp_path / "root"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("x")
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "sub" / ".git" / "HEAD").write_text("x")
    (root / "link").symlink_to(outside)
    items = list(walk_tree(root, skip_top=frozenset({".git"})))
    assert sorted(i.path for i in items) == ["link", "sub/.git/HEAD"]


def test_walk_reports_a_directory_it_cannot_list(tmp_path: Path) -> None:
    """A directory that cannot be listed is yielded as Unreadable, and the walk goes on."""
    root = tmp_path / "root"
    (root / "locked").mkdir(parents=True)
    (root / "open.txt").write_text("o")
    real = fstree._list

    def refuse(fd: int) -> list[os.DirEntry[str]]:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "locked":
            raise PermissionError(13, "Permission denied")
        return real(fd)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fstree, "_list", refuse)
        items = list(walk_tree(root))
    unreadable = [i for i in items if isinstance(i, Unreadable)]
    assert [(u.path, u.reason) for u in unreadable] == [("locked", "Permission denied")]
    assert [i.path for i in items if isinstance(i, WalkEntry)] == ["open.txt"]


def test_remove_tree_removes_a_deep_read_only_tree(deep_root: Path) -> None:
    """1,500 nested directories, some read-only or mode 000, are removed without raising."""
    _deep(deep_root)
    (deep_root / "d" / "d").chmod(0o500)
    (deep_root / "d").chmod(0)
    assert remove_tree(deep_root) is None
    assert not deep_root.exists()


def test_remove_tree_unlinks_links_and_ignores_missing_paths(tmp_path: Path) -> None:
    """A symlink is unlinked (never followed), a missing path is fine, a file is removed."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("k")
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "file.txt").write_text("f")
    assert remove_tree(tmp_path / "link") is None
    assert remove_tree(tmp_path / "missing") is None
    assert remove_tree(tmp_path / "file.txt") is None
    assert (target / "keep.txt").is_file()
    assert not (tmp_path / "link").exists()
    assert not (tmp_path / "file.txt").exists()


def test_remove_tree_reports_what_it_cannot_remove(tmp_path: Path) -> None:
    """An entry that cannot be removed is reported with its path and reason; the rest goes."""
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "one.txt").write_text("1")
    (tree / "b.txt").write_text("b")
    real = os.unlink

    def refuse(name: str, *, dir_fd: int | None = None) -> None:
        if name == "one.txt":
            raise OSError(16, "Device or resource busy")
        real(name, dir_fd=dir_fd)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "unlink", refuse)
        failure = remove_tree(tree)
    assert failure is not None
    assert failure.path == str(tree / "a" / "one.txt")
    assert failure.reason == "Device or resource busy"
    assert failure.count == 2  # the file, then its directory
    assert not (tree / "b.txt").exists()
    assert (tree / "a" / "one.txt").exists()
