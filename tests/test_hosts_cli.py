"""`atlante-eval hosts install|list|remove|path`, text and --json, on a local npm registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hostcachekit import OTHER, PACKAGE, PINNED, World, pinned_world
from typer.testing import CliRunner

from atlante_eval.cli import app
from atlante_eval.hosts.managed import install_host, pinned_host


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A registry publishing a stand-in Claude Code and a project pinned at PINNED."""
    with pinned_world(tmp_path, monkeypatch) as made:
        yield made


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["hosts", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_install_installs_once_then_checks(world: World) -> None:
    """install prints progress on stderr and the executable; a second install only checks."""
    code, out, err = _invoke("install", f"claude-code@{PINNED}", f"claude-code@{OTHER}")
    assert code == 0, err
    assert f"installing claude-code {PINNED}" in err
    executable = world.entry() / "node_modules" / ".bin" / "claude"
    assert f"claude-code {PINNED}: installed" in out
    assert str(executable) in out
    code, out, err = _invoke("install", f"claude-code@{PINNED}", "--json")
    assert code == 0
    assert err == ""
    [shown] = json.loads(out)
    assert shown["installed"] is False
    assert shown["state"] == "ok"
    assert shown["executable"] == str(executable)
    assert shown["integrity"] == world.published[PINNED].integrity
    assert shown["package"] == PACKAGE
    assert world.registry.count("tarball", PACKAGE) == 2  # PINNED and OTHER, once each


@pytest.mark.parametrize(
    ("spec", "code"),
    [("claude-code", "invalid-option"), ("cursor@1.0.0", "invalid-option"),
     ("claude-code@latest", "invalid-host-version"), ("opencode@1.0.0", "invalid-host-version")],
)  # fmt: skip
def test_a_bad_spec_is_refused_before_npm(world: World, spec: str, code: str) -> None:
    """HOST@VERSION must name a built-in host and an exact supported version (exit 2)."""
    status, _out, err = _invoke("install", spec)
    assert status == 2
    assert f"error [{code}]" in err
    assert world.registry.count("packument", PACKAGE) == 0


def test_list_shows_sizes_integrity_state_and_the_projects_pin(world: World) -> None:
    """list re-checks every copy and marks the one the project pins; a broken one says why."""
    assert _invoke("install", f"claude-code@{PINNED}", f"claude-code@{OTHER}")[0] == 0
    (world.entry(OTHER) / "node_modules" / PACKAGE / "extra.js").write_text("x")
    code, out, _err = _invoke("list", str(world.project))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"managed host cache: {world.cache}"
    assert lines[1].split() == ["HOST", "VERSION", "SIZE", "INTEGRITY", "STATE"]
    pinned = next(line for line in lines if f" {PINNED} " in line)
    assert pinned.endswith("ok (pinned by the project)")
    assert world.published[PINNED].integrity[:20] in pinned
    broken = next(line for line in lines if f" {OTHER} " in line)
    assert "corrupted: its files differ" in broken
    code, out, _err = _invoke("list", str(world.project), "--json")
    shown = json.loads(out)
    assert shown["cache"] == str(world.cache)
    assert shown["pinned"] == {"host": "claude-code", "version": PINNED}
    by_version = {h["version"]: h for h in shown["hosts"]}
    assert by_version[PINNED]["pinned"] is True
    assert by_version[PINNED]["sizeBytes"] > 0
    assert by_version[OTHER]["state"] == "corrupted"


def test_list_names_a_pin_that_is_not_installed(world: World) -> None:
    """A pinned version missing from the cache is named, with the command that installs it."""
    code, out, _err = _invoke("list", str(world.project))
    assert code == 0
    assert "no host versions cached" in out
    assert f"run `atlante-eval hosts install claude-code@{PINNED}`" in out


def test_path_prints_a_checked_executable_or_fails(world: World) -> None:
    """path prints the executable of an intact copy; a missing or broken one exits 3."""
    code, _out, err = _invoke("path", f"claude-code@{PINNED}")
    assert code == 3
    assert "error [eval-host-unavailable]" in err
    assert "is not installed" in err
    assert _invoke("install", f"claude-code@{PINNED}")[0] == 0
    code, out, _err = _invoke("path", f"claude-code@{PINNED}")
    assert (code, out.strip()) == (0, str(world.entry() / "node_modules" / ".bin" / "claude"))
    assert json.loads(_invoke("path", f"claude-code@{PINNED}", "--json")[1])["state"] == "ok"
    (world.entry() / "package-lock.json").write_text("{}")
    code, _out, err = _invoke("path", f"claude-code@{PINNED}")
    assert code == 3
    assert "failed its integrity check" in err


def test_remove_refuses_a_version_in_use_and_removes_it_after(world: World) -> None:
    """remove: refused (exit 3) while a run holds the copy; removed once released; idempotent."""
    pinned = anyio.run(lambda: pinned_host("claude-code", PINNED))
    try:
        code, _out, err = _invoke("remove", f"claude-code@{PINNED}")
        assert code == 3
        assert "error [eval-host-in-use]" in err
        assert world.entry().is_dir()
    finally:
        pinned.lease.close()
    code, out, _err = _invoke("remove", f"claude-code@{PINNED}", "--json")
    assert code == 0
    assert json.loads(out) == {
        "host": "claude-code",
        "version": PINNED,
        "removed": True,
        "directory": str(world.entry()),
    }
    assert not world.entry().exists()
    assert not [p for p in world.entry().parent.iterdir() if "removing" in p.name]
    code, out, _err = _invoke("remove", f"claude-code@{PINNED}")
    assert code == 0
    assert "is not installed" in out


def test_python_api_installs_like_the_cli(world: World) -> None:
    """install_host is the command's library call: the same cache entry and record."""
    entry, installed = anyio.run(lambda: install_host("claude-code", PINNED))
    assert installed
    assert entry.ok
    assert entry.directory == world.entry()
    code, out, _err = _invoke("path", f"claude-code@{PINNED}")
    assert (code, out.strip()) == (0, str(entry.executable))
