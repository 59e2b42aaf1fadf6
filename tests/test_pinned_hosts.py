"""Pinned runs: the managed copy from a local npm registry, never the host on PATH.

Every test installs with the real npm client from a registry served on 127.0.0.1
by the test (``tests/npmregistry.py``), into an empty managed host cache.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from clikit import report_dirs, wait_for
from hostcachekit import OTHER, PACKAGE, PINNED, World, closed_port, pinned_world, run_cli
from stubcli import calls, sessions
from typer.testing import CliRunner

from atlante_eval import DiagnosticError, RunReport
from atlante_eval.cli import app
from atlante_eval.hosts import cache as cache_module


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A registry publishing a stand-in Claude Code, another on PATH, a pinned project."""
    with pinned_world(tmp_path, monkeypatch) as made:
        yield made


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _report(world: World) -> RunReport:
    [run_dir] = report_dirs(world.project)[-1:]
    return RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def test_a_pinned_run_installs_from_the_registry_and_never_starts_the_host_on_path(
    world: World,
) -> None:
    """First run: npm installs the pin into the empty cache; PATH's other version never starts."""
    assert not world.cache.exists()
    code, _out, err = _run("run", str(world.project))
    assert code == 0, err
    assert calls(world.on_path) == []  # not even its --version
    assert len(sessions(world.managed[PINNED])) == 1
    assert f"installing claude-code {PINNED} into the managed host cache" in err
    assert f"npm install --prefix {world.cache}/claude-code/" in err
    assert f"installed claude-code {PINNED}" in err
    meta = _report(world).meta
    assert meta.host_version == PINNED
    assert meta.host_source is not None
    assert meta.host_source.kind == "managed"
    assert meta.host_source.package == f"{PACKAGE}@{PINNED}"
    # npm checked the tarball against the registry's integrity, and the record keeps it.
    assert meta.host_source.integrity == world.published[PINNED].integrity
    record = json.loads((world.entry() / "atlante-host.json").read_text())
    assert record["integrity"] == world.published[PINNED].integrity
    executable = world.entry() / "node_modules" / ".bin" / "claude"
    assert meta.host_source.executable == str(executable)
    assert world.registry.count("tarball", PACKAGE) == 1
    [run_dir] = report_dirs(world.project)
    header = json.loads((run_dir / "journal.jsonl").read_text().splitlines()[0])
    assert header["hostVersion"] == PINNED
    assert header["hostSource"]["kind"] == "managed"

    code, _out, err = _run("run", str(world.project))  # the cached copy, checked, no npm
    assert code == 0, err
    assert "installing" not in err
    assert world.registry.count("tarball", PACKAGE) == 1
    assert world.registry.count("packument", PACKAGE) == 1
    assert calls(world.on_path) == []


def test_without_a_pin_the_host_on_path_runs_and_is_recorded(world: World) -> None:
    """No pin: today's behaviour, PATH's host, recorded as such; nothing is installed."""
    config = world.project / "atlante.jsonc"
    document = json.loads(config.read_text())
    del document["eval"]["hostVersion"]
    config.write_text(json.dumps(document))
    code, _out, err = _run("run", str(world.project))
    assert code == 0, err
    assert len(sessions(world.on_path)) == 1
    meta = _report(world).meta
    assert meta.host_version == "2.1.9"
    assert meta.host_source is not None
    assert (meta.host_source.kind, meta.host_source.executable) == ("path", str(world.on_path))
    assert meta.host_source.integrity is None
    assert not world.cache.exists()


def test_host_version_flag_overrides_the_projects_pin(world: World) -> None:
    """`run --host-version` installs and runs that version instead of eval.hostVersion."""
    code, _out, err = _run("run", str(world.project), "--host-version", OTHER)
    assert code == 0, err
    assert _report(world).meta.host_version == OTHER
    assert len(sessions(world.managed[OTHER])) == 1
    assert sessions(world.managed[PINNED]) == []
    assert calls(world.on_path) == []


def test_a_wrong_integrity_from_the_registry_is_refused_by_npm(world: World) -> None:
    """npm's integrity check is on: a tarball that does not match is never installed."""
    files = {"bin/claude": (b"#!/bin/sh\necho 2.1.7\n", 0o755)}
    world.registry.publish(PACKAGE, "2.1.7", files, integrity="sha512-" + "A" * 86 + "==")
    code, _out, err = _run("run", str(world.project), "--host-version", "2.1.7")
    assert code == 3
    assert "eval-host-install-failed" in err
    assert "EINTEGRITY" in err
    assert not world.entry("2.1.7").exists()
    assert report_dirs(world.project) == []


def _corrupt(world: World, marker: Path) -> None:
    """Replace the cached program with one that leaves ``marker`` when started."""
    program = world.entry() / "node_modules" / PACKAGE / "bin" / "claude"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho {PINNED}\n")


