"""Issue 23, item 1: no file the sandbox controls widens what a confined program sees.

Three attacks, each a command check under ``--isolation os``:

* the pack's fixture ships ``tool/pyvenv.cfg`` with ``home = /`` and a check runs
  ``tool/bin/run``, a script that prints files outside the sandbox;
* the pack's fixture ships a script whose ``#!`` line names a program in a
  directory outside (a ``~/.local/bin``), which prints a token kept beside it;
* the agent rewrites the fixture's ``.venv/pyvenv.cfg`` (``home = /``) and
  ``.venv/bin/pytest`` during its session; the check runs ``.venv/bin/pytest``.

Against the weakened engine (:mod:`weakened_isolation`, ``binds``: the bind
decision reads those files) every attack prints the canaries (a file in the
user's home, the project's ``.env``, as root the first line of ``/etc/shadow``)
into the report; against the engine as it is, none does. Run as root
in-process and as ``nobody`` through the CLI. The legitimate uses keep working: a
check runs ``.venv/bin/pytest`` from a virtual environment setup made in the
sandbox.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import weakened_isolation
from factory import make_project, scenario
from isolationkit import NO_CGROUP_LIMITS, require_bwrap
from standin import StandinHost, actions
from unprivileged import give_to_nobody, nobody_workspace, run_cli_as_nobody

from atlante_eval import RunReport, run_eval

CAT = '#!/bin/sh\nfor f in "$@"; do echo "== $f"; head -n 1 "$f" 2>&1; done\nexit 0\n'
HELPER = '#!/bin/sh\ncat "$(dirname "$0")/token.txt"\n'
SHADOW = re.compile(r"== /etc/shadow\\n[^=\\]*?root:")


@dataclass(frozen=True)
class Canaries:
    """What lives outside the sandbox, and the project that tries to read it."""

    project: Path
    secret: Path
    dotenv: Path
    token: str

    def texts(self) -> dict[str, str]:
        """Canary name -> the text that shows it was read."""
        return {
            "home": self.secret.read_text(encoding="utf-8").strip(),
            "dotenv": self.dotenv.read_text(encoding="utf-8").strip(),
            "helper": self.token,
        }


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def build(base: Path) -> Canaries:
    """The canaries under ``base`` (a home, a project) and the attacking project."""
    home = base / "home"
    secret = home / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text(f"HOME-SECRET-{uuid.uuid4().hex}\n", encoding="utf-8")
    secret.chmod(0o600)
    token = f"HELPER-TOKEN-{uuid.uuid4().hex}"
    helper = home / ".local" / "bin" / "helper"
    _executable(helper, HELPER)
    (helper.parent / "token.txt").write_text(token + "\n", encoding="utf-8")
    project = base / "project"
    targets = [str(secret), str(project / ".env"), "/etc/shadow"]
    make_project(
        project,
        scenarios=[
            scenario(
                "pack-pyvenv",
                prompt=actions(),
                checks=[{"type": "command", "run": ["tool/bin/run", *targets]}],
            ),
            scenario(
                "pack-shebang",
                prompt=actions(),
                checks=[{"type": "command", "run": ["shebang/run"]}],
            ),
            scenario(
                "agent-pyvenv",
                prompt=actions(
                    {"write": ".venv/pyvenv.cfg", "content": "home = /\n"},
                    {"write": ".venv/bin/pytest", "content": CAT},
                ),
                checks=[{"type": "command", "run": [".venv/bin/pytest", *targets]}],
            ),
        ],
        fixtures={
            "eval/fixtures/app": {
                "README.md": "hello\n",
                "tool/pyvenv.cfg": "home = /\n",
                "tool/bin/run": CAT,
                "shebang/run": f"#!{helper}\n",
                ".venv/pyvenv.cfg": "home = /usr/bin\n",
                ".venv/bin/pytest": "#!/bin/sh\necho tests passed\n",
            }
        },
    )
    fixture = project / "eval" / "fixtures" / "app"
    for script in ("tool/bin/run", "shebang/run", ".venv/bin/pytest"):
        (fixture / script).chmod(0o755)
    dotenv = project / ".env"
    dotenv.write_text(f"API_TOKEN=DOTENV-{uuid.uuid4().hex}\n", encoding="utf-8")
    return Canaries(project=project, secret=secret, dotenv=dotenv, token=token)


def breaches(report: RunReport, canaries: Canaries) -> dict[str, set[str]]:
    """Per scenario, the canaries its check's output shows."""
    found: dict[str, set[str]] = {}
    for name, result in report.scenarios.items():
        output = "".join(str(c.evidence.get("output", "")) for c in result.trials[0].checks or [])
        seen = {key for key, text in canaries.texts().items() if text in output}
        if SHADOW.search(output.replace("\n", "\\n")):
            seen.add("shadow")
        found[name] = seen
    return found


