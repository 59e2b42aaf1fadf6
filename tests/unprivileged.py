"""Run the stand-in CLI as the unprivileged user ``nobody``, in a workspace it owns.

Attacks that rely on permissions (``chmod 000``, read-only directories) do nothing
to root, so these tests drop privileges for the whole CLI run with ``setpriv``
instead of skipping because CI runs as root. The workspace lives directly under
``/tmp`` (pytest's own temporary directories are private to root). The test's
interpreter may live where ``nobody`` cannot go (``/root/.pyenv``), so
:func:`nobody_python` finds an interpreter of the same version that ``nobody``
can run, with this environment's packages on ``PYTHONPATH``.
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

from atlante_eval.fstree import remove_tree

NOBODY = 65534
DROP = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


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
        try:
            done = subprocess.run(
                [*DROP, candidate, "-c", probe], env=env, capture_output=True, timeout=120
            )
        except OSError:
            continue
        if done.returncode == 0 and not done.stderr:
            return candidate
    pytest.fail(f"no {version} interpreter that user {NOBODY} can run with our packages")


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
    env = cli_env(base / "tmp", HOME=str(base / "home"), PYTHONPATH=_pythonpath())
    return subprocess.run(
        [*DROP, nobody_python(), str(ENTRY), *args],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard, not a speed expectation
        check=False,
    )
