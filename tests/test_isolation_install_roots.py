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
import pytest
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
    assert install_roots(str(link)) == [modules]
    assert executable_inside(str(link)) == str(link)


def test_home_installed_binary_binds_its_directory_not_the_home(tmp_path: Path) -> None:
    """~/.local/bin/claude -> ~/.local/share/claude/versions/X: only versions/ is bound."""
    home = tmp_path / "home"
    real = _script(home / ".local/share/claude/versions/2.1/claude", "#!/bin/sh\necho ran\n")
    (home / ".local/lib/python3.11").mkdir(parents=True)
    link = home / ".local/bin/claude"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert install_roots(str(link)) == [real.parent]
    assert executable_inside(str(link)) == str(real)


def test_virtual_environment_binds_the_venv_and_its_base(tmp_path: Path) -> None:
    """A venv's python: the venv and the installation its own python link resolves to."""
    base = Path(os.path.realpath(sys.base_prefix))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /\n", encoding="utf-8")  # never read
    (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    roots = install_roots(str(venv / "bin" / "python"))
    assert roots[0] == venv
    assert Path("/") not in roots
    if not str(base).startswith("/usr/"):
        assert base in roots
    assert executable_inside(str(venv / "bin" / "python")) == str(venv / "bin" / "python")


def test_programs_in_untrusted_trees_bind_nothing(tmp_path: Path) -> None:
    """A program in the sandbox (or linking out of it) adds no bind, whatever its files say."""
    sandbox = tmp_path / "run" / "trial" / "project"
    tool = sandbox / "tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "pyvenv.cfg").write_text("home = /\n", encoding="utf-8")
    _script(tool / "bin" / "run", "#!/etc/sh\n")
    (tool / "bin" / "python3").symlink_to("/root")
    link = sandbox / "up"
    link.symlink_to(tmp_path / "elsewhere" / "prog")
    _script(tmp_path / "elsewhere" / "prog", "#!/bin/sh\n")
    run_root = tmp_path / "run"
    for program in (tool / "bin" / "run", tool / "bin" / "python3", link):
        assert install_roots(str(program), untrusted=(sandbox,)) == []
    other = run_root / "other-trial" / "project" / "prog"
    _script(other, "#!/bin/sh\n")
    assert install_roots(str(other), untrusted=(sandbox, run_root)) == []
    assert executable_inside(str(link), untrusted=(sandbox,)) == str(link)


def test_no_root_shows_the_run_root_or_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program directly in the home or beside the run root binds nothing."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    in_home = _script(home / "tool", "#!/bin/sh\n")
    beside = _script(tmp_path / "tool", "#!/bin/sh\n")
    run_root = tmp_path / "atlante-eval-x"
    run_root.mkdir()
    assert install_roots(str(in_home)) == []
    assert install_roots(str(beside), untrusted=(run_root,)) == []
    deeper = _script(home / ".local" / "share" / "tool" / "1.0" / "tool", "#!/bin/sh\n")
    assert install_roots(str(deeper), untrusted=(run_root,)) == [deeper.parent]


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
