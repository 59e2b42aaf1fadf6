"""Development sessions: lint, typecheck, tests, realhost, bench, docs."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True

PYTHON = ["3.11"]


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check formatting and lint rules with ruff."""
    session.install("ruff>=0.6")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the package with mypy --strict."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python=PYTHON)
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
