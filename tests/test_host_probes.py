"""Host probes: version ranges, missing binaries, and stored-credential detection."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import semver
from stubcli import calls, write_stub

from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts.claude_code import ClaudeCodeHost
from atlante_eval.hosts.credentials import claude_env_auth_mode
from atlante_eval.hosts.opencode import OpenCodeHost
from atlante_eval.hosts.versions import VersionRange, find_executable, parse_version


def probe_error(host: OpenCodeHost | ClaudeCodeHost) -> DiagnosticError:
    """Run ``host.probe()`` and return the DiagnosticError it must raise."""
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(host.probe)
    assert caught.value.exit_code == 3
    return caught.value


def opencode_env(tmp_path: Path, bin_dir: Path, *, auth: bool = True) -> dict[str, str]:
    """Return a parent environment with a data dir (holding auth.json when ``auth``)."""
    data = tmp_path / "xdg-data"
    (data / "opencode").mkdir(parents=True, exist_ok=True)
    if auth:
        (data / "opencode" / "auth.json").write_text('{"acme": {"type": "api", "key": "k"}}')
    return {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(data)}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("1.18.33\n", (1, 18, 33)),
        ("v2.0.0", (2, 0, 0)),
        ("2.1.332 (Claude Code)\n", (2, 1, 332)),
        ("01.2.3", None),
        ("1.2.3-beta.1", None),
        ("1.2", None),
        ("opencode 1.2.3", None),
        ("", None),
    ],
)
def test_parse_version(output: str, expected: tuple[int, int, int] | None) -> None:
    """Only a plain MAJOR.MINOR.PATCH first word (optional v) is a version."""
    version = parse_version(output)
    assert (None if version is None else (version.major, version.minor, version.patch)) == expected


def test_version_range_checks_every_clause() -> None:
    """A range holds only when every comparison holds, bounds included as written."""
    v1 = VersionRange("V1", ">=1.18.29 <2.0.0")
    assert v1.contains(semver.Version.parse("1.18.29"))
    assert not v1.contains(semver.Version.parse("1.18.28"))
    assert not v1.contains(semver.Version.parse("2.0.0"))


def test_find_executable_on_path_and_by_path(tmp_path: Path) -> None:
    """Names are looked up on the given PATH; paths must be executable files."""
    stub = write_stub(tmp_path / "bin", "opencode", version="1.18.33")
    assert find_executable("opencode", {"PATH": str(stub.parent)}) == str(stub)
    assert find_executable("opencode", {"PATH": str(tmp_path)}) is None
    assert find_executable(str(stub), {}) == str(stub)
    assert find_executable(str(tmp_path / "nope" / "opencode"), {}) is None


@pytest.mark.parametrize(
    ("version", "dialect"), [("1.18.29", "v1"), ("1.99.0", "v1"), ("2.0.0", "v2")]
)
def test_opencode_probe_picks_the_dialect(tmp_path: Path, version: str, dialect: str) -> None:
    """V1 for >=1.18.29 <2.0.0 and V2 for >=2.0.0 <3.0.0; the version is probed once."""
    stub = write_stub(tmp_path / "bin", "opencode", version=version)
    host = OpenCodeHost(env=opencode_env(tmp_path, stub.parent))
    anyio.run(host.probe)
    assert host.version == version
    assert host.dialect == dialect
    assert host.executable == str(stub)
    assert [c["argv"][1:] for c in calls(stub)].count(["--version"]) == 1


@pytest.mark.parametrize("version", ["1.18.28", "3.0.0", "0.9.1"])
def test_opencode_out_of_range_is_unsupported(tmp_path: Path, version: str) -> None:
    """A version outside both ranges fails with the supported ranges as expected."""
    stub = write_stub(tmp_path / "bin", "opencode", version=version)
    problem = probe_error(OpenCodeHost(env=opencode_env(tmp_path, stub.parent))).diagnostics[0]
    assert problem.code == "eval-host-unsupported-version"
    assert problem.message == f"opencode {version} is not supported"
    assert problem.expected == "V1 >=1.18.29 <2.0.0 or V2 >=2.0.0 <3.0.0"


def test_opencode_missing_binary_is_unavailable(tmp_path: Path) -> None:
    """No opencode on PATH: eval-host-unavailable naming the command."""
    problem = probe_error(OpenCodeHost(env={"PATH": str(tmp_path)})).diagnostics[0]
    assert problem.code == "eval-host-unavailable"
    assert problem.message == "could not run opencode --version"
    assert problem.cause == "opencode was not found on PATH"


def test_unparsable_version_is_unavailable(tmp_path: Path) -> None:
    """A --version output that is not a version: eval-host-unavailable quoting it."""
    stub = write_stub(tmp_path / "bin", "claude", version_output="garbage\n")
    problem = probe_error(ClaudeCodeHost(env={"PATH": str(stub.parent)})).diagnostics[0]
    assert problem.code == "eval-host-unavailable"
    assert "'garbage'" in problem.message


def test_failing_version_command_is_unavailable(tmp_path: Path) -> None:
    """--version exiting non-zero: eval-host-unavailable with the exit and stderr."""
    stub = write_stub(tmp_path / "bin", "claude", version="2.1.0", version_exit=4)
    problem = probe_error(ClaudeCodeHost(env={"PATH": str(stub.parent)})).diagnostics[0]
    assert problem.code == "eval-host-unavailable"
    assert problem.cause is not None
    assert problem.cause.startswith("exit 4")


def test_opencode_v1_needs_auth_json(tmp_path: Path) -> None:
    """V1 without auth.json is unauthenticated even with a database, and says auth.json."""
    stub = write_stub(tmp_path / "bin", "opencode", version="1.18.33")
    env = opencode_env(tmp_path, stub.parent, auth=False)
    (Path(env["XDG_DATA_HOME"]) / "opencode" / "opencode.db").write_bytes(b"")
    problem = probe_error(OpenCodeHost(env=env)).diagnostics[0]
    assert problem.code == "eval-host-unauthenticated"
    assert problem.message.endswith("opencode/auth.json")
    assert "opencode.db" not in problem.message
    assert problem.next is not None
    assert "auth.json" in problem.next


def test_opencode_v2_accepts_the_database(tmp_path: Path) -> None:
    """V2 counts its database as stored authentication when auth.json is absent."""
    db = tmp_path / "channel.db"
    db.write_bytes(b"")
    stub = write_stub(tmp_path / "bin", "opencode", version="2.3.4", db_path=str(db))
    host = OpenCodeHost(env=opencode_env(tmp_path, stub.parent, auth=False))
    anyio.run(host.probe)
    assert host.dialect == "v2"


def test_opencode_v2_unauthenticated_lists_both_paths(tmp_path: Path) -> None:
    """V2 with neither auth.json nor a database names both paths."""
    stub = write_stub(tmp_path / "bin", "opencode", version="2.0.0")
    env = opencode_env(tmp_path, stub.parent, auth=False)
    problem = probe_error(OpenCodeHost(env=env)).diagnostics[0]
    data = Path(env["XDG_DATA_HOME"]) / "opencode"
    assert problem.message == (
        f"opencode authentication not found at {data / 'auth.json'} or {data / 'opencode.db'}"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("/abs/x.db", "/abs/x.db"), ("rel/x.db", "DATA/rel/x.db"), (":memory:", None)],
)
def test_opencode_db_env_resolution(tmp_path: Path, value: str, expected: str | None) -> None:
    """OPENCODE_DB: absolute kept, relative under the data dir, :memory: is no file."""
    from atlante_eval.hosts.credentials import resolve_db_value

    data = tmp_path / "data"
    resolved = resolve_db_value(value, data)
    assert (None if resolved is None else str(resolved)) == (
        None if expected is None else expected.replace("DATA", str(data))
    )


def test_opencode_v2_relative_db_env_counts_as_auth(tmp_path: Path) -> None:
    """A relative OPENCODE_DB resolves under the data dir and, existing, authenticates V2."""
    stub = write_stub(tmp_path / "bin", "opencode", version="2.0.0")
    env = opencode_env(tmp_path, stub.parent, auth=False)
    (Path(env["XDG_DATA_HOME"]) / "opencode" / "custom.db").write_bytes(b"")
    host = OpenCodeHost(env={**env, "OPENCODE_DB": "custom.db"})
    anyio.run(host.probe)
    assert not [c for c in calls(stub) if c["argv"][1:3] == ["debug", "paths"]]


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({"ANTHROPIC_API_KEY": "k"}, "api-key"),
        ({"ANTHROPIC_AUTH_TOKEN": "t"}, "api-key"),
        ({"CLAUDE_CODE_OAUTH_TOKEN": "o"}, "oauth"),
        ({"CLAUDE_CODE_USE_BEDROCK": "1", "ANTHROPIC_API_KEY": "k"}, "bedrock"),
        ({"CLAUDE_CODE_USE_VERTEX": "true"}, "vertex"),
        ({"CLAUDE_CODE_USE_FOUNDRY": "yes"}, "foundry"),
        ({"CLAUDE_CODE_USE_BEDROCK": "FALSE"}, None),
        ({"CLAUDE_CODE_USE_VERTEX": "0", "CLAUDE_CODE_USE_FOUNDRY": "no"}, None),
        ({"ANTHROPIC_API_KEY": "  "}, None),
        ({}, None),
    ],
)
def test_claude_env_auth_modes(env: dict[str, str], mode: str | None) -> None:
    """Credential variables and cloud flags (not 0/false/no) decide the auth mode."""
    assert claude_env_auth_mode(env) == mode


def test_claude_api_key_skips_the_status_probe(tmp_path: Path) -> None:
    """With an API key in the environment, `claude auth status` is never run."""
    stub = write_stub(tmp_path / "bin", "claude", version="2.1.332")
    host = ClaudeCodeHost(env={"PATH": str(stub.parent), "ANTHROPIC_API_KEY": "k"})
    anyio.run(host.probe)
    assert host.auth_mode == "api-key"
    assert host.version == "2.1.332"
    assert [c["argv"][1:] for c in calls(stub)] == [["--version"]]


def test_claude_logged_in_session_counts(tmp_path: Path) -> None:
    """`claude auth status --json` with loggedIn true is the auth-status mode."""
    stub = write_stub(tmp_path / "bin", "claude", version="2.0.0", auth_status={"loggedIn": True})
    host = ClaudeCodeHost(env={"PATH": str(stub.parent), "HOME": str(tmp_path)})
    anyio.run(host.probe)
    assert host.auth_mode == "auth-status"


def test_claude_unauthenticated_points_at_setup_token(tmp_path: Path) -> None:
    """No credentials: eval-host-unauthenticated whose next step is `claude setup-token`."""
    stub = write_stub(
        tmp_path / "bin", "claude", version="2.1.332", auth_status={"loggedIn": False}
    )
    secret_free = {"PATH": str(stub.parent), "HOME": str(tmp_path), "OTHER_SECRET": "s3cret"}
    problem = probe_error(ClaudeCodeHost(env=secret_free)).diagnostics[0]
    assert problem.code == "eval-host-unauthenticated"
    assert problem.message == "claude-code authentication not found"
    assert problem.next is not None
    assert "claude setup-token" in problem.next
    assert "s3cret" not in json.dumps(problem.model_dump())


@pytest.mark.parametrize("version", ["1.9.9", "3.0.0"])
def test_claude_out_of_range_is_unsupported(tmp_path: Path, version: str) -> None:
    """Only Claude Code 2.x is supported."""
    stub = write_stub(tmp_path / "bin", "claude", version=f"{version} (Claude Code)")
    problem = probe_error(
        ClaudeCodeHost(env={"PATH": str(stub.parent), "ANTHROPIC_API_KEY": "k"})
    ).diagnostics[0]
    assert problem.code == "eval-host-unsupported-version"
    assert problem.expected == ">=2.0.0 <3.0.0"


INSTALL_SCRIPT = Path(__file__).parents[1] / "tools" / "install_hosts.sh"


def test_install_script_pins_match_the_realhost_tests() -> None:
    """tools/install_hosts.sh installs exactly the versions the real-host tests expect."""
    from realhost.hosts import CLAUDE_CODE_VERSION, OPENCODE_VERSION

    text = INSTALL_SCRIPT.read_text(encoding="utf-8")
    assert f'CLAUDE_CODE_VERSION="{CLAUDE_CODE_VERSION}"' in text
    assert f'OPENCODE_VERSION="{OPENCODE_VERSION}"' in text


def test_install_script_only_checks_an_intact_cache(tmp_path: Path) -> None:
    """A cache holding the pinned versions intact is reused: no npm, its directory printed."""
    import subprocess
    import sys

    from hostcachekit import closed_port
    from npmregistry import npm_env, require_npm, serve_registry, standin_host_package
    from realhost.hosts import PINNED

    from atlante_eval.hosts.cache import HostPin

    require_npm()
    cache = tmp_path / "host-cache"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    with serve_registry() as registry:
        for host, version in PINNED.items():
            pin = HostPin(host, version)  # type: ignore[arg-type]
            files, _ = standin_host_package(tmp_path / host, pin.command, version)
            registry.publish(pin.package, version, files)
        first = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            env={**env, **npm_env(tmp_path, registry.url), "ATLANTE_EVAL_HOST_CACHE": str(cache)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert first.returncode == 0, first.stderr
        assert first.stdout == f"{cache}\n"
        assert "installing claude-code" in first.stderr
    offline = npm_env(tmp_path, f"http://127.0.0.1:{closed_port()}/")
    again = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)],
        env={**env, **offline, "ATLANTE_EVAL_HOST_CACHE": str(cache)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{cache}\n"
    assert "installing" not in again.stderr
    assert "already installed, integrity checked" in again.stderr
