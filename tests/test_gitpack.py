"""The baseline commit written in-process (trial/gitpack.py) is the commit git writes."""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from atlante_eval.trial.gitops import Baseline, make_baseline, make_skeleton
from atlante_eval.trial.gitpack import write_baseline
from atlante_eval.trial.treestate import take_snapshot


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio."""
    return "asyncio"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def plain_tree(root: Path) -> None:
    """Files git commits as they are, with the orderings and modes that are easy to get wrong."""
    files = {
        "README.md": b"hello\n",
        "a.b": b"a file sorted before the directory a/\n",
        "a/z.txt": b"z\n",
        "a-b/c": b"c\n",
        "a/b/deep/er/file.ts": b"export const x = 1;\n",
        "empty": b"",
        "with space.txt": b"s\n",
        "caf\u00e9/men\u00fc.md": "\u00e9\n".encode(),
        ".github/workflows/ci.yml": b"on: push\n",
        ".gitignore": b"*.log\nbuild/\n",
        "debug.log": b"ignored, still committed\n",
        "build/out.bin": bytes(range(256)) * 16,
        "big.dat": random.Random(7).randbytes(3 * (1 << 20) + 17),  # noqa: S311 - test data, several reads
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "link").symlink_to("a/z.txt")
    (root / "dangling").symlink_to("nowhere/at/all")
    (root / "a" / "up").symlink_to("../README.md")
    (root / "only-empty-dirs" / "inner").mkdir(parents=True)


async def _both(tmp_path: Path, build: Callable[[Path], None]) -> tuple[Baseline, Baseline]:
    """The same tree committed by git (no skeleton) and on a fresh skeleton."""
    made = []
    skeleton = await make_skeleton(tmp_path)
    for name, use in (("git", None), ("skeleton", skeleton)):
        sandbox = tmp_path / name / "project"
        sandbox.mkdir(parents=True)
        build(sandbox)
        made.append(await make_baseline(sandbox, tmp_path / name / "baseline.git", skeleton=use))
    return made[0], made[1]


def _loose(sandbox: Path) -> list[Path]:
    objects = sandbox / ".git" / "objects"
    return [p for p in objects.rglob("*") if p.is_file() and p.parent.name not in ("pack", "info")]


@pytest.mark.anyio
async def test_the_in_process_commit_has_the_tree_git_writes(tmp_path: Path) -> None:
    """Same tree id, entries and blob ids as git's; a sound repository; no loose object."""
    by_git, by_us = await _both(tmp_path, plain_tree)
    ours = tmp_path / "skeleton" / "project"
    theirs = tmp_path / "git" / "project"
    assert git(ours, "rev-parse", "HEAD^{tree}") == git(theirs, "rev-parse", "HEAD^{tree}")
    assert by_us.entries == by_git.entries
    assert {p: s.oid for p, s in by_us.tree.entries.items()} == {
        p: s.oid for p, s in by_git.tree.entries.items()
    }
    assert git(ours, "rev-parse", "HEAD").strip() == by_us.commit
    assert git(ours, "log", "--format=%an <%ae>|%s") == (
        "atlante-eval <atlante-eval@atlante.local>|atlante-eval baseline\n"
    )
    git(ours, "fsck", "--full", "--strict", "--no-dangling")
    assert git(ours, "status", "--porcelain", "--ignored") == ""
    # the writer the test means ran: git's loose objects, or one pack and the loose commit
    commit_file = ours / ".git" / "objects" / by_us.commit[:2] / by_us.commit[2:]
    assert _loose(ours) == [commit_file]
    assert len(_loose(theirs)) > 1
    private = tmp_path / "skeleton" / "baseline.git"
    [idx] = private.glob("baseline-*.idx")
    packed = git(ours, "verify-pack", "-v", str(idx))
    assert git(ours, "rev-parse", "HEAD^{tree}").strip() in packed
    assert by_us.commit not in packed
    assert sorted(by_us.pack_digests) == sorted(p.name for p in private.iterdir())
    assert by_us.commit_object == git(ours, "cat-file", "commit", "HEAD").encode()


