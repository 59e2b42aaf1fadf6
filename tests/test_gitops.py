"""The git baseline, its private copy, and the changes collected after a trial."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from atlante_eval.trial import GitError, collect_changes, gitops
from atlante_eval.trial.gitops import DIFF_LIMIT_CHARS, Baseline, make_skeleton

#: Which writer the baseline of the running test uses (see ``baseline_writer``).
_WRITER = {"mode": "git"}


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio."""
    return "asyncio"


@pytest.fixture(autouse=True, params=["git", "in-process"])
def baseline_writer(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs twice: git's processes write the baseline, then (on a fresh
    skeleton, as a run's trials do) the in-process pack of ``trial/gitpack.py``."""
    _WRITER["mode"] = request.param
    yield request.param
    _WRITER["mode"] = "git"


async def make_baseline(sandbox: Path, private: Path) -> Baseline:
    """:func:`gitops.make_baseline` with the writer of the running test."""
    skeleton = None
    if _WRITER["mode"] == "in-process":
        skeleton = await make_skeleton(private.parent)
        assert skeleton is not None
    return await gitops.make_baseline(sandbox, private, skeleton=skeleton)


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git as an agent would in the sandbox (its own identity, full config)."""
    identity = {"NAME": "agent", "EMAIL": "agent@example.test"}
    env = {**os.environ}
    for role in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{role}_{key}": value for key, value in identity.items()})
    return subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=check
    )


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def trial(tmp_path: Path) -> tuple[Path, Path]:
    """A sandbox with a small fixture and the path of its private git dir."""
    sandbox = tmp_path / "project"
    write(sandbox, "README.md", "hello\n")
    write(sandbox, "src/app.py", "print('app')\n")
    write(sandbox, ".gitignore", "*.log\nbuild/\n")
    write(sandbox, "debug.log", "ignored by the fixture, still baseline\n")
    return sandbox, tmp_path / "baseline.git"


@pytest.mark.anyio
async def test_baseline_commits_everything_and_copies_the_repository(
    trial: tuple[Path, Path],
) -> None:
    """The baseline is one commit of every file (ignored ones forced in), packed privately
    (written in-process, the commit itself is kept in memory for grading)."""
    sandbox, private = trial
    baseline = await make_baseline(sandbox, private)
    sha = baseline.commit
    assert len(sha) == 40
    assert all(c in "0123456789abcdef" for c in sha)
    assert git(sandbox, "rev-parse", "HEAD").stdout.strip() == sha
    assert git(sandbox, "log", "--format=%s").stdout.strip() == "atlante-eval baseline"
    files = git(sandbox, "ls-files").stdout.split()
    assert sorted(files) == [".gitignore", "README.md", "debug.log", "src/app.py"]
    assert git(sandbox, "status", "--porcelain").stdout == ""
    [pack] = private.glob("*.pack")
    packed = git(sandbox, "verify-pack", "-v", str(pack)).stdout
    assert git(sandbox, "rev-parse", "HEAD^{tree}").stdout.strip() in packed
    assert (sha in packed) is (baseline.commit_object is None)
    assert not (sandbox / ".git" / "hooks").exists()


@pytest.mark.anyio
async def test_empty_fixture_gets_an_empty_baseline(tmp_path: Path) -> None:
    """An empty sandbox still gets a baseline commit and no changes."""
    sandbox = tmp_path / "project"
    sandbox.mkdir()
    sha = await make_baseline(sandbox, tmp_path / "b.git")
    changes = await collect_changes(sandbox, tmp_path / "b.git", sha)
    assert changes.paths == ()
    assert changes.diff == ""


@pytest.mark.anyio
async def test_no_changes_means_no_paths_and_an_empty_diff(trial: tuple[Path, Path]) -> None:
    """An untouched sandbox reports no changed paths and an empty diff."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ()
    assert changes.diff == ""


@pytest.mark.anyio
async def test_modified_added_deleted_and_ignored_files_are_changes(
    trial: tuple[Path, Path],
) -> None:
    """Modified, added, deleted, gitignored and mode-changed files all count, sorted."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    write(sandbox, "README.md", "changed\n")
    write(sandbox, "new/file.txt", "new\n")
    write(sandbox, "build/out.bin", "hidden by .gitignore\n")
    (sandbox / "src" / "app.py").chmod(0o755)
    (sandbox / "debug.log").unlink()
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == (
        "README.md",
        "build/out.bin",
        "debug.log",
        "new/file.txt",
        "src/app.py",
    )
    assert "-hello\n+changed" in changes.diff
    assert "deleted file mode" in changes.diff
    assert "old mode 100644\nnew mode 100755" in changes.diff


@pytest.mark.anyio
async def test_commits_by_the_agent_are_still_changes(trial: tuple[Path, Path]) -> None:
    """An agent that commits (or amends the baseline) cannot hide its edits."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    write(sandbox, "secret.txt", "out of scope\n")
    git(sandbox, "add", "-A")
    git(sandbox, "commit", "-qm", "agent work")
    write(sandbox, "README.md", "amended\n")
    git(sandbox, "commit", "-qa", "--amend", "-m", "atlante-eval baseline")
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("README.md", "secret.txt")
    assert "+out of scope" in changes.diff


@pytest.mark.anyio
async def test_rewriting_history_in_the_sandbox_is_ignored(trial: tuple[Path, Path]) -> None:
    """A new root commit, a moved branch or pruned objects in the sandbox change nothing."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    write(sandbox, "extra.txt", "x\n")
    git(sandbox, "checkout", "-q", "--orphan", "fresh")
    git(sandbox, "add", "-A")
    git(sandbox, "commit", "-qm", "rewritten")
    git(sandbox, "branch", "-D", "atlante-eval")
    git(sandbox, "reflog", "expire", "--expire=now", "--all")
    git(sandbox, "gc", "-q", "--prune=now")
    assert git(sandbox, "cat-file", "-e", sha.commit, check=False).returncode != 0
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("extra.txt",)


@pytest.mark.anyio
async def test_deleting_the_sandbox_git_directory_changes_nothing(
    trial: tuple[Path, Path],
) -> None:
    """With the sandbox .git deleted, changes are still collected and .git is not one."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    shutil.rmtree(sandbox / ".git")
    write(sandbox, "README.md", "after\n")
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("README.md",)


@pytest.mark.anyio
async def test_a_fake_git_directory_in_the_sandbox_is_ignored(trial: tuple[Path, Path]) -> None:
    """A .git replaced by a file or another repository is neither a change nor consulted."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    shutil.rmtree(sandbox / ".git")
    (sandbox / ".git").write_text("gitdir: /nonexistent\n")
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ()


@pytest.mark.anyio
@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
async def test_index_flags_set_by_the_agent_do_not_hide_edits(
    trial: tuple[Path, Path], flag: str
) -> None:
    """assume-unchanged and skip-worktree in the sandbox index hide nothing."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    git(sandbox, "update-index", flag, "README.md")
    write(sandbox, "README.md", "hidden edit\n")
    assert git(sandbox, "status", "--porcelain").stdout == ""
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("README.md",)
    assert "+hidden edit" in changes.diff


@pytest.mark.anyio
async def test_index_flags_set_by_setup_do_not_reach_the_baseline(tmp_path: Path) -> None:
    """Flags left by a setup-made repository are dropped when the baseline index is built."""
    sandbox = tmp_path / "project"
    write(sandbox, "a.txt", "a\n")
    git(sandbox, "init", "-q")
    git(sandbox, "add", "-A")
    git(sandbox, "commit", "-qm", "setup history")
    git(sandbox, "update-index", "--skip-worktree", "a.txt")
    sha = await make_baseline(sandbox, tmp_path / "b.git")
    assert git(sandbox, "log", "--format=%s").stdout.split("\n")[:2] == [
        "atlante-eval baseline",
        "setup history",
    ]
    write(sandbox, "a.txt", "edited\n")
    changes = await collect_changes(sandbox, tmp_path / "b.git", sha)
    assert changes.paths == ("a.txt",)


@pytest.mark.anyio
async def test_planted_hooks_fsmonitor_and_filters_never_run(
    trial: tuple[Path, Path], tmp_path: Path
) -> None:
    """Hooks, an fsmonitor, a filter driver and an external diff planted in .git never run."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    marker = tmp_path / "pwned"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(0o755)
    hooks = sandbox / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-index-change", "fsmonitor-watchman"):
        shutil.copy(script, hooks / hook)
    for key, value in (
        ("core.fsmonitor", str(script)),
        ("core.hooksPath", str(hooks)),
        ("filter.evil.clean", str(script)),
        ("diff.evil.textconv", str(script)),
        ("diff.external", str(script)),
    ):
        git(sandbox, "config", key, value)
    write(sandbox, ".gitattributes", "* filter=evil diff=evil\n")
    write(sandbox, "README.md", "edited\n")
    changes = await collect_changes(sandbox, private, sha)
    assert not marker.exists()
    assert changes.paths == (".gitattributes", "README.md")
    assert "+edited" in changes.diff


@pytest.mark.anyio
async def test_attributes_cannot_hide_or_normalise_an_edit(tmp_path: Path) -> None:
    """A -diff or text attribute neither hides a diff nor turns a CRLF edit into no change."""
    sandbox = tmp_path / "project"
    write(sandbox, ".gitattributes", "*.txt text=auto\nsecret.md -diff\n")
    (sandbox / "crlf.txt").write_bytes(b"line\r\n")
    write(sandbox, "secret.md", "old\n")
    sha = await make_baseline(sandbox, tmp_path / "b.git")
    assert git(sandbox, "status", "--porcelain").stdout == ""
    (sandbox / "crlf.txt").write_bytes(b"line\n")
    write(sandbox, "secret.md", "new secret\n")
    changes = await collect_changes(sandbox, tmp_path / "b.git", sha)
    assert changes.paths == ("crlf.txt", "secret.md")
    assert "+new secret" in changes.diff
    assert "Binary files" not in changes.diff


@pytest.mark.anyio
async def test_binary_changes_are_reported_as_binary(trial: tuple[Path, Path]) -> None:
    """A binary file's change appears as a 'Binary files differ' line."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    (sandbox / "image.bin").write_bytes(b"\x00\x01\x02" * 100)
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("image.bin",)
    assert "Binary files /dev/null and b/image.bin differ" in changes.diff


@pytest.mark.anyio
async def test_symlinks_created_by_the_agent_are_changes(trial: tuple[Path, Path]) -> None:
    """A symlink is recorded as a changed path, not followed."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    (sandbox / "link").symlink_to("/etc/passwd")
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("link",)
    assert "+/etc/passwd" in changes.diff
    assert "root:" not in changes.diff


@pytest.mark.anyio
async def test_special_character_paths_are_literal(trial: tuple[Path, Path]) -> None:
    """Quotes, tabs, spaces, newlines, a leading -- and non-ASCII names come back literally."""
    sandbox, private = trial
    names = [
        'quote"d.txt',
        "tab\tname.txt",
        "space name.txt",
        "--tracked.ts",
        "ünïcødé/日本.md",
        "new\nline.txt",
        "back\\slash.txt",
    ]
    write(sandbox, "--tracked.ts", "before\n")
    sha = await make_baseline(sandbox, private)
    for name in names:
        write(sandbox, name, "after\n")
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == tuple(sorted(names))


@pytest.mark.anyio
async def test_diff_evidence_is_capped(trial: tuple[Path, Path]) -> None:
    """A diff longer than 20,000 characters is cut and marked as truncated."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    write(sandbox, "big.txt", "".join(f"line {n}\n" for n in range(50_000)))
    changes = await collect_changes(sandbox, private, sha)
    assert changes.paths == ("big.txt",)
    assert changes.diff.endswith("\n… truncated")
    assert len(changes.diff) == DIFF_LIMIT_CHARS + len("\n… truncated")


@pytest.mark.anyio
@pytest.mark.parametrize("commit", [True, False], ids=["committed", "no-commit"])
async def test_nested_repository_is_graded_file_by_file(
    trial: tuple[Path, Path], commit: bool
) -> None:
    """A nested repository (with or without a commit) is every file in it, never one path."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    nested = sandbox / "vendor"
    write(nested, "lib.txt", "x\n")
    write(nested, "deep/evil.py", "print('evil')\n")
    git(nested, "init", "-q")
    if commit:
        git(nested, "add", "-A")
        git(nested, "commit", "-qm", "nested")
    changes = await collect_changes(sandbox, private, sha)
    assert "vendor" not in changes.paths
    assert {"vendor/lib.txt", "vendor/deep/evil.py", "vendor/.git/HEAD"} <= set(changes.paths)
    assert all(path.startswith("vendor/") for path in changes.paths)
    assert "+print('evil')" in changes.diff


@pytest.mark.anyio
async def test_missing_private_repository_is_a_git_error(trial: tuple[Path, Path]) -> None:
    """When the private baseline is gone, collecting changes raises GitError."""
    sandbox, private = trial
    sha = await make_baseline(sandbox, private)
    shutil.rmtree(private)
    with pytest.raises(GitError, match="removed or damaged"):
        await collect_changes(sandbox, private, sha)


@pytest.mark.anyio
async def test_baseline_in_a_missing_directory_is_a_git_error(
    tmp_path: Path, baseline_writer: str
) -> None:
    """make_baseline in a directory that does not exist raises GitError."""
    cause = "git init failed" if baseline_writer == "git" else "cannot prepare the baseline"
    with pytest.raises(GitError, match=cause):
        await make_baseline(tmp_path / "absent", tmp_path / "b.git")


def _swap_idx_entries(idx: Path, first: bytes, second: bytes) -> None:
    """Forge a pack index: the objects ``first`` and ``second`` trade places (offsets and CRCs)."""
    data = bytearray(idx.read_bytes())
    assert data[:8] == b"\377tOc\0\0\0\2"
    count = int.from_bytes(data[8 + 255 * 4 : 8 + 256 * 4], "big")
    ids = 8 + 256 * 4
    crcs = ids + 20 * count
    offsets = crcs + 4 * count
    table = [bytes(data[ids + 20 * i : ids + 20 * (i + 1)]) for i in range(count)]
    a, b = table.index(first), table.index(second)
    for base in (crcs, offsets):
        sa, sb = slice(base + 4 * a, base + 4 * a + 4), slice(base + 4 * b, base + 4 * b + 4)
        data[sa], data[sb] = data[sb], data[sa]
    idx.write_bytes(bytes(data))


@pytest.mark.anyio
@pytest.mark.parametrize("defended", [True, False])
async def test_a_forged_pack_index_cannot_change_the_baseline(
    trial: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, defended: bool
) -> None:
    """An agent swaps two objects in the private pack's index: grading refuses it.

    Without the digest check (weakened), git would read one file's baseline as the
    other's, and the diff would show a forged "before".
    """
    from atlante_eval.trial import gitops

    sandbox, private = trial
    baseline = await make_baseline(sandbox, private)
    readme, app = baseline.entries["README.md"][1], baseline.entries["src/app.py"][1]
    [idx] = private.glob("*.idx")
    _swap_idx_entries(idx, readme, app)
    write(sandbox, "README.md", "hello\nagain\n")
    if not defended:
        copy = gitops._copy_no_follow

        def unchecked(source: Path, target: Path) -> str:
            copy(source, target)
            return baseline.pack_digests[source.name]

        monkeypatch.setattr(gitops, "_copy_no_follow", unchecked)
        changes = await collect_changes(sandbox, private, baseline)
        assert "-print('app')" in changes.diff  # the forged "before" of README.md
        return
    with pytest.raises(GitError, match="removed or damaged"):
        await collect_changes(sandbox, private, baseline)
