"""Development sessions: lint, typecheck, tests, realhost, bench, docs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
# The tests session runs on every supported Python this machine has, and skips the
# others (.ci/run is where a missing interpreter is an error).
nox.options.error_on_missing_interpreters = False
nox.options.download_python = "never"

#: Lint, types, docs and benchmarks run on the oldest supported Python.
PYTHON = ["3.11"]
#: Every Python version ``requires-python`` supports; the tests session runs on each found.
SUPPORTED = ["3.11", "3.12", "3.13"]


def _runs(executable: str) -> bool:
    """Whether ``executable`` starts (a pyenv shim for an inactive version does not)."""
    try:
        done = subprocess.run(
            [executable, "-c", "pass"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _pyenv_python(version: str) -> str | None:
    """``python<version>`` of a pyenv-installed interpreter, active or not."""
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    found = subprocess.run(
        [pyenv, "which", f"python{version}"], capture_output=True, text=True, check=False
    )
    if found.returncode == 0 and _runs(found.stdout.strip()):
        return found.stdout.strip()
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
    versions = Path(root.stdout.strip()) / "versions"
    for candidate in sorted(versions.glob(f"{version}*/bin/python{version}"), reverse=True):
        if _runs(str(candidate)):
            return str(candidate)
    return None


def _expose_interpreters() -> None:
    """Put pyenv interpreters nox cannot see (inactive versions) at the end of PATH."""
    extra = []
    for version in SUPPORTED:
        on_path = shutil.which(f"python{version}")
        if on_path is not None and _runs(on_path):
            continue
        found = _pyenv_python(version)
        if found is not None:
            extra.append(str(Path(found).parent))
    if extra:
        os.environ["PATH"] = os.pathsep.join([os.environ.get("PATH", ""), *extra])


_expose_interpreters()


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check formatting and lint rules with ruff, and the layer contract with import-linter."""
    session.install("ruff>=0.6", "import-linter>=2.13", "-e", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy --strict."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python=SUPPORTED)
def tests(session: nox.Session) -> None:
    """Run the test suite (real-host tests included when the host CLIs are available)."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def realhost(session: nox.Session) -> None:
    """Run only the tests that drive the real claude and opencode CLIs."""
    session.install("-e", ".[dev]")
    session.run(
        "pytest", "-m", "realhost", *session.posargs, env={"ATLANTE_EVAL_REQUIRE_REAL_HOSTS": "1"}
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks in bench/ and print ratios measured in one run."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "bench", *session.posargs)


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Check that the docs are current: generated tables and links."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "tools.docs_check")
