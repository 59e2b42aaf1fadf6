"""Credential copies: OpenCode's auth.json and V2 database subset, Claude's credentials file."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from stubcli import build_v2_database, rows

from atlante_eval.hosts.credentials import (
    CredentialsError,
    claude_credentials_file,
    copy_private_file,
    copy_v2_database,
    opencode_data_dir,
)


def schema_names(path: Path) -> set[str]:
    """Return the names of the schema objects in the database at ``path``."""
    connection = sqlite3.connect(path)
    try:
        return {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()


def test_v2_copy_keeps_credentials_and_migrations_not_history(tmp_path: Path) -> None:
    """The subset copy keeps migration, legacy drizzle, credential and one kv row only."""
    source = tmp_path / "opencode.db"
    build_v2_database(source)
    target = tmp_path / "trial" / "data" / "opencode" / "opencode.db"
    copy_v2_database(source, target)

    assert schema_names(target) >= schema_names(source) - {"sqlite_sequence"}
    assert rows(target, "migration") == [(1, "0001_init", 1), (2, "0002", 2)]
    assert rows(target, "__drizzle_migrations") == [(1, "abc", 10, "0000_legacy", 1700000000)]
    assert rows(target, "credential") == [("c1", "anthropic", "sk-secret")]
    assert rows(target, "kv") == [("wellknown:sources", '["https://acme.example"]')]
    assert rows(target, "session") == []
    assert rows(target, "message") == []
    assert rows(target, "message_search") == []
    assert rows(target, "audit") == []  # no trigger fired during the copy
    assert b"private history" not in target.read_bytes()
    assert b"secret plan" not in target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_v2_copy_is_usable_and_keeps_triggers(tmp_path: Path) -> None:
    """The copy is a working database: new rows autoincrement and triggers fire again."""
    source = tmp_path / "opencode.db"
    build_v2_database(source)
    target = tmp_path / "copy.db"
    copy_v2_database(source, target)
    connection = sqlite3.connect(target)
    try:
        connection.execute("INSERT INTO migration (name) VALUES ('0003')")
        connection.execute("INSERT INTO credential VALUES ('c2', 'openai', 'x')")
        connection.commit()
        assert connection.execute("SELECT max(id) FROM migration").fetchone() == (3,)
        assert connection.execute("SELECT what FROM audit").fetchall() == [("credential c2",)]
    finally:
        connection.close()


def test_v2_copy_without_optional_tables(tmp_path: Path) -> None:
    """A database without __drizzle_migrations or kv still copies its credentials."""
    source = tmp_path / "small.db"
    connection = sqlite3.connect(source)
    connection.executescript(
        "CREATE TABLE migration (id INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE credential (id TEXT PRIMARY KEY, secret TEXT);"
        "INSERT INTO credential VALUES ('c', 's');"
    )
    connection.commit()
    connection.close()
    copy_v2_database(source, tmp_path / "out.db")
    assert rows(tmp_path / "out.db", "credential") == [("c", "s")]


def test_v2_copy_refuses_an_existing_target(tmp_path: Path) -> None:
    """An existing target (including the source itself) is refused and left alone."""
    source = tmp_path / "opencode.db"
    build_v2_database(source)
    before = source.read_bytes()
    with pytest.raises(CredentialsError, match="already exists"):
        copy_v2_database(source, source)
    assert source.read_bytes() == before


def test_v2_copy_failure_removes_the_partial_target(tmp_path: Path) -> None:
    """A source that is not a database fails with the reference message; no target remains."""
    source = tmp_path / "broken.db"
    source.write_bytes(b"this is not sqlite" * 100)
    target = tmp_path / "out" / "opencode.db"
    with pytest.raises(CredentialsError) as caught:
        copy_v2_database(source, target)
    assert str(caught.value).startswith(
        f"could not copy OpenCode V2 authentication database from {source}: "
    )
    assert not target.exists()


def test_private_copy_is_0600_and_exclusive(tmp_path: Path) -> None:
    """A credential copy is created with mode 0600 and never overwrites a file."""
    source = tmp_path / "auth.json"
    source.write_text('{"k": 1}')
    source.chmod(0o644)
    target = tmp_path / "state" / "data" / "opencode" / "auth.json"
    copy_private_file(source, target)
    assert target.read_text() == '{"k": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(CredentialsError):
        copy_private_file(source, target)


def test_private_copy_does_not_follow_a_planted_link(tmp_path: Path) -> None:
    """A symlink at the target is not written through."""
    source = tmp_path / "auth.json"
    source.write_text("secret")
    elsewhere = tmp_path / "elsewhere"
    target = tmp_path / "t" / "auth.json"
    target.parent.mkdir()
    Path(target).symlink_to(elsewhere)
    with pytest.raises(CredentialsError):
        copy_private_file(source, target)
    assert not elsewhere.exists()


def test_opencode_data_dir_prefers_xdg(tmp_path: Path) -> None:
    """$XDG_DATA_HOME/opencode, else ~/.local/share/opencode."""
    assert opencode_data_dir({"XDG_DATA_HOME": "/x", "HOME": "/h"}) == Path("/x/opencode")
    assert opencode_data_dir({"HOME": "/h"}) == Path("/h/.local/share/opencode")


def test_claude_credentials_file_lookup(tmp_path: Path) -> None:
    """$CLAUDE_CONFIG_DIR/.credentials.json first, then ~/.claude/.credentials.json."""
    home = tmp_path / "home"
    config = tmp_path / "config"
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    assert claude_credentials_file(env) is None
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / ".credentials.json").write_text("{}")
    assert claude_credentials_file(env) == home / ".claude" / ".credentials.json"
    config.mkdir()
    (config / ".credentials.json").write_text("{}")
    assert claude_credentials_file(env) == config / ".credentials.json"
