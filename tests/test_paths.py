"""resolve_no_follow says why a path is unsafe with a typed reason, not only a message."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlante_eval._util.paths import UnsafePathError, resolve_no_follow
from atlante_eval.trial import SandboxError
from atlante_eval.trial.sandbox import resolve_fixture


@pytest.mark.parametrize("relative", ["../up", "/abs", "a/../../b"])
def test_a_path_leaving_the_root_is_outside(tmp_path: Path, relative: str) -> None:
    """Absolute paths and .. segments are refused with reason "outside"."""
    with pytest.raises(UnsafePathError) as caught:
        resolve_no_follow(tmp_path, relative)
    assert caught.value.reason == "outside"


def test_a_symlinked_component_is_a_symlink(tmp_path: Path) -> None:
    """A symbolic link anywhere along the path is refused with reason "symlink"."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePathError) as caught:
        resolve_no_follow(tmp_path, "link/file")
    assert caught.value.reason == "symlink"


def test_a_root_that_is_not_a_directory_is_a_bad_root(tmp_path: Path) -> None:
    """A root that is a file (or a symlink) is refused with reason "bad-root"."""
    root = tmp_path / "file"
    root.write_text("x", encoding="utf-8")
    with pytest.raises(UnsafePathError) as caught:
        resolve_no_follow(root, "a")
    assert caught.value.reason == "bad-root"


def test_fixture_resolution_branches_on_the_reason(tmp_path: Path) -> None:
    """A symlinked fixture path gets the symlink wording; a bad root the inspect wording."""
    (tmp_path / "real").mkdir()
    (tmp_path / "fixture").symlink_to(tmp_path / "real")
    with pytest.raises(SandboxError, match="traverses a symbolic link: fixture"):
        resolve_fixture(tmp_path, "fixture")
    root = tmp_path / "plain"
    root.write_text("x", encoding="utf-8")
    with pytest.raises(SandboxError, match="cannot be inspected: a"):
        resolve_fixture(root, "a")
