"""A real PostgreSQL server for the history tests, started by the test session itself.

The distribution's ``initdb`` and ``pg_ctl`` (``/usr/lib/postgresql/*/bin``, or
``$ATLANTE_EVAL_PG_BIN``) create a cluster in a temporary directory and start it
listening on 127.0.0.1 at a free port only, its unix socket inside that
directory. PostgreSQL refuses to run as root: as root the server runs as the
``postgres`` user (``runuser``). The server is stopped and its directory removed
when the session ends. Without PostgreSQL the tests skip, except in CI (``CI=1``)
or with ``ATLANTE_EVAL_REQUIRE_POSTGRES=1``, where they fail.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fresh_database", "pg_bin", "postgres_required", "postgres_server"]


def postgres_required() -> bool:
    """Whether a missing PostgreSQL is an error (CI, or asked for) rather than a skip."""
    return os.environ.get("CI") not in (None, "", "0") or bool(
        os.environ.get("ATLANTE_EVAL_REQUIRE_POSTGRES")
    )


def pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (the newest installed version)."""
    configured = os.environ.get("ATLANTE_EVAL_PG_BIN")
    candidates = [configured] if configured else []
    candidates += sorted((str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")), reverse=True)
    for candidate in candidates:
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    """Run ``argv`` as ``postgres`` when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL on 127.0.0.1; yield its URL without a database name."""
    binaries = pg_bin()
    problem = None
    if binaries is None:
        problem = "PostgreSQL's initdb/pg_ctl not found (apt-get install postgresql)"
    elif os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            problem = "no postgres user to run the server as (apt-get install postgresql)"
    if problem is not None:
        if postgres_required():
            pytest.fail(f"PostgreSQL tests must run here: {problem}")
        pytest.skip(problem)
    assert binaries is not None
    root = Path(tempfile.mkdtemp(prefix="atlante-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
    data, log = root / "data", root / "server.log"
    port = _free_port()
    subprocess.run(
        _as_server_user(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        ),
        check=True,
        capture_output=True,
    )
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    started = subprocess.run(
        _as_server_user(
            [
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(log),
                "-w",
                "-t",
                "60",
                "start",
            ]
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        if started.returncode != 0:
            shown = log.read_text(errors="replace") if log.exists() else started.stderr
            pytest.fail(f"PostgreSQL did not start: {shown[-2000:]}")
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_server_user(
                [str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
            ),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_database(postgres_server: str) -> Iterator[str]:
    """A new, empty database on the session's server; dropped afterwards."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # a fresh random name, not user input
    try:
        yield f"{postgres_server}/{name}"
    finally:
        with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
