"""Stand-ins for host tests that need no real CLI: executables and an OpenCode V2 database.

:func:`write_stub` writes a small Python program under a name (``opencode``,
``claude``) into a directory. It answers ``--version``, ``auth status --json`` and
``debug paths db`` from a spec, and for a session (any other argv) it records what
it was given (argv, cwd, environment, stdin, and the sandbox files named in the
spec), prints the spec's events as JSON lines, writes the spec's files, and exits
with the spec's code. Every invocation is appended to ``<name>.calls.jsonl`` next
to the program; :func:`calls` reads them back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from factory import make_project, scenario

_PROGRAM = """\
#!{python}
import json, os, sys, time
SPEC = {spec!r}
CALLS = {calls!r}
spec = json.load(open(SPEC))
args = sys.argv[1:]
record = {{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}}
def done(code):
    with open(CALLS, "a") as handle:
        handle.write(json.dumps(record) + "\\n")
    sys.stdout.flush()
    sys.exit(code)
if args == ["--version"]:
    sys.stdout.write(spec.get("version_output", spec.get("version", "") + "\\n"))
    done(spec.get("version_exit", 0))
if args[:3] == ["auth", "status", "--json"]:
    status = spec.get("auth_status")
    if status is not None:
        print(json.dumps(status))
    done(0 if status and status.get("loggedIn") else 1)
if args[:3] == ["debug", "paths", "db"]:
    if spec.get("db_path") is None:
        done(1)
    print(spec["db_path"])
    done(0)
record["stdin"] = sys.stdin.read() if not sys.stdin.isatty() else None
record["files"] = {{}}
for rel in spec.get("capture", []):
    path = os.path.join(os.getcwd(), os.path.expandvars(rel))
    if os.path.isfile(path):
        record["files"][rel] = open(path, encoding="utf-8", errors="replace").read()
        record.setdefault("modes", {{}})[rel] = oct(os.stat(path).st_mode & 0o777)
for rel, text in spec.get("write", {{}}).items():
    os.makedirs(os.path.dirname(os.path.join(os.getcwd(), rel)) or ".", exist_ok=True)
    with open(rel, "w") as handle:
        handle.write(text)
with open(CALLS + ".pid", "w") as handle:
    handle.write(str(os.getpid()))
for event in spec.get("events", []):
    print(json.dumps(event), flush=True)
sys.stderr.write(spec.get("stderr", ""))
if spec.get("sleep"):
    time.sleep(spec["sleep"])
done(spec.get("exit", 0))
"""


def write_stub(bin_dir: Path, name: str, **spec: Any) -> Path:
    """Write a stand-in executable ``bin_dir/name`` driven by ``spec``; return its path.

    Spec keys: ``version`` (or raw ``version_output``), ``version_exit``,
    ``auth_status`` (the JSON ``auth status --json`` prints; exit 1 unless
    ``loggedIn``), ``db_path`` (what ``debug paths db`` prints; exit 1 if absent),
    ``events`` (JSON lines printed by a session), ``capture`` (files to record,
    relative to the cwd or absolute, ``$VAR`` expanded), ``write`` (files a session
    creates), ``stderr``, ``sleep`` (seconds), ``exit``. A session writes its pid to
    ``<name>.calls.jsonl.pid`` before printing events.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    spec_path = bin_dir / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    program = bin_dir / name
    program.write_text(
        _PROGRAM.format(
            python=sys.executable, spec=str(spec_path), calls=str(bin_dir / f"{name}.calls.jsonl")
        ),
        encoding="utf-8",
    )
    program.chmod(0o755)
    return program


#: The console script's own ``run`` in a fresh interpreter: ``main()`` as the entry point
#: calls it, after ``{setup}``; an audit hook writes ``json.dumps({observe})`` to OUT when the
#: host's first session is spawned (in the worker thread that spawns it).
_AT_FIRST_SESSION = """
import json, os, sys
{setup}
OUT = sys.argv[2]

def _at_session(event, args):
    if event == "subprocess.Popen" and os.path.basename(str(args[0])) == "opencode":
        if list(args[1][1:2]) == ["run"] and not os.path.exists(OUT):
            with open(OUT, "w") as out:
                json.dump({observe}, out)

sys.addaudithook(_at_session)
from atlante_eval.cli import main
sys.argv = ["atlante-eval", "run", sys.argv[1], "--no-history", *sys.argv[3:]]
main()
"""


