"""Run the stand-in CLI as the unprivileged user ``nobody``, in a workspace it owns.

Attacks that rely on permissions (``chmod 000``, read-only directories) do nothing
to root, so these tests drop privileges for the whole CLI run with ``setpriv``
instead of skipping because CI runs as root. The workspace lives directly under
``/tmp`` (pytest's own temporary directories are private to root). The test's
interpreter may live where ``nobody`` cannot go (``/root/.pyenv``), so
:func:`nobody_python` finds an interpreter of the same version that ``nobody``
can run, with this environment's packages on ``PYTHONPATH``. Where a directory on
the way to what it needs cannot be searched by ``nobody`` (``/root`` is 0700, a
``mktemp -d`` venv parent too), the run gets a private mount namespace in which
that directory is a fresh 0755 tmpfs holding read-only binds of just the entries
needed: the machine's own permissions are never changed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from clikit import ENTRY, cli_env, kill_marked

from atlante_eval._util.fstree import remove_tree

NOBODY = 65534
DROP = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]

#: Mount each hidden directory's needed entries read-only over a 0755 tmpfs, then drop.
_REVEAL = """set -e
stage=$(mktemp -d /tmp/atlante-reveal-XXXXXX)
i=0
for pair in $REVEAL; do
    i=$((i + 1)); hidden=${pair%%:*}; name=${pair#*:}
    if [ -d "$hidden/$name" ]; then mkdir "$stage/$i"; else touch "$stage/$i"; fi
    mount --bind "$hidden/$name" "$stage/$i"
done
for hidden in $HIDDEN; do
    mount -t tmpfs -o mode=0755 tmpfs "$hidden"
done
i=0
for pair in $REVEAL; do
    i=$((i + 1)); hidden=${pair%%:*}; name=${pair#*:}
    if [ -d "$stage/$i" ]; then mkdir -p "$hidden/$name"; else touch "$hidden/$name"; fi
    mount --bind "$stage/$i" "$hidden/$name"
    mount -o remount,bind,ro "$hidden/$name"
    umount "$stage/$i"
    rm -d "$stage/$i" 2>/dev/null || rm -f "$stage/$i"
done
rmdir "$stage"
exec "$@"
"""


def _hidden_from_nobody(path: str) -> tuple[str, str] | None:
    """The first directory on ``path`` that others cannot search, and the entry below it."""
    current = Path("/")
    parts = Path(os.path.abspath(path)).parts[1:]
    for index, part in enumerate(parts[:-1]):
        current = current / part
        if not os.stat(current).st_mode & 0o001:
            return str(current), parts[index + 1]
    return None


def drop_to_nobody(needed: list[str]) -> tuple[list[str], dict[str, str]]:
    """The argv prefix (and its environment) that runs a command as ``nobody``.

    Every path in ``needed`` is made reachable: see the module's docstring.
    """
    reveal = dict.fromkeys(
        f"{hidden[0]}:{hidden[1]}"
        for path in needed
        for hidden in [_hidden_from_nobody(path)]
        if hidden is not None
    )
    if not reveal:
        return list(DROP), {}
    env = {
        "REVEAL": " ".join(reveal),
        "HIDDEN": " ".join(dict.fromkeys(pair.split(":", 1)[0] for pair in reveal)),
    }
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _REVEAL, "sh"]
    return [*argv, *DROP], env


def _pythonpath() -> str:
    """This environment's packages and the project, without the interpreter's own library."""
    stdlib = sysconfig.get_paths()["stdlib"]
    keep = [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(stdlib)]
    return os.pathsep.join(keep)


@functools.cache
def nobody_python() -> str:
    """An interpreter of this Python version that ``nobody`` can run with our packages."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable)]
    candidates += [shutil.which(version) or "", f"/usr/bin/{version}", f"/usr/local/bin/{version}"]
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": _pythonpath()}
    probe = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import atlante_eval'])"
    for candidate in dict.fromkeys(c for c in candidates if c):
        drop, reveal = drop_to_nobody(_needed(candidate))
        try:
            done = subprocess.run(
                [*drop, candidate, "-c", probe],
                env={**env, **reveal},
                capture_output=True,
                timeout=120,
            )
        except OSError:
            continue
        if done.returncode == 0 and not done.stderr:
            return candidate
    pytest.fail(f"no {version} interpreter that user {NOBODY} can run with our packages")


def _needed(interpreter: str) -> list[str]:
    """What a run as ``nobody`` must reach: the interpreter, its library, our packages."""
    real = os.path.realpath(interpreter)
    library = sysconfig.get_paths()["stdlib"]
    return [interpreter, real, library, str(ENTRY), *_pythonpath().split(os.pathsep)]


def give_to_nobody(path: Path) -> None:
    """Make ``path`` and everything below it owned by ``nobody``."""
    os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    for parent, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(parent, name), NOBODY, NOBODY, follow_symlinks=False)


@contextmanager
def nobody_workspace() -> Iterator[Path]:
    """Yield a fresh directory owned by ``nobody``; remove it (as root) afterwards."""
    base = Path(tempfile.mkdtemp(prefix="atlante-nobody-", dir="/tmp"))
    for name in ("tmp", "home"):
        (base / name).mkdir()
    give_to_nobody(base)
    try:
        yield base
    finally:
        kill_marked(base / "tmp")
        remove_tree(base)


def run_cli_as_nobody(args: list[str], base: Path) -> subprocess.CompletedProcess[str]:
    """Run ``standin_cli.py ARGS`` as ``nobody`` with ``TMPDIR`` and ``HOME`` in ``base``."""
    python = nobody_python()
    drop, reveal = drop_to_nobody(_needed(python))
    env = {**cli_env(base / "tmp", HOME=str(base / "home"), PYTHONPATH=_pythonpath()), **reveal}
    return subprocess.run(
        [*drop, python, str(ENTRY), *args],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard, not a speed expectation
        check=False,
    )


def python_as_nobody(code: str, base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -c CODE ARGS`` as ``nobody`` in ``base``, with this environment's packages."""
    python = nobody_python()
    drop, reveal = drop_to_nobody(_needed(python))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": _pythonpath(),
        "HOME": str(base / "home"),
        "TMPDIR": str(base / "tmp"),
        **reveal,
    }
    return subprocess.run(
        [*drop, python, "-c", code, *args],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard, not a speed expectation
        check=False,
    )
