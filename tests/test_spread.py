"""The run root asks the file system to spread its trials' directories apart (ext2/3/4)."""

from __future__ import annotations

import array
import fcntl
import os
import tempfile
from pathlib import Path

import pytest

from atlante_eval._util import spread
from atlante_eval._util.spread import spread_subdirectories
from atlante_eval.trial import sandbox

pytestmark = pytest.mark.skipif(os.uname().sysname != "Linux", reason="Linux ioctls")


def _flags(path: Path) -> int | None:
    """The directory's inode flags, or ``None`` where the file system has none to give."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        value = array.array("i", [0])
        fcntl.ioctl(fd, spread._FS_IOC_GETFLAGS, value, True)
        return value[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def test_the_mark_is_set_where_the_file_system_keeps_it(tmp_path: Path) -> None:
    target = tmp_path / "root"
    target.mkdir()
    before = _flags(target)
    marked = spread_subdirectories(target)
    after = _flags(target)
    if before is None:  # tmpfs and others: no inode flags, nothing changes, nothing raises
        assert marked is False
        assert after is None
        return
    assert not before & spread._FS_TOPDIR_FL
    assert marked is True
    assert after == before | spread._FS_TOPDIR_FL  # that bit, and no other, changed
    assert spread_subdirectories(target) is True  # already marked: left as it is
    assert _flags(target) == after


def test_the_mark_is_not_inherited_by_a_trials_directory(tmp_path: Path) -> None:
    target = tmp_path / "root"
    target.mkdir()
    if not spread_subdirectories(target):
        pytest.skip("this file system keeps no inode flags")
    child = target / "trial"
    child.mkdir()
    flags = _flags(child)
    assert flags is not None
    assert not flags & spread._FS_TOPDIR_FL  # only the run root's children are spread


def test_a_symbolic_link_or_a_missing_path_is_refused_without_raising(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    before = _flags(real)
    assert spread_subdirectories(link) is False  # never follows a link to mark its target
    assert _flags(real) == before
    assert spread_subdirectories(tmp_path / "missing") is False


def test_the_run_root_is_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marked: list[Path] = []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sandbox, "spread_subdirectories", marked.append)
    root = sandbox.create_run_root()
    assert marked == [root]
    assert root.parent == tmp_path
    assert root.stat().st_mode & 0o777 == 0o700
