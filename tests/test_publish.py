"""Run ids and report publication: fresh directories, no overwrite, no symlinks."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from atlante_eval.report import PublishError, atomic_write, new_run_id, publish
from atlante_eval.report.publish import (
    check_below,
    check_no_symlinks,
    ensure_gitignore,
    reserve_run_dir,
)


def test_run_id_is_local_time_and_four_hex_digits() -> None:
    """Run ids look like 2026-09-02T10-32-11-a3f2."""
    run_id = new_run_id(datetime(2026, 9, 2, 10, 32, 11))
    assert re.fullmatch(r"2026-09-02T10-32-11-[0-9a-f]{4}", run_id)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-[0-9a-f]{4}", new_run_id())


def test_reserve_keeps_a_free_id_and_rerolls_a_taken_one(tmp_path: Path) -> None:
    """A free id is kept; a taken one is re-rolled to a fresh directory."""
    base = tmp_path / "reports" / "deep"
    run_id, directory = reserve_run_dir(base, "2026-01-01T00-00-00-aaaa")
    assert run_id == "2026-01-01T00-00-00-aaaa"
    assert directory == base / run_id
    again, other = reserve_run_dir(base, "2026-01-01T00-00-00-aaaa")
    assert again != run_id
    assert other.is_dir()


def test_reserve_gives_up_after_eight_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every candidate id is taken, reservation fails after 8 attempts."""
    (tmp_path / "same").mkdir()
    monkeypatch.setattr(publish, "new_run_id", lambda now=None: "same")
    with pytest.raises(PublishError, match="under 8 attempts"):
        reserve_run_dir(tmp_path, "same")


def test_reserve_refuses_symlinks_and_files(tmp_path: Path) -> None:
    """A symlinked base, a symlinked ancestor to create under, or a file base is refused."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PublishError, match="symbolic link"):
        reserve_run_dir(tmp_path / "link", "x")
    with pytest.raises(PublishError, match="symbolic link"):
        reserve_run_dir(tmp_path / "link" / "new" / "deeper", "x")
    (tmp_path / "file").write_text("x")
    with pytest.raises(PublishError, match="not a directory"):
        reserve_run_dir(tmp_path / "file", "x")
    assert list(real.iterdir()) == []


def test_check_below_refuses_a_symlink_under_the_anchor(tmp_path: Path) -> None:
    """Below the anchor, an existing symlinked component is refused even if it leads to a dir."""
    project = tmp_path / "project"
    target = tmp_path / "target"
    (target / "eval").mkdir(parents=True)
    project.mkdir()
    (project / ".atlante").symlink_to(target)
    with pytest.raises(PublishError, match="symbolic link"):
        check_below(project, project / ".atlante" / "eval")
    with pytest.raises(PublishError, match="symbolic link"):
        reserve_run_dir(project / ".atlante" / "eval", "x", anchor=project)
    assert list((target / "eval").iterdir()) == []
    check_below(project, tmp_path / "elsewhere")


def test_check_no_symlinks_accepts_real_paths(tmp_path: Path) -> None:
    """A path below real directories passes."""
    check_no_symlinks(tmp_path / "a" / "b")


def test_atomic_write_never_overwrites(tmp_path: Path) -> None:
    """atomic_write creates the file once, refuses to overwrite, and leaves no temp file."""
    target = tmp_path / "report.json"
    atomic_write(target, b"first\n")
    with pytest.raises(PublishError, match="refusing to overwrite"):
        atomic_write(target, b"second\n")
    assert target.read_bytes() == b"first\n"
    atomic_write(target, b"third\n", replace=True)
    assert target.read_bytes() == b"third\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, "eval/\n"),
        ("dist/", "dist/\neval/\n"),
        ("dist/\n", "dist/\neval/\n"),
        ("eval/\n", "eval/\n"),
        ("a\n  eval/ \nb", "a\n  eval/ \nb"),
    ],
)
def test_ensure_gitignore(tmp_path: Path, before: str | None, after: str) -> None:
    """ensure_gitignore appends eval/ once, adding a missing newline first."""
    if before is not None:
        (tmp_path / ".gitignore").write_text(before)
    ensure_gitignore(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == after


def test_ensure_gitignore_refuses_a_symlink(tmp_path: Path) -> None:
    """A symlinked .gitignore is refused, and its target is untouched."""
    (tmp_path / "real").write_text("x\n")
    (tmp_path / ".gitignore").symlink_to(tmp_path / "real")
    with pytest.raises(PublishError, match="symbolic link"):
        ensure_gitignore(tmp_path)
    assert (tmp_path / "real").read_text() == "x\n"
