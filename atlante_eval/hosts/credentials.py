"""The hosts' stored credentials: where they are, whether they exist, and private copies.

A trial never sees the user's real host directories. Only credentials travel:
OpenCode's ``auth.json`` (and, for V2, a subset copy of its SQLite database that
keeps credential and migration rows but no session history), and Claude Code's
``.credentials.json``. Copies are created with mode 0600 inside the trial's
state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .._util.jsondoc import DocumentReadError, read_document
from ..trial import run_process
from .versions import PROBE_TIMEOUT_S

if TYPE_CHECKING:
    import sqlite3  # loaded when a V2 database is copied: most trials have none

__all__ = [
    "CLAUDE_AUTH_ENV",
    "ClaudeAuthMode",
    "CredentialsError",
    "claude_auth_status",
    "claude_credentials_checked",
    "claude_credentials_file",
    "claude_env_auth_mode",
    "copy_private_file",
    "copy_v2_database",
    "opencode_data_dir",
    "opencode_db_path",
    "resolve_db_value",
    "stored_secret_values",
]

ClaudeAuthMode = Literal["bedrock", "vertex", "foundry", "api-key", "oauth", "auth-status"]

#: Claude Code credential variables handed to trials when set (and the gateway URL).
CLAUDE_AUTH_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "ANTHROPIC_BASE_URL",
)

_CLOUD_FLAGS: Mapping[str, ClaudeAuthMode] = {
    "CLAUDE_CODE_USE_BEDROCK": "bedrock",
    "CLAUDE_CODE_USE_VERTEX": "vertex",
    "CLAUDE_CODE_USE_FOUNDRY": "foundry",
}
#: Rows of ``kv`` that a V2 database copy keeps.
_KV_KEYS = ("wellknown:sources",)
_SCHEMA_ORDER = {"table": 0, "index": 1, "view": 2, "trigger": 3}


class CredentialsError(Exception):
    """Raised when a credential copy fails; hosts turn it into a ``HostError``."""


#: Keys of a stored credentials document whose values are descriptions, not secrets.
_NOT_SECRET_KEYS = frozenset({"type", "scopes", "subscriptionType", "rateLimitTier"})


#: Largest stored credentials document read back for its secrets (it holds a few keys).
_STORED_BYTES = 1024 * 1024


def stored_secret_values(path: Path) -> list[str]:
    """The string values of a stored credentials document (its keys and tokens).

    Reports and transcripts must never hold them; a missing or unreadable file has none.
    """
    try:  # a trial's state directory: never block on, or follow, what is there
        document = json.loads(read_document(path, max_bytes=_STORED_BYTES))
    except (DocumentReadError, ValueError, RecursionError):
        return []
    found: list[str] = []
    stack: list[object] = [document]
    while stack and len(found) < 1000:
        value = stack.pop()
        if isinstance(value, dict):
            stack += [v for k, v in value.items() if k not in _NOT_SECRET_KEYS]
        elif isinstance(value, list):
            stack += value
        elif isinstance(value, str):
            found.append(value)
    return found


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def copy_private_file(source: Path, target: Path) -> None:
    """Copy ``source`` to a new file ``target`` with mode 0600 (parents created).

    Raises:
        CredentialsError: the source cannot be read or the target cannot be created.
    """
    try:
        data = source.read_bytes()
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(target, 0o600)
    except OSError as exc:
        raise CredentialsError(f"could not copy {source}: {exc.strerror or exc}") from exc


# -- OpenCode ---------------------------------------------------------------------------


def opencode_data_dir(env: Mapping[str, str]) -> Path:
    """Return OpenCode's data directory: ``$XDG_DATA_HOME/opencode`` or its default."""
    xdg = env.get("XDG_DATA_HOME")
    if xdg:
        return Path(xdg) / "opencode"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "share" / "opencode"


def resolve_db_value(value: str, data_dir: Path) -> Path | None:
    """Resolve an ``OPENCODE_DB`` value: ``:memory:`` is no file; relative is under data."""
    value = value.strip()
    if not value or value == ":memory:":
        return None
    path = Path(value)
    return path if path.is_absolute() else data_dir / path


async def opencode_db_path(binary: str, env: Mapping[str, str], data_dir: Path) -> Path | None:
    """Return the V2 database path: ``OPENCODE_DB``, ``<bin> debug paths db``, or the default.

    ``None`` when ``OPENCODE_DB`` is ``:memory:`` (nothing to copy).
    """
    explicit = env.get("OPENCODE_DB")
    if explicit is not None:
        return resolve_db_value(explicit, data_dir)
    result = await run_process(
        [binary, "debug", "paths", "db"], cwd=Path.cwd(), env=env, timeout_s=PROBE_TIMEOUT_S
    )
    if result.returncode == 0 and not result.timed_out:
        lines = result.stdout.strip().splitlines()
        printed = lines[-1].strip() if lines else ""
        # Some versions print "db <path>" like `debug paths`; keep the path.
        if printed.startswith("db ") and not printed.startswith("db/"):
            printed = printed[3:].strip()
        resolved = resolve_db_value(printed, data_dir)
        if resolved is not None:
            return resolved
    return data_dir / "opencode.db"