@pytest.mark.anyio
async def test_one_tree_gives_one_pack_file_in_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pack holds the tree, not the commit (whose time differs): trials of one fixture
    store the same pack, so a run's final states keep one copy of it."""
    skeleton = await make_skeleton(tmp_path)
    made = []
    for second in (1_700_000_000, 1_800_000_000):
        monkeypatch.setattr(time, "time", lambda second=second: float(second))
        sandbox = tmp_path / str(second) / "project"
        sandbox.mkdir(parents=True)
        plain_tree(sandbox)
        made.append(await make_baseline(sandbox, sandbox.parent / "b.git", skeleton=skeleton))
    first, second_ = made
    assert first.commit != second_.commit
    assert first.pack_digests == second_.pack_digests


@pytest.mark.anyio
async def test_an_agent_sees_an_ordinary_repository(tmp_path: Path) -> None:
    """After the in-process baseline, git in the sandbox diffs, commits and checks out as usual."""
    _, by_us = await _both(tmp_path, plain_tree)
    ours = tmp_path / "skeleton" / "project"
    (ours / "README.md").write_text("changed\n")
    assert git(ours, "status", "--porcelain") == " M README.md\n"
    assert "+changed" in git(ours, "diff")
    git(ours, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qam", "agent")
    assert git(ours, "rev-parse", "HEAD~1").strip() == by_us.commit
    git(ours, "checkout", "-q", by_us.commit, "--", "README.md")
    assert (ours / "README.md").read_text() == "hello\n"


def _nested_repository(root: Path) -> None:
    (root / "sub").mkdir()
    git(root / "sub", "init", "-q")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "pipe")


def _unreadable(root: Path) -> None:
    (root / "secret").write_text("x\n")
    (root / "secret").chmod(0)


def _backslash(root: Path) -> None:
    (root / "a\\b").write_text("x\n")


def _dot_git_alias(root: Path) -> None:
    (root / "dir" / ".GIT").mkdir(parents=True)
    (root / "dir" / ".GIT" / "config").write_text("x\n")


def _linked_gitmodules(root: Path) -> None:
    (root / ".gitmodules").symlink_to("/etc/hostname")


@pytest.mark.parametrize(
    "unusual",
    [_nested_repository, _fifo, _unreadable, _backslash, _dot_git_alias, _linked_gitmodules],
)
def test_what_git_treats_specially_is_left_to_git(
    tmp_path: Path, unusual: Callable[[Path], None]
) -> None:
    """Nested repositories, special files, unreadable files and names git refuses or maps
    elsewhere are not written here (git writes the baseline, with its own rules)."""
    sandbox = tmp_path / "project"
    sandbox.mkdir()
    (sandbox / ".git").mkdir()
    (sandbox / "plain.txt").write_text("plain\n")
    unusual(sandbox)
    private = tmp_path / "baseline.git"
    private.mkdir()
    snapshot = take_snapshot(sandbox, clock_dir=tmp_path)
    assert write_baseline(sandbox, snapshot, private) is None
    assert list(private.iterdir()) == []
    assert list((sandbox / ".git").iterdir()) == []


def test_a_file_changed_after_the_snapshot_is_left_to_git(tmp_path: Path) -> None:
    """The tree must still be the snapshot's: a file rewritten since makes git write it."""
    sandbox = tmp_path / "project"
    (sandbox / ".git").mkdir(parents=True)
    (sandbox / "a.txt").write_text("before\n")
    (sandbox / "b.txt").write_text("b\n")
    private = tmp_path / "baseline.git"
    private.mkdir()
    snapshot = take_snapshot(sandbox, clock_dir=tmp_path)
    (sandbox / "a.txt").write_text("after, and longer\n")
    assert write_baseline(sandbox, snapshot, private) is None
    assert list(private.iterdir()) == []
    (sandbox / "a.txt").unlink()
    (sandbox / "c.txt").write_text("b\n")  # a path the snapshot does not have
    assert write_baseline(sandbox, snapshot, private) is None
    assert list(private.iterdir()) == []