def _run(project: Path) -> RunReport:
    return anyio.run(
        lambda: run_eval(project, host=StandinHost(), isolation="os", trials=1, jobs=3)
    )


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_sandbox_files_never_widen_the_view_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """Weakened: each attack prints its canaries (and /etc/shadow); defended: none."""
    require_bwrap()
    canaries = build(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(canaries.project)
    if weakened:
        weakened_isolation.apply(["binds"], monkeypatch.setattr)
    report = _run(canaries.project)
    found = breaches(report, canaries)
    if weakened:
        assert found == {
            "pack-pyvenv": {"home", "dotenv", "shadow"},
            "pack-shebang": {"helper"},
            "agent-pyvenv": {"home", "dotenv", "shadow"},
        }
        return
    assert found == {"pack-pyvenv": set(), "pack-shebang": set(), "agent-pyvenv": set()}
    text = report.to_json()
    for secret in canaries.texts().values():
        assert secret not in text
    outputs = {n: str(r.trials[0].checks or "") for n, r in report.scenarios.items()}
    assert "No such file" in outputs["pack-pyvenv"], outputs  # the canaries do not exist inside
    assert "not found" in outputs["pack-shebang"] or "No such file" in outputs["pack-shebang"]


@pytest.mark.parametrize("weakened", [True, False], ids=["weakened", "defended"])
def test_sandbox_files_never_widen_the_view_as_nobody(
    monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """The same attacks as an unprivileged user: weakened shows nobody's own files; defended not."""
    require_bwrap()
    with nobody_workspace() as base:
        canaries = build(base)
        give_to_nobody(base)
        if weakened:
            monkeypatch.setenv("ATLANTE_TEST_WEAKEN", "binds")
        done = run_cli_as_nobody(
            [
                "run",
                str(canaries.project),
                "--isolation",
                "os",
                "--trials",
                "1",
                "--no-history",
                *NO_CGROUP_LIMITS,
            ],
            base,
        )
        reports = sorted((canaries.project / ".atlante" / "eval").glob("*/report.json"))
        assert len(reports) == 1, done.stdout + done.stderr
        report = RunReport.model_validate_json(reports[0].read_text(encoding="utf-8"))
        found = breaches(report, canaries)
    if weakened:
        assert found == {
            "pack-pyvenv": {"home", "dotenv"},
            "pack-shebang": {"helper"},
            "agent-pyvenv": {"home", "dotenv"},
        }
        return
    assert found == {"pack-pyvenv": set(), "pack-shebang": set(), "agent-pyvenv": set()}


def test_a_virtual_environment_made_in_the_sandbox_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """setup makes .venv with the PATH's python; a check runs .venv/bin/pytest from it.

    The PATH starts with this test's virtual environment (as when it is activated),
    whose base Python is bound because the PATH finds it, not because any file in
    the sandbox names it.
    """
    require_bwrap()
    venv_bin = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}")
    make_venv = (  # the PATH's python by its absolute name: /usr/bin/python3 would do too
        f"{sys.executable} -m venv --without-pip .venv && "
        'printf "#!%s/.venv/bin/python\\nimport sys\\nprint(\\"venv ok\\", sys.prefix)\\n" "$PWD"'
        " > .venv/bin/pytest && chmod +x .venv/bin/pytest"
    )
    project = make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "venv",
                prompt=actions({"write": "hello.txt", "content": "hi\n"}),
                setup=["sh", "-c", make_venv],
                checks=[
                    {
                        "type": "command",
                        "run": [".venv/bin/pytest"],
                        "outputMatches": "venv ok .*/project/\\.venv",
                    }
                ],
            )
        ],
    )
    monkeypatch.chdir(project)
    report = _run(project)
    trial = report.scenarios["venv"].trials[0]
    evidence: dict[str, Any] = trial.checks[0].evidence if trial.checks else {}
    assert trial.verdict == "pass", (trial.error, evidence)