def run_to_first_session(
    tmp_path: Path, *, observe: str, setup: str = "", trials: int = 1, args: Sequence[str] = ()
) -> tuple[Any, int]:
    """Run ``atlante-eval run`` on a one-scenario project with a stand-in ``opencode``.

    ``observe`` is a Python expression evaluated at the first session's spawn, after
    ``setup`` ran before the CLI was imported. Returns what it gave and how many
    sessions the run started; the run must succeed.
    """
    bin_dir = tmp_path / "bin"
    stub = write_stub(bin_dir, "opencode", version="1.18.33", write={"out.txt": "x\n"})
    home = tmp_path / "home"
    auth = home / ".local" / "share" / "opencode" / "auth.json"
    auth.parent.mkdir(parents=True)
    auth.write_text('{"acme": {"type": "api", "key": "k"}}', encoding="utf-8")
    root = make_project(
        tmp_path / "project",
        scenarios=[scenario("first", checks=[{"type": "file-exists", "path": "out.txt"}])],
        eval_extra={"model": "acme/model", "budget": {"trials": trials}},
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE", "PYTEST_"))},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "NO_COLOR": "1",
    }
    seen = tmp_path / "observed.json"
    code = _AT_FIRST_SESSION.format(setup=setup, observe=observe)
    result = subprocess.run(
        [sys.executable, "-c", code, str(root), str(seen), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    started = [c["argv"][1] for c in calls(stub)].count("run")
    return json.loads(seen.read_text(encoding="utf-8")), started


def update_stub(program: Path, **changes: Any) -> None:
    """Change some spec keys of an existing stand-in."""
    spec_path = program.with_name(f"{program.name}.spec.json")
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    spec.update(changes)
    spec_path.write_text(json.dumps(spec), encoding="utf-8")


def calls(program: Path) -> list[dict[str, Any]]:
    """Return every recorded invocation of the stand-in ``program``, oldest first."""
    log = program.with_name(f"{program.name}.calls.jsonl")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def sessions(program: Path) -> list[dict[str, Any]]:
    """Return the recorded session invocations (not probes) of ``program``."""
    probes: Sequence[Sequence[str]] = (["--version"], ["auth", "status"], ["debug", "paths"])
    return [
        call
        for call in calls(program)
        if not any(call["argv"][1 : 1 + len(p)] == list(p) for p in probes)
    ]


def env_of(call: Mapping[str, Any]) -> dict[str, str]:
    """Return the environment a recorded invocation saw."""
    return dict(call["env"])


# -- a stand-in OpenCode V2 database ----------------------------------------------------

V2_SCHEMA = """
PRAGMA foreign_keys = ON;
CREATE TABLE migration (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, applied INTEGER);
CREATE TABLE __drizzle_migrations (id INTEGER PRIMARY KEY, hash TEXT NOT NULL, created_at INTEGER,
    tag TEXT, "when" INTEGER);
CREATE TABLE credential (id TEXT PRIMARY KEY, provider TEXT NOT NULL, secret TEXT NOT NULL);
CREATE TABLE kv ("key" TEXT PRIMARY KEY, value TEXT);
CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session(id),
    body TEXT);
CREATE TABLE audit (what TEXT);
CREATE INDEX message_session ON message(session_id);
CREATE UNIQUE INDEX credential_provider ON credential(provider);
CREATE VIEW session_titles AS SELECT title FROM session;
CREATE TRIGGER credential_audit AFTER INSERT ON credential BEGIN
    INSERT INTO audit VALUES ('credential ' || new.id);
END;
CREATE VIRTUAL TABLE message_search USING fts5(body);
"""


def build_v2_database(path: Path) -> None:
    """Create an OpenCode-V2-like database with credentials, bookkeeping and history."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(V2_SCHEMA)
        connection.executemany(
            "INSERT INTO migration (name, applied) VALUES (?, ?)", [("0001_init", 1), ("0002", 2)]
        )
        connection.execute(
            "INSERT INTO __drizzle_migrations VALUES (1, 'abc', 10, '0000_legacy', 1700000000)"
        )
        connection.execute("INSERT INTO credential VALUES ('c1', 'anthropic', 'sk-secret')")
        connection.executemany(
            "INSERT INTO kv VALUES (?, ?)",
            [("wellknown:sources", '["https://acme.example"]'), ("recent:projects", "[1]")],
        )
        connection.execute("INSERT INTO session VALUES ('s1', 'private history')")
        connection.execute("INSERT INTO message VALUES ('m1', 's1', 'hello secret plan')")
        connection.execute("INSERT INTO message_search (body) VALUES ('hello secret plan')")
        connection.commit()
    finally:
        connection.close()


def rows(path: Path, table: str) -> list[tuple[object, ...]]:
    """Return every row of ``table`` in the database at ``path``, sorted."""
    connection = sqlite3.connect(path)
    try:
        return sorted(connection.execute(f'SELECT * FROM "{table}"').fetchall())  # noqa: S608
    finally:
        connection.close()
