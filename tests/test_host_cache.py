"""The managed host cache on disk: its root, pins, the tree digest and the integrity check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts.cache import (
    RECORD_FILE,
    CacheLayout,
    CacheRecord,
    HostPin,
    check_entry,
    host_cache_root,
    parse_pin,
    scan_cache,
    tree_digest,
)

PIN = HostPin("claude-code", "2.1.5")
INTEGRITY = "sha512-" + "B" * 86 + "=="


def test_the_cache_root_follows_the_environment(tmp_path: Path) -> None:
    """ATLANTE_EVAL_HOST_CACHE wins; else XDG_CACHE_HOME; else ~/.cache."""
    home = {"HOME": str(tmp_path / "home")}
    assert host_cache_root(home) == tmp_path / "home/.cache/atlante-eval/hosts"
    xdg = {**home, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert host_cache_root(xdg) == tmp_path / "xdg/atlante-eval/hosts"
    explicit = {**xdg, "ATLANTE_EVAL_HOST_CACHE": str(tmp_path / "mine")}
    assert host_cache_root(explicit) == tmp_path / "mine"


def test_parse_pin_reads_host_at_version() -> None:
    """HOST@VERSION gives the npm spec; anything else is refused with a stable code."""
    pin = parse_pin("opencode@1.18.33")
    assert (pin.host, pin.version, pin.spec, pin.command) == (
        "opencode", "1.18.33", "opencode-ai@1.18.33", "opencode",
    )  # fmt: skip
    assert parse_pin("claude-code@2.1.332").spec == "@anthropic-ai/claude-code@2.1.332"
    for text, code in [("claude-code", "invalid-option"), ("x@1.0.0", "invalid-option"),
                       ("opencode@^1.18", "invalid-host-version"),
                       ("opencode@v1.18.33", "invalid-host-version"),
                       ("opencode@3.0.0", "invalid-host-version")]:  # fmt: skip
        with pytest.raises(DiagnosticError) as caught:
            parse_pin(text)
        assert caught.value.diagnostics[0].code == code
        assert caught.value.exit_code == 2


def _installed(root: Path) -> CacheLayout:
    """A finished install laid out as npm and the installer leave it."""
    layout = CacheLayout(root, PIN)
    package = layout.directory / "node_modules" / PIN.package
    (package / "bin").mkdir(parents=True)
    (package / "bin" / "claude").write_text("#!/bin/sh\necho 2.1.5\n")
    (package / "bin" / "claude").chmod(0o755)
    (package / "package.json").write_text('{"name": "x"}')
    layout.executable.parent.mkdir()
    layout.executable.symlink_to(f"../{PIN.package}/bin/claude")
    lock = {"packages": {f"node_modules/{PIN.package}": {"version": "2.1.5",
                                                         "integrity": INTEGRITY}}}  # fmt: skip
    (layout.directory / "package-lock.json").write_text(json.dumps(lock))
    digest, size = tree_digest(layout.directory)
    record = CacheRecord(host=PIN.host, version=PIN.version, package=PIN.package,
                         integrity=INTEGRITY, executable="node_modules/.bin/claude",
                         tree_digest=digest, size_bytes=size, installed_at="now")  # fmt: skip
    layout.record_path.write_text(record.model_dump_json(by_alias=True))
    return layout


def test_an_intact_install_passes_and_a_missing_one_is_missing(tmp_path: Path) -> None:
    """The layout as installed checks ok; an absent version is 'missing', not corrupted."""
    layout = _installed(tmp_path)
    entry = check_entry(layout)
    assert entry.ok, entry.problem
    assert entry.integrity == INTEGRITY
    assert entry.source().kind == "managed"
    assert check_entry(CacheLayout(tmp_path, HostPin("claude-code", "2.1.6"))).state == "missing"
    assert [e.version for e in scan_cache(tmp_path)] == ["2.1.5"]


def _program(layout: CacheLayout) -> Path:
    return layout.directory / "node_modules" / PIN.package / "bin" / "claude"


@pytest.mark.parametrize(
    "change",
    [
        lambda layout: _program(layout).write_text("#!/bin/sh\necho evil\n"),
        lambda layout: _program(layout).chmod(0o644),
        lambda layout: (layout.executable.unlink(), layout.executable.symlink_to("/bin/true")),
        lambda layout: (layout.directory / "node_modules" / "new.js").write_text(""),
        lambda layout: (layout.directory / "node_modules" / PIN.package / "package.json").unlink(),
        lambda layout: (layout.directory / "package-lock.json").write_text(
            (layout.directory / "package-lock.json").read_text().replace(INTEGRITY, "sha512-x")
        ),
        lambda layout: layout.record_path.write_text(
            layout.record_path.read_text().replace(INTEGRITY, "sha512-forged")
        ),
        lambda layout: layout.record_path.unlink(),
    ],
    ids=["content", "mode", "link", "added", "removed", "lock", "record", "no-record"],
)
def test_any_change_to_the_copy_is_corruption(tmp_path: Path, change: object) -> None:
    """Content, mode, link targets, added or removed files, the lock or the record: all caught."""
    layout = _installed(tmp_path)
    change(layout)  # type: ignore[operator]
    entry = check_entry(layout)
    assert entry.state == "corrupted"
    assert entry.problem


def test_the_digest_reads_hard_linked_files_once(tmp_path: Path) -> None:
    """A platform binary hard-linked into two packages counts once in the size."""
    (tmp_path / "a").write_bytes(b"x" * 1000)
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / RECORD_FILE).write_text("ignored")
    digest, size = tree_digest(tmp_path)
    assert size == 1000
    (tmp_path / RECORD_FILE).write_text("still ignored")
    assert tree_digest(tmp_path) == (digest, size)