def test_a_corrupted_cache_entry_is_detected_and_reinstalled(world: World) -> None:
    """A changed cached file fails the check: reinstalled, and the changed one never runs."""
    assert _run("hosts", "install", f"claude-code@{PINNED}")[0] == 0
    marker = world.tmp / "corrupted-copy-started"
    _corrupt(world, marker)
    code, _out, err = _run("run", str(world.project))
    assert code == 0, err
    assert f"the cached claude-code {PINNED} failed its integrity check" in err
    assert "reinstalling it" in err
    program = world.entry() / "node_modules" / PACKAGE / "bin" / "claude"
    assert program.read_bytes() == world.managed[PINNED].read_bytes()  # npm's copy again
    assert not marker.exists()
    assert len(sessions(world.managed[PINNED])) == 1
    assert _report(world).meta.host_source is not None


def test_without_the_check_the_corrupted_copy_would_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The breach the check prevents: trusting the cached copy starts the changed program."""
    assert _run("hosts", "install", f"claude-code@{PINNED}")[0] == 0
    marker = world.tmp / "corrupted-copy-started"
    _corrupt(world, marker)
    monkeypatch.setattr(cache_module, "tree_digest", lambda _d: (_record_digest(world), 0))
    _run("run", str(world.project))
    assert marker.exists()


def _record_digest(world: World) -> str:
    digest: str = json.loads((world.entry() / "atlante-host.json").read_text())["treeDigest"]
    return digest


def test_an_unreachable_registry_fails_before_any_trial(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline: eval-host-install-failed (exit 3) naming the install command; no run, no cache."""
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{closed_port()}/")
    code, _out, err = _run("run", str(world.project))
    assert code == 3
    assert "error [eval-host-install-failed]" in err
    assert f"atlante-eval hosts install claude-code@{PINNED}" in err
    assert "ECONNREFUSED" in err
    assert report_dirs(world.project) == []
    assert not world.entry().exists()
    assert calls(world.on_path) == []
    assert calls(world.managed[PINNED]) == []


