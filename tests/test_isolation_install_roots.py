"""The host executable's install directory is visible read-only inside; the rest is not.

Real layouts made in ``tmp_path``: a ``node_modules/.bin`` link (the npm install
of the host CLIs), a binary installed under a home directory behind a
``~/.local/bin`` link (Claude Code's native installer), and a Python virtual
environment. The program must run inside, and the credentials beside it must not
be visible.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from isolationkit import require_bwrap

from atlante_eval.isolation.bwrap import Confinement, executable_inside, install_roots
from atlante_eval.isolation.preflight import require_os_isolation
from atlante_eval.trial import run_process

ENV = {"PATH": "/usr/bin:/bin"}


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def test_node_modules_program_binds_the_outermost_node_modules(tmp_path: Path) -> None:
    """A .bin link into a package: the whole node_modules (platform siblings too)."""
    modules = tmp_path / "cache" / "node_modules"
    _script(modules / "tool" / "bin" / "tool.js", "#!/bin/sh\necho tool\n")
    link = modules / ".bin" / "tool"
    link.parent.mkdir(parents=True)
    link.symlink_to("../tool/bin/tool.js")
    assert install_roots(str(link), ENV) == [modules]
    assert executable_inside(str(link)) == str(link)


def test_home_installed_binary_binds_its_directory_not_the_home(tmp_path: Path) -> None:
    """~/.local/bin/claude -> ~/.local/share/claude/versions/X: only versions/ is bound."""
    home = tmp_path / "home"
    real = _script(home / ".local/share/claude/versions/2.1/claude", "#!/bin/sh\necho ran\n")
    (home / ".local/lib/python3.11").mkdir(parents=True)
    link = home / ".local/bin/claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert install_roots(str(link), ENV) == [real.parent]
    assert executable_inside(str(link)) == str(real)


def test_virtual_environment_binds_the_venv_and_its_base(tmp_path: Path) -> None:
    """A venv's python: the venv and the base installation named in pyvenv.cfg."""
    base = Path(os.path.realpath(sys.base_prefix))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n", encoding="utf-8")
    (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    roots = install_roots(str(venv / "bin" / "python"), ENV)
    assert roots[0] == venv
    if not str(base).startswith("/usr/"):
        assert base in roots
    assert executable_inside(str(venv / "bin" / "python")) == str(venv / "bin" / "python")


def test_home_installed_program_runs_and_sees_nothing_else_of_home(tmp_path: Path) -> None:
    """The program starts inside; the credentials next to it in the home do not exist."""
    require_bwrap()
    home = tmp_path / "home"
    secret = home / ".local/share/opencode/auth.json"
    secret.parent.mkdir(parents=True)
    secret.write_text('{"key": "sk-secret"}', encoding="utf-8")
    real = _script(
        home / ".local/share/claude/versions/2.1/claude",
        f"#!/bin/sh\necho ran\ncat {secret} 2>&1\nexit 0\n",
    )
    link = home / ".local/bin/claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    confine = Confinement(bwrap=require_os_isolation(), state_dir=sandbox, writable=(sandbox,))
    result = anyio.run(lambda: run_process([str(link)], cwd=sandbox, env=dict(ENV), wrap=confine))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ran"
    assert "No such file or directory" in lines[1]
    assert "sk-secret" not in result.stdout