def _schema(source: Path) -> tuple[list[tuple[str, str, str]], dict[str, list[str]]]:
    """Read the schema objects and each table's columns from ``source`` (read only)."""
    import sqlite3

    connection = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)
    try:
        objects = [
            (str(kind), str(name), str(sql))
            for kind, name, sql in connection.execute(
                "SELECT type, name, sql FROM sqlite_master "
                "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            )
        ]
        columns = {
            name: [str(row[1]) for row in connection.execute(f"PRAGMA table_info({_quote(name)})")]
            for kind, name, _sql in objects
            if kind == "table"
        }
    finally:
        connection.close()
    return objects, columns


def _copy_rows(connection: sqlite3.Connection, columns: Mapping[str, list[str]]) -> None:
    for table in ("migration", "__drizzle_migrations", "credential"):
        if table in columns:
            connection.execute(
                f"INSERT INTO main.{_quote(table)} SELECT * FROM src.{_quote(table)}"  # noqa: S608 - quoted names from the schema, no user input
            )
    if "key" in columns.get("kv", []):
        marks = ", ".join("?" for _ in _KV_KEYS)
        connection.execute(
            f'INSERT INTO main.kv SELECT * FROM src.kv WHERE "key" IN ({marks})',  # noqa: S608 - placeholders only
            _KV_KEYS,
        )


def copy_v2_database(source: Path, target: Path) -> None:
    """Build ``target`` as a credentials-only copy of the OpenCode V2 database ``source``.

    Every schema object is recreated (tables, indexes, views, then triggers after
    the rows, so no trigger fires during the copy); rows are copied only from
    ``migration``, ``__drizzle_migrations``, ``credential`` and the ``kv`` row
    ``wellknown:sources``. Sessions and messages never travel. Foreign keys are
    off during the copy; the result has mode 0600.

    Raises:
        CredentialsError: the copy failed (the partial target is removed).
    """
    import sqlite3

    prefix = f"could not copy OpenCode V2 authentication database from {source}"
    if os.path.lexists(target):
        raise CredentialsError(f"{prefix}: {target} already exists")
    if source.resolve() == target.resolve():
        raise CredentialsError(f"{prefix}: source and target are the same file")
    try:
        objects, columns = _schema(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        connection = sqlite3.connect(target, isolation_level=None)
        try:
            connection.execute("PRAGMA foreign_keys=OFF")
            ordered = sorted(objects, key=lambda o: _SCHEMA_ORDER.get(o[0], 4))
            created: set[str] = set()
            connection.execute("BEGIN")
            for kind, name, sql in ordered:
                if kind == "trigger":
                    continue
                if kind == "table":
                    exists = connection.execute(
                        "SELECT 1 FROM sqlite_master WHERE name = ?", (name,)
                    ).fetchone()
                    if exists:  # a shadow table its virtual table already created
                        continue
                connection.execute(sql)
                created.add(name)
            connection.execute("COMMIT")
            connection.execute("ATTACH DATABASE ? AS src", (f"{source.as_uri()}?mode=ro",))
            connection.execute("BEGIN")
            _copy_rows(connection, {k: v for k, v in columns.items() if k in created})
            for kind, _name, sql in ordered:
                if kind == "trigger":
                    connection.execute(sql)
            connection.execute("COMMIT")
            connection.execute("DETACH DATABASE src")
        finally:
            connection.close()
        os.chmod(target, 0o600)
    except (sqlite3.Error, OSError) as exc:
        for leftover in (target, *(Path(f"{target}{s}") for s in ("-journal", "-wal", "-shm"))):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise CredentialsError(f"{prefix}: {exc}") from exc


# -- Claude Code ------------------------------------------------------------------------


def _flag_on(value: str | None) -> bool:
    return (
        value is not None
        and bool(value.strip())
        and value.strip().lower()
        not in (
            "0",
            "false",
            "no",
        )
    )


def claude_env_auth_mode(env: Mapping[str, str]) -> ClaudeAuthMode | None:
    """Return the Claude Code credential mode the environment provides, if any."""
    for name, mode in _CLOUD_FLAGS.items():
        if _flag_on(env.get(name)):
            return mode
    if any((env.get(name) or "").strip() for name in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY")):
        return "api-key"
    if (env.get("CLAUDE_CODE_OAUTH_TOKEN") or "").strip():
        return "oauth"
    return None


def claude_credentials_checked(mode: ClaudeAuthMode, env: Mapping[str, str]) -> str:
    """Say exactly what the probe checked for ``mode`` (nothing is verified with the provider)."""
    if mode == "auth-status":
        return "`claude auth status` reports a signed-in session"
    if mode in ("bedrock", "vertex", "foundry"):
        flag = next(name for name, value in _CLOUD_FLAGS.items() if value == mode)
        return f"{flag} is set (the cloud credentials are not verified)"
    names = {
        "api-key": ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"),
        "oauth": ("CLAUDE_CODE_OAUTH_TOKEN",),
    }
    name = next((n for n in names[mode] if (env.get(n) or "").strip()), names[mode][-1])
    return f"{name} is set (not verified with the provider)"


async def claude_auth_status(binary: str, env: Mapping[str, str]) -> bool:
    """Whether ``claude auth status --json`` reports ``loggedIn: true``."""
    result = await run_process(
        [binary, "auth", "status", "--json"],
        cwd=Path.cwd(),
        env=env,
        timeout_s=PROBE_TIMEOUT_S,
    )
    if result.spawn_error or result.timed_out:
        return False
    try:
        status = json.loads(result.stdout)
    except ValueError:
        return False
    return isinstance(status, dict) and status.get("loggedIn") is True


def claude_credentials_file(env: Mapping[str, str]) -> Path | None:
    """Return the first existing Claude Code credentials file, if any.

    ``$CLAUDE_CONFIG_DIR/.credentials.json``, then ``$HOME/.claude/.credentials.json``.
    """
    candidates = []
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir and config_dir.strip():
        candidates.append(Path(config_dir) / ".credentials.json")
    home = env.get("HOME") or str(Path.home())
    candidates.append(Path(home) / ".claude" / ".credentials.json")
    return next((path for path in candidates if path.is_file()), None)
