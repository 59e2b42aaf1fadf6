"""Locating the real hosts in the managed host cache, with stand-ins from a local npm registry.

No real CLI and no internet: the registry on 127.0.0.1 publishes stand-in packages
at the pinned versions, and npm installs them into an empty managed cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostcachekit import closed_port
from npmregistry import NpmRegistry, npm_env, require_npm, serve_registry, standin_host_package

from atlante_eval.hosts.cache import HostPin

from .fixtures import require_hosts
from .hosts import (
    INSTALL_ENV,
    PINNED,
    REQUIRE_ENV,
    SAY_PREFIX,
    HostsUnavailableError,
    locate_hosts,
)


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NpmRegistry]:
    """A local registry with stand-ins at the pinned versions; an empty managed cache."""
    require_npm()
    with serve_registry() as served:
        for host, version in PINNED.items():
            pin = HostPin(host, version)  # type: ignore[arg-type]
            files, _ = standin_host_package(tmp_path / host, pin.command, version)
            served.publish(pin.package, version, files)
        for name, value in npm_env(tmp_path, served.url).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("ATLANTE_EVAL_HOST_CACHE", str(tmp_path / "host-cache"))
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the links' directory
        for name in (INSTALL_ENV, REQUIRE_ENV):
            monkeypatch.delenv(name, raising=False)
        yield served


def test_the_pinned_versions_are_installed_once_then_reused(
    registry: NpmRegistry, tmp_path: Path
) -> None:
    """An empty cache gets both pinned versions from npm; later lookups only check them."""
    bin_dir = locate_hosts()
    assert bin_dir.parent == tmp_path
    for name, host in (("claude", "claude-code"), ("opencode", "opencode")):
        link = bin_dir / name
        assert link.resolve().is_relative_to(tmp_path / "host-cache" / host / PINNED[host])
        version = subprocess.run([link, "--version"], capture_output=True, text=True, check=True)
        assert version.stdout.split()[0] == PINNED[host]
    counts = dict(registry.requests)
    assert locate_hosts(install=False) == bin_dir
    assert dict(registry.requests) == counts


def test_missing_hosts_skip_or_fail(registry: NpmRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the versions and without install, the fixture skips, or fails when required."""
    monkeypatch.setenv(INSTALL_ENV, "0")
    with pytest.raises(pytest.skip.Exception, match="real hosts unavailable"):
        require_hosts()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="real hosts required"):
        require_hosts()
    assert registry.count("packument", "opencode-ai") == 0


def test_a_failed_install_is_reported(
    registry: NpmRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreachable registry: HostsUnavailableError carrying eval-host-install-failed."""
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{closed_port()}/")
    with pytest.raises(HostsUnavailableError, match=r"\[eval-host-install-failed\]"):
        locate_hosts()


def test_the_first_pytest_says_it_installs_the_hosts(registry: NpmRegistry, tmp_path: Path) -> None:
    """`pytest` on a fresh machine: a line before and after each pinned version's install on
    the terminal, past pytest's output capture; a second run, with the cache filled, is silent."""
    suite = tmp_path / "suite"
    (suite / "realhost").mkdir(parents=True)
    for helper in Path(__file__).parent.glob("*.py"):
        if not helper.name.startswith("test_"):
            (suite / "realhost" / helper.name).write_text(helper.read_text())
    (suite / "realhost" / "test_uses_hosts.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_uses_hosts(real_hosts: Path) -> None:\n"
        "    assert (real_hosts / 'claude').exists()\n"
    )
    (suite / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "realhost"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, cwd=suite, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    said = [line for line in first.stderr.splitlines() if line.startswith(SAY_PREFIX)]
    expected = []
    for host, version in PINNED.items():
        expected += [f"installing {host} {version} ", f"installed {host} {version} in "]
    assert len(said) == len(expected), first.stderr
    for line, start in zip(said, expected, strict=True):
        assert line.startswith(f"{SAY_PREFIX} {start}"), line
    assert "1 passed" in first.stdout
    again = run()
    assert again.returncode == 0, again.stdout + again.stderr
    assert SAY_PREFIX not in again.stderr  # installed once: silent afterwards