def test_without_npm_the_install_fails_with_the_command_to_run(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No npm on PATH: eval-host-install-failed says so, and the host on PATH is not used."""
    tools = world.tmp / "git-only"
    tools.mkdir()
    git = shutil.which("git")
    assert git is not None
    (tools / "git").symlink_to(git)
    monkeypatch.setenv("PATH", f"{world.on_path.parent}{os.pathsep}{tools}")
    code, _out, err = _run("run", str(world.project))
    assert code == 3
    assert "npm (Node.js's package manager) was not found on PATH" in err
    assert calls(world.on_path) == []


def test_two_concurrent_runs_install_once(world: World) -> None:
    """Two runs start on an empty cache: one installs, the other waits for it, npm runs once."""
    world.registry.gate = gate = threading.Event()
    first = run_cli(["run", str(world.project)], stderr=world.tmp / "first.err")
    try:
        assert world.registry.tarball_requested.wait(300)  # the first is installing
        second = run_cli(["run", str(world.project)], stderr=world.tmp / "second.err")
        try:
            wait_for(lambda: "waiting for another atlante-eval process" in _text(world, "second"))
            gate.set()
            assert second.wait(300) == 0, _text(world, "second")
        finally:
            if second.poll() is None:
                second.kill()
        assert first.wait(300) == 0, _text(world, "first")
    finally:
        gate.set()
        if first.poll() is None:
            first.kill()
    assert world.registry.count("tarball", PACKAGE) == 1
    assert world.registry.count("packument", PACKAGE) == 1
    assert "into the managed host cache" not in _text(world, "second")
    reports = [RunReport.model_validate_json((d / "report.json").read_bytes()) for d in
               report_dirs(world.project)]  # fmt: skip
    assert len(reports) == 2
    assert {r.meta.host_source.integrity for r in reports if r.meta.host_source} == {
        world.published[PINNED].integrity
    }


def _text(world: World, name: str) -> str:
    return (world.tmp / f"{name}.err").read_text(errors="replace")


@pytest.mark.parametrize("locked", [True, False])
def test_the_install_lock_is_what_makes_it_once(
    world: World, monkeypatch: pytest.MonkeyPatch, locked: bool
) -> None:
    """Two installs at once in one process: once with the lock; twice when it is bypassed."""
    from atlante_eval.hosts import managed

    if not locked:
        monkeypatch.setattr(managed, "_acquire", _no_wait)
    world.registry.gate = gate = threading.Event()
    waiting = anyio.Event()

    async def install() -> None:
        def progress(event: object) -> None:
            if getattr(event, "stage", None) == "waiting":
                waiting.set()

        try:
            await managed.install_host("claude-code", PINNED, on_progress=progress)
        except DiagnosticError:
            # Unlocked, two installs race for one cache entry: either may lose the final
            # rename (eval-host-install-failed). Both fetched it: that is the point.
            if locked:
                raise

    async def release() -> None:
        if locked:
            await waiting.wait()
        else:
            await anyio.to_thread.run_sync(world.registry.wait_for, "tarball", PACKAGE, 2)
        gate.set()

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(install)
            group.start_soon(install)
            group.start_soon(release)

    try:
        anyio.run(main)
    finally:
        gate.set()
    assert world.registry.count("tarball", PACKAGE) == (1 if locked else 2)


async def _no_wait(path: Path, operation: int, on_wait: object = None) -> int:
    """The lock bypassed: an open descriptor, no flock."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def test_a_resume_across_host_versions_is_refused(world: World) -> None:
    """--resume of a pinned run with another --host-version: eval-resume-mismatch (exit 2)."""
    assert _run("run", str(world.project))[0] == 0
    [run_dir] = report_dirs(world.project)
    code, _out, err = _run("run", str(world.project), "--resume", str(run_dir),
                           "--host-version", OTHER)  # fmt: skip
    assert code == 2
    assert "error [eval-resume-mismatch]" in err
    assert f"--host-version {PINNED}" in err
    assert len(report_dirs(world.project)) == 1
    code, _out, err = _run("run", str(world.project), "--resume", str(run_dir))
    assert code == 0, err
    assert _report(world).meta.resumed_from is not None


def test_sharded_runs_use_the_pin_and_merge_refuses_a_mismatch(world: World) -> None:
    """Each shard runs the pinned copy; shards of another version or source do not merge."""
    scenarios = [world.project / "eval" / "scenarios" / "basic.eval.json"]
    two = json.loads(scenarios[0].read_text()) | {"name": "second"}
    (scenarios[0].parent / "second.eval.json").write_text(json.dumps(two))
    out = world.tmp / "shards"
    assert _run("run", str(world.project), "--shard", "1/2", "--out", str(out / "a"))[0] == 0
    code, _o, err = _run("run", str(world.project), "--shard", "2/2", "--out", str(out / "b"),
                         "--host-version", OTHER)  # fmt: skip
    assert code == 0, err
    shards = [next((out / side).glob("*/report.json")) for side in ("a", "b")]
    code, _o, err = _run("merge", *map(str, shards), "--out", str(out / "merged"))
    assert code == 2
    assert "host version differs" in err
    assert calls(world.on_path) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [("^2.1", "is not an exact version"), ("1.0.0", "outside the supported versions")],
)
def test_a_bad_pin_in_the_configuration_is_invalid_host_version(
    world: World, value: str, message: str
) -> None:
    """eval.hostVersion must be an exact supported version: exit 2 at the key, nothing installed."""
    config = world.project / "atlante.jsonc"
    config.write_text(config.read_text().replace(f'"{PINNED}"', f'"{value}"'))
    code, _out, err = _run("validate", str(world.project))
    assert code == 2
    assert "error [invalid-host-version]: eval.hostVersion:" in err
    assert message in err
    assert "atlante.jsonc" in err
    assert "/eval/hostVersion" in err
    assert _run("run", str(world.project))[0] == 2
    assert not world.cache.exists()


def test_validate_and_selftest_take_host_version(world: World) -> None:
    """validate and selftest check --host-version like run; validate --probe installs and probes."""
    code, _out, err = _run("validate", str(world.project), "--host-version", "3.0.0")
    assert code == 2
    assert "--host-version: claude-code 3.0.0 is outside the supported versions" in err
    assert _run("selftest", str(world.project), "--host-version", "latest")[0] == 2
    code, out, err = _run("validate", str(world.project), "--probe", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["hostPin"], shown["hostVersion"]) == (PINNED, PINNED)
    assert shown["hostSource"]["kind"] == "managed"
    assert shown["hostSource"]["integrity"] == world.published[PINNED].integrity
    assert calls(world.on_path) == []
    assert [c["argv"][1:] for c in calls(world.managed[PINNED])] == [["--version"]]


def test_a_given_host_of_another_version_is_refused_under_a_pin(world: World) -> None:
    """run_eval(host=...) with a pin: a host that probes another version does not run."""
    from standin import StandinHost

    from atlante_eval import run_eval

    host = StandinHost()
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: run_eval(world.project, host=host))
    [problem] = caught.value.diagnostics
    assert problem.code == "eval-host-unsupported-version"
    assert problem.message == f"standin reports version 1.0.0, but the run is pinned to {PINNED}"
    assert caught.value.exit_code == 3
    assert host.sessions == 0
    assert not world.cache.exists()  # a given host is never replaced by a managed copy
