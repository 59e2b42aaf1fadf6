"""Locating and installing the real hosts, with a stand-in npm (no registry, no real CLI)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import hosts
from .fixtures import require_hosts
from .hosts import (
    BIN_DIR_ENV,
    INSTALL_ENV,
    PACKAGES,
    REQUIRE_ENV,
    HostsUnavailableError,
    install_hosts,
    is_current,
    locate_hosts,
)

FAKE_NPM = """\
#!{python}
# Stand-in for `npm install --prefix DIR pkg@ver...`: lays out node_modules like npm does.
import json, os, sys
args = sys.argv[1:]
prefix = args[args.index("--prefix") + 1]
bins = {bins!r}
for spec in (a for a in args[2:] if "@" in a[1:] and not a.startswith("-")):
    name, version = spec.rsplit("@", 1)
    version = os.environ.get("FAKE_NPM_VERSION", version)
    pkg = os.path.join(prefix, "node_modules", name)
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "package.json"), "w") as f:
        json.dump({{"name": name, "version": version}}, f)
    exe = os.path.join(pkg, "cli")
    with open(exe, "w") as f:
        f.write("#!/bin/sh\\necho " + version + "\\n")
    os.chmod(exe, 0o755)
    bin_dir = os.path.join(prefix, "node_modules", ".bin")
    os.makedirs(bin_dir, exist_ok=True)
    os.symlink(os.path.join("..", name, "cli"), os.path.join(bin_dir, bins[name]))
sys.exit(int(os.environ.get("FAKE_NPM_EXIT", "0")))
"""


@pytest.fixture
def fake_npm(tmp_path: Path) -> str:
    """Return the path of an executable stand-in for npm."""
    bins = {package: exe for exe, (package, _) in PACKAGES.items()}
    path = tmp_path / "npm"
    path.write_text(FAKE_NPM.format(python=sys.executable, bins=bins))
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the cache at an empty folder and clear the hosts' environment switches."""
    for name in (BIN_DIR_ENV, INSTALL_ENV, REQUIRE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return hosts.default_cache_dir()


def test_explicit_bin_dir_is_used_as_is(
    tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ATLANTE_EVAL_HOST_BIN_DIR wins when it holds both executables, and errors when not."""
    for name in ("claude", "opencode"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv(BIN_DIR_ENV, str(tmp_path))
    assert locate_hosts(install=False) == tmp_path
    (tmp_path / "opencode").unlink()
    with pytest.raises(HostsUnavailableError, match="lacks opencode"):
        locate_hosts(install=False)


def test_install_then_reuse_the_cache(clean_env: Path, fake_npm: str) -> None:
    """npm installs the pinned versions into the cache once; later lookups reuse it."""
    assert clean_env == Path(clean_env.parent.parent.parent / "cache/atlante-eval/hosts")
    bin_dir = install_hosts(clean_env, npm=fake_npm)
    assert bin_dir == clean_env / "node_modules" / ".bin"
    assert is_current(clean_env)
    assert sorted(p.name for p in clean_env.parent.iterdir() if "staging" in p.name) == []
    assert locate_hosts(install=False) == bin_dir


def test_wrong_versions_are_rejected_and_leave_no_cache(
    clean_env: Path, fake_npm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An install that yields other versions fails without populating the cache."""
    monkeypatch.setenv("FAKE_NPM_VERSION", "0.0.1")
    with pytest.raises(HostsUnavailableError, match="expected the pinned"):
        install_hosts(clean_env, npm=fake_npm)
    assert not clean_env.exists()


def test_failed_npm_is_reported(
    clean_env: Path, fake_npm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing npm becomes HostsUnavailableError carrying its command line."""
    monkeypatch.setenv("FAKE_NPM_EXIT", "1")
    with pytest.raises(HostsUnavailableError, match="install --prefix"):
        install_hosts(clean_env, npm=fake_npm)
    assert not clean_env.exists()


def test_missing_hosts_skip_or_fail(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without hosts and without install the fixture skips, or fails when hosts are required."""
    monkeypatch.setenv(INSTALL_ENV, "0")
    with pytest.raises(pytest.skip.Exception, match="real hosts unavailable"):
        require_hosts()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="real hosts required"):
        require_hosts()


ENGINE_WARNING = (
    "npm warn EBADENGINE Unsupported engine {\n"
    "npm warn EBADENGINE   package: 'opencode-ai@1.18.33',\n"
    "npm warn EBADENGINE   required: { node: '>=22' },\n"
    "npm warn EBADENGINE   current: { node: 'v18.19.0', npm: '9.2.0' }\n"
    "npm warn EBADENGINE }\n"
)


def test_the_first_pytest_says_it_installs_the_hosts_and_prints_nodes_warning(
    tmp_path: Path, fake_npm: str
) -> None:
    """`pytest` on a fresh machine: a line before the install, npm's Node warning, a line after."""
    npm_dir = tmp_path / "npm-bin"
    npm_dir.mkdir()
    script = (
        Path(fake_npm)
        .read_text()
        .replace(
            "sys.exit(", f"sys.stdout.write({ENGINE_WARNING!r} + 'added 2 packages\\n')\nsys.exit("
        )
    )
    (npm_dir / "npm").write_text(script)
    (npm_dir / "npm").chmod(0o755)
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
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (BIN_DIR_ENV, INSTALL_ENV, REQUIRE_ENV) and not key.startswith("PYTEST")
    }
    env |= {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": f"{npm_dir}:{env['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "realhost"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    prefix = tmp_path / "cache" / "atlante-eval" / "hosts"
    said = [i for i, line in enumerate(lines) if line.startswith("atlante-eval tests:")]
    assert len(said) == 2, result.stderr
    before, after = lines[said[0]], lines[said[1]]
    assert before.startswith(
        f"atlante-eval tests: installing the real hosts (claude {PACKAGES['claude'][1]} and "
        f"opencode {PACKAGES['opencode'][1]}, about 740 MB, once) into {prefix} with npm; log: "
    )
    assert lines[said[0] + 1 : said[1]] == ENGINE_WARNING.splitlines()
    assert re.fullmatch(
        rf"atlante-eval tests: installed claude \S+ and opencode \S+ in \d+ s; "
        rf"the tests use {re.escape(str(prefix))}/node_modules/\.bin",
        after,
    )
    assert "1 passed" in result.stdout
    again = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "realhost"],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode == 0
    assert "atlante-eval tests:" not in again.stderr  # installed once: silent afterwards
