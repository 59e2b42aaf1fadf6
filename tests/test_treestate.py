"""Changed paths from a snapshot: exact, complete, and reading only files whose stat moved."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from atlante_eval._util.paths import display_path
from atlante_eval.trial import treestate
from atlante_eval.trial.treestate import blob_id, changed_paths, take_snapshot


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small sandbox: files, an executable, a symlink, a nested directory."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print(1)\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("README.md")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    return root


def _snapshot(root: Path) -> treestate.TreeSnapshot:
    """A snapshot with the blob ids git would give (computed here)."""
    snapshot = take_snapshot(root, clock_dir=root.parent)
    return treestate.hash_missing(root, snapshot, sha256=False)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    hashed: list[str] = []
    real = treestate._hash_entry

    def spy(item: Any, *, sha256: bool) -> bytes | None:
        hashed.append(item.path)
        return real(item, sha256=sha256)

    monkeypatch.setattr(treestate, "_hash_entry", spy)
    return hashed


def test_blob_id_is_gits(tmp_path: Path) -> None:
    """blob_id equals git's object id of the file content (SHA-1 and SHA-256)."""
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    for sha256, algorithm in ((False, hashlib.sha1), (True, hashlib.sha256)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert blob_id(fd, 6, sha256=sha256) == algorithm(b"blob 6\0hello\n").digest()
        finally:
            os.close(fd)


def test_an_untouched_tree_has_no_changes_and_nothing_is_read(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every stat as recorded (and not racy), no file is read."""
    snapshot = _snapshot(tree)
    snapshot = treestate.TreeSnapshot(
        entries=snapshot.entries, stamp_ns=2**62, total_bytes=snapshot.total_bytes
    )
    hashed = _spy(monkeypatch)
    assert changed_paths(tree, snapshot) == []
    assert hashed == []


def test_each_kind_of_change_is_found(tree: Path) -> None:
    """Added, deleted, edited, same-size rewritten, exec-bit, retargeted and retyped paths."""
    snapshot = _snapshot(tree)
    (tree / "new.txt").write_text("n")
    (tree / "src" / "app.py").unlink()
    (tree / "README.md").write_text("HELLO\n")  # same size, other bytes
    (tree / "run.sh").chmod(0o644)
    (tree / "link").unlink()
    (tree / "link").symlink_to("run.sh")
    (tree / ".git" / "HEAD").write_text("changed\n")  # the root .git is not the tree
    assert changed_paths(tree, snapshot) == [
        "README.md",
        "link",
        "new.txt",
        "run.sh",
        "src/app.py",
    ]


def test_a_rewrite_with_the_old_times_is_still_found(tree: Path) -> None:
    """Same size and the old mtime restored: the change time still moves, so it is read."""
    snapshot = _snapshot(tree)
    before = os.stat(tree / "README.md")
    (tree / "README.md").write_text("HELLO\n")
    os.utime(tree / "README.md", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert changed_paths(tree, snapshot) == ["README.md"]


def test_touching_without_changing_the_content_is_no_change(tree: Path) -> None:
    """A file rewritten with its own content is read, compared and found unchanged."""
    snapshot = _snapshot(tree)
    (tree / "README.md").write_text("hello\n")
    assert changed_paths(tree, snapshot) == []


def test_racily_clean_entries_are_read(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry touched in the snapshot's clock tick is read even when its stat is unchanged."""
    snapshot = _snapshot(tree)
    racy = treestate.TreeSnapshot(entries=snapshot.entries, stamp_ns=0, total_bytes=0)
    hashed = _spy(monkeypatch)
    assert changed_paths(tree, racy) == []
    assert sorted(hashed) == ["README.md", "run.sh", "src/app.py"]


def test_names_that_are_not_utf8_are_kept_exact_and_shown_escaped(tree: Path) -> None:
    """A non-UTF-8 name is one changed path, shown with ``\\xNN`` escapes."""
    snapshot = _snapshot(tree)
    with open(os.path.join(os.fsencode(tree), b"caf\xe9"), "wb") as handle:
        handle.write(b"x")
    [path] = changed_paths(tree, snapshot)
    assert os.fsencode(path) == b"caf\xe9"
    assert display_path(path) == "caf\\xe9"
    assert display_path("plain/é.txt") == "plain/é.txt"
