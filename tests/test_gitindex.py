"""The in-process git index: read as git wrote it, written as git reads it, or left to git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from atlante_eval.trial.gitindex import hash_worktree_file, read_index, write_grading_index

_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Run git in ``root`` with no user or system configuration."""
    return subprocess.run(
        ["git", *args], cwd=root, env=_ENV, input=stdin, capture_output=True, check=True
    ).stdout


def ls_tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """What ``git ls-tree -r`` says HEAD holds: path → (mode, object id)."""
    out: dict[str, tuple[int, bytes]] = {}
    for record in git(root, "ls-tree", "-r", "-z", "--full-tree", "HEAD").split(b"\0"):
        if record:
            meta, _tab, name = record.partition(b"\t")
            mode, _kind, oid = meta.split(b" ")
            out[os.fsdecode(name)] = (int(mode, 8), bytes.fromhex(oid.decode()))
    return out


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A commit of plain, executable, long-named and non-ASCII files, a link and a nested repo."""
    root = tmp_path / "repo"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "src" / "deep" / ("n" * 5000)[:200]).write_text("long\n")
    (root / "src" / "é ü.txt").write_bytes(b"\x00binary\xff")
    (root / "link").symlink_to("README.md")
    nested = root / "vendor"
    nested.mkdir()
    git(nested, "init", "-q")
    (nested / "x").write_text("x\n")
    git(nested, "add", "x")
    git(nested, "commit", "-q", "-m", "n")
    git(root, "init", "-q")
    git(root, "add", "--all", "--force")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_read_index_is_what_ls_tree_says(repo: Path) -> None:
    """Every committed path, its mode and object id, read from the index without git."""
    entries = read_index(repo / ".git" / "index", sha256=False)
    assert entries is not None
    assert entries == ls_tree(repo)
    assert entries["vendor"][0] == 0o160000
    assert entries["link"][0] == 0o120000
    assert entries["run.sh"][0] == 0o100755


@pytest.mark.parametrize("option", [["--index-version", "4"], ["--split-index"]])
def test_an_index_in_another_form_is_left_to_git(repo: Path, option: list[str]) -> None:
    """A version 4 index (compressed names) or a split index is refused: the caller asks git."""
    git(repo, "update-index", *option)
    written = (repo / ".git" / "index").read_bytes()
    split = any((repo / ".git").glob("sharedindex.*"))
    assert written[4:8] == b"\x00\x00\x00\x04" or split
    assert read_index(repo / ".git" / "index", sha256=False) is None


def test_a_damaged_index_is_left_to_git(repo: Path) -> None:
    """One flipped byte fails the checksum: nothing is trusted from that file."""
    index = repo / ".git" / "index"
    data = bytearray(index.read_bytes())
    data[40] ^= 1
    index.write_bytes(bytes(data))
    assert read_index(index, sha256=False) is None
    assert read_index(repo / "missing", sha256=False) is None


def test_the_written_index_diffs_as_read_tree_and_update_index_would(repo: Path) -> None:
    """The same patch as git's own staging: a modified, an added, a removed file and a new link."""
    (repo / "README.md").write_text("changed\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "run.sh").unlink()
    (repo / "link2").symlink_to("new.txt")
    base = read_index(repo / ".git" / "index", sha256=False)
    assert base is not None
    fd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
    try:
        added = {}
        for name in ("README.md", "new.txt", "link2"):
            hashed = hash_worktree_file(fd, name, sha256=False)
            assert hashed is not None
            added[name] = hashed
        assert hash_worktree_file(fd, "run.sh", sha256=False) is None
    finally:
        os.close(fd)
    ours = repo.parent / "ours.git"
    git(repo.parent, "init", "-q", "--bare", str(ours))
    git(repo, "--git-dir", str(repo / ".git"), "repack", "-q", "-a")
    for pack in (repo / ".git" / "objects" / "pack").iterdir():
        (ours / "objects" / "pack" / pack.name).write_bytes(pack.read_bytes())
    write_grading_index(ours, base, remove=["run.sh"], add=added, sha256=False)
    diff = ["diff", "--cached", "--no-renames", "--no-color", "HEAD"]
    theirs = git(repo, "add", "--all")  # the sandbox's own git, the reference
    assert theirs == b""
    expected = git(repo, *diff)
    head = git(repo, "rev-parse", "HEAD").strip().decode()
    got = git(repo, "--git-dir", str(ours), "--work-tree", str(repo), *diff[:-1], head)
    assert got == expected
    assert b"+changed" in got
    assert b"deleted file mode 100755" in got
    assert b"new.txt" in got
    git(repo, "--git-dir", str(ours), "fsck", "--no-dangling")


def test_the_written_skeleton_is_what_git_init_writes(tmp_path: Path) -> None:
    """The skeleton's files, written without git, are byte for byte those of ``git init``;
    of its directories, the two git makes when it needs them are left out."""
    import anyio

    from atlante_eval.trial.gitops import make_skeleton

    ours = anyio.run(make_skeleton, tmp_path)
    assert ours is not None
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    git(theirs, "-c", "init.defaultBranch=atlante-eval", "init", "-q", "--template=")

    def listing(root: Path) -> dict[str, bytes | None]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))
        }

    expected = listing(theirs / ".git")
    assert expected.pop("objects/info") is None
    assert expected.pop("refs/tags") is None
    assert listing(ours) == expected
