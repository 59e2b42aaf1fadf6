"""Trial sandboxes: fixture copy and its refusals, native outputs, setup, snapshot, cleanup."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from enginekit import make_scenario, native_outputs

from atlante_eval.project import Scenario
from atlante_eval.trial import (
    Sandbox,
    SandboxError,
    create_run_root,
    file_digest,
    remove_tree,
    trial_dirs,
    trial_sandbox,
)
from atlante_eval.trial import process as process_module
from atlante_eval.trial import sandbox as sandbox_module
from atlante_eval.trial.sandbox import copy_fixture, resolve_fixture, write_native_outputs

PY = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio."""
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root with a fixture ``fix`` and a run root next to it."""
    root = tmp_path / "project"
    fixture = root / "fix"
    (fixture / "src").mkdir(parents=True)
    (fixture / "empty").mkdir()
    (fixture / "README.md").write_text("hello\n")
    (fixture / "src" / "app.py").write_text("print('app')\n")
    (fixture / "run.sh").write_text("#!/bin/sh\n")
    (fixture / "run.sh").chmod(0o755)
    (fixture / ".opencode").mkdir()
    (fixture / ".opencode" / "notes.md").write_text("kept\n")
    (tmp_path / "run").mkdir()
    return root


def _no_host(_root: Path, _state: Path) -> None:
    return None


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


@asynccontextmanager
async def _sandbox(
    project: Path,
    scenario: Scenario,
    trial: int,
    *,
    prepare: Callable[[Path, Path], None] = _no_host,
    keep: bool = False,
) -> AsyncIterator[Sandbox]:
    """Assemble a sandbox under ``<project>/../run``, owned (and removed) as the engine does."""
    async with (
        trial_dirs(keep=keep) as owned,
        trial_sandbox(
            project.parent / "run",
            scenario,
            trial,
            native=native_outputs(),
            prepare_host=prepare,
            owner=owned,
        ) as sandbox,
    ):
        yield sandbox


async def _assemble(
    project: Path,
    scenario: Scenario,
    *,
    prepare: object = _no_host,
    keep: bool = False,
) -> Path:
    """Assemble and leave the sandbox; return the trial directory."""
    async with _sandbox(project, scenario, 0, prepare=prepare, keep=keep) as sandbox:  # type: ignore[arg-type]
        return sandbox.trial_dir


async def _error(project: Path, scenario: Scenario, **kwargs: object) -> str:
    with pytest.raises(SandboxError) as caught:
        await _assemble(project, scenario, **kwargs)  # type: ignore[arg-type]
    return str(caught.value)


@pytest.mark.anyio
async def test_assembly_copies_fixture_and_native_outputs_then_commits(project: Path) -> None:
    """The sandbox holds the fixture (modes, empty dirs), native files and a clean baseline."""
    scenario = make_scenario(
        project, fixture="fix", checks=[{"type": "file-unchanged", "path": "README.md"}]
    )
    async with _sandbox(project, scenario, 2) as sandbox:
        root = sandbox.root
        assert sandbox.trial_dir.parent == project.parent / "run"
        assert sandbox.trial_dir.name.startswith("basic-trial-2-")
        assert stat.S_IMODE(sandbox.trial_dir.stat().st_mode) == 0o700
        assert root == sandbox.trial_dir / "project"
        assert sandbox.state_dir.is_dir()
        assert (root / "README.md").read_text() == "hello\n"
        assert (root / "empty").is_dir()
        assert os.access(root / "run.sh", os.X_OK)
        assert (root / ".opencode" / "notes.md").read_text() == "kept\n"
        assert (root / ".opencode/agents/reviewer.md").read_bytes() == b"You review code.\n"
        assert sandbox.snapshot == {"README.md": hashlib.sha256(b"hello\n").hexdigest()}
        assert _git(root, "status", "--porcelain") == ""
        assert len(sandbox.baseline.commit) == 40
        assert list(sandbox.git_dir.glob("*.pack"))
    assert not sandbox.trial_dir.exists()


@pytest.mark.anyio
async def test_host_files_and_setup_output_are_part_of_the_baseline(project: Path) -> None:
    """prepare_host runs before setup, and both leave files the baseline includes."""
    order: list[str] = []

    def prepare(root: Path, state: Path) -> None:
        order.append("prepare")
        (root / ".host").mkdir()
        (root / ".host" / "config.json").write_text("{}")
        (state / "home").mkdir()

    setup = [PY, "-c", "import os; assert os.path.exists('.host/config.json'); open('gen.txt','w')"]
    scenario = make_scenario(project, fixture="fix", setup=setup)
    async with _sandbox(project, scenario, 0, prepare=prepare) as sandbox:
        files = _git(sandbox.root, "ls-files").split()
        assert ".host/config.json" in files
        assert "gen.txt" in files
        assert (sandbox.state_dir / "home").is_dir()
    assert order == ["prepare"]


@pytest.mark.anyio
async def test_keep_leaves_the_trial_directory(project: Path) -> None:
    """With keep, the trial directory survives the context."""
    trial_dir = await _assemble(project, make_scenario(project, fixture="fix"), keep=True)
    assert (trial_dir / "project" / "README.md").is_file()
    assert (trial_dir / "baseline.git").is_dir()


@pytest.mark.anyio
async def test_a_kept_directory_gets_a_fresh_sibling(project: Path) -> None:
    """Each trial directory gets a fresh random name, even next to a kept one of the same trial."""
    scenario = make_scenario(project, fixture="fix")
    first = await _assemble(project, scenario, keep=True)
    second = await _assemble(project, scenario, keep=True)
    assert first.name.startswith("basic-trial-0-")
    assert second.name.startswith("basic-trial-0-")
    assert first != second


@pytest.mark.anyio
async def test_cleanup_runs_when_the_body_fails_or_is_cancelled(project: Path) -> None:
    """The trial directory is removed after an error and after cancellation."""
    scenario = make_scenario(project, fixture="fix")
    seen: list[Path] = []

    async def failing_body() -> None:
        async with _sandbox(project, scenario, 0) as sandbox:
            seen.append(sandbox.trial_dir)
            raise RuntimeError("body failed")

    with pytest.raises(RuntimeError, match="body failed"):
        await failing_body()
    with anyio.CancelScope() as scope:
        async with _sandbox(project, scenario, 1) as sandbox:
            seen.append(sandbox.trial_dir)
            scope.cancel()
            await anyio.sleep_forever()
    assert len(seen) == 2
    assert not any(path.exists() for path in seen)


@pytest.mark.anyio
async def test_cleanup_removes_read_only_trees_left_by_an_agent(project: Path) -> None:
    """Directories an agent made read-only are still removed."""
    scenario = make_scenario(project, fixture="fix")
    async with _sandbox(project, scenario, 0) as sandbox:
        locked = sandbox.root / "locked" / "deeper"
        locked.mkdir(parents=True)
        (locked / "file").write_text("x")
        locked.chmod(0o500)
        (sandbox.root / "locked").chmod(0o500)
        (sandbox.root / "outside-link").symlink_to(project)
    assert not sandbox.trial_dir.exists()
    assert (project / "fix" / "README.md").is_file()


def test_remove_tree_unlinks_a_symlink_without_following_it(tmp_path: Path) -> None:
    """remove_tree on a symlink removes the link, never the target."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(target)
    remove_tree(link)
    remove_tree(tmp_path / "missing")
    assert not link.exists()
    assert (target / "keep.txt").is_file()


def test_run_root_is_a_fresh_temporary_directory() -> None:
    """create_run_root makes a new atlante-eval-* directory in the temp dir."""
    first, second = create_run_root(), create_run_root()
    try:
        assert first != second
        assert first.name.startswith("atlante-eval-")
        assert first.is_dir()
    finally:
        remove_tree(first)
        remove_tree(second)


@pytest.mark.anyio
async def test_missing_fixture_is_refused(project: Path) -> None:
    """A fixture that does not exist makes assembly fail with a fixture message."""
    message = await _error(project, make_scenario(project, fixture="absent"))
    assert message.startswith("fixture does not exist")


@pytest.mark.anyio
async def test_fixture_that_is_a_file_is_refused(project: Path) -> None:
    """A fixture path naming a file is refused."""
    (project / "file-fixture").write_text("x")
    message = await _error(project, make_scenario(project, fixture="file-fixture"))
    assert message == "fixture is not a directory"


@pytest.mark.anyio
async def test_symlinked_fixture_or_parent_is_refused(project: Path, tmp_path: Path) -> None:
    """A fixture that is, or sits below, a symbolic link is refused."""
    outside = tmp_path / "outside"
    (outside / "app").mkdir(parents=True)
    (project / "linked").symlink_to(outside / "app")
    (project / "via").symlink_to(outside)
    assert await _error(project, make_scenario(project, fixture="linked")) == (
        "fixture path traverses a symbolic link: linked"
    )
    assert await _error(project, make_scenario(project, fixture="via/app")) == (
        "fixture path traverses a symbolic link: via/app"
    )


def test_escaping_fixture_paths_are_refused(project: Path) -> None:
    """Fixture paths with '..' or absolute paths never resolve outside the root."""
    for relative in ("../outside", "a/../../b", "/etc"):
        with pytest.raises(SandboxError, match="fixture must resolve inside the project"):
            resolve_fixture(project, relative)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("symlink", "fixture contains a symbolic link: evil"),
        ("git-dir", "fixture contains a forbidden entry: .git"),
        ("git-file", "fixture contains a forbidden entry: .git"),
        ("node-modules", "fixture contains a forbidden entry: node_modules"),
    ],
)
async def test_unsafe_fixture_entries_are_refused(project: Path, plant: str, message: str) -> None:
    """A symlink, .git (file or directory) or node_modules anywhere in a fixture is refused."""
    deep = project / "fix" / "src"
    if plant == "symlink":
        (deep / "evil").symlink_to("/etc/passwd")
    elif plant == "git-dir":
        (deep / ".git").mkdir()
    elif plant == "git-file":
        (deep / ".git").write_text("gitdir: /elsewhere\n")
    else:
        (deep / "node_modules").mkdir()
    assert await _error(project, make_scenario(project, fixture="fix")) == message


def test_copy_fixture_refuses_a_symlink_root_and_skips_special_files(tmp_path: Path) -> None:
    """copy_fixture refuses a symlinked fixture and silently skips FIFOs."""
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "a.txt").write_text("a")
    os.mkfifo(fixture / "pipe")
    copy_fixture(fixture, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["a.txt"]
    (tmp_path / "link").symlink_to(fixture)
    with pytest.raises(SandboxError, match="fixture must not be a symbolic link"):
        copy_fixture(tmp_path / "link", tmp_path / "copy2")


@pytest.mark.anyio
async def test_fixture_file_at_a_native_path_collides(project: Path) -> None:
    """A fixture file at a verified native output path fails with a rename-or-remove message."""
    agents = project / "fix" / ".opencode" / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text("fixture's own\n")
    message = await _error(project, make_scenario(project, fixture="fix"))
    assert message == (
        "fixture file collides with a verified native output at .opencode/agents/reviewer.md; "
        "rename or remove it in the fixture"
    )


@pytest.mark.anyio
async def test_fixture_file_at_a_native_parent_directory_collides(project: Path) -> None:
    """A fixture file where a native output needs a directory is a collision, not a crash."""
    (project / "fix" / ".opencode" / "agents").write_text("not a directory\n")
    message = await _error(project, make_scenario(project, fixture="fix"))
    assert message.startswith("fixture file collides with a verified native output at")


def test_native_outputs_refuse_a_symlinked_parent(tmp_path: Path) -> None:
    """A native output is never written through a symbolic link."""
    root = tmp_path / "root"
    root.mkdir()
    (root / ".opencode").symlink_to(tmp_path)
    with pytest.raises(SandboxError, match="symbolic link"):
        write_native_outputs(native_outputs(), root)
    assert not (tmp_path / "agents").exists()


@pytest.mark.anyio
async def test_setup_failure_reports_exit_code_and_stderr_tail(project: Path) -> None:
    """A failing setup names its exit status and the last 400 characters of stderr."""
    code = "import sys; sys.stderr.write('x' * 1000 + 'the reason'); sys.exit(3)"
    message = await _error(project, make_scenario(project, fixture="fix", setup=[PY, "-c", code]))
    assert message.startswith("setup failed: exit 3: ")
    assert message.endswith("the reason")
    assert len(message) == len("setup failed: exit 3: ") + 400


@pytest.mark.anyio
async def test_setup_that_cannot_start_or_is_killed_fails(project: Path) -> None:
    """A setup program that is missing, or dies by a signal, fails the assembly."""
    missing = await _error(
        project, make_scenario(project, fixture="fix", setup=["atlante-no-such-setup"])
    )
    assert missing.startswith("setup failed: ")
    assert "atlante-no-such-setup" in missing
    killed = await _error(
        project,
        make_scenario(
            project,
            fixture="fix",
            setup=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        ),
    )
    assert killed == "setup failed: SIGKILL"


@pytest.mark.anyio
async def test_setup_timeout_is_reported_even_if_setup_exits_zero(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setup past its timeout fails as timed out, even when it exits 0 on SIGTERM."""
    monkeypatch.setattr(sandbox_module, "SETUP_TIMEOUT_MS", 300)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 1.0)
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "time.sleep(30)\n"
    )
    message = await _error(project, make_scenario(project, fixture="fix", setup=[PY, "-c", code]))
    assert message == "setup timed out after 300ms"


@pytest.mark.anyio
async def test_setup_inherits_the_full_environment(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Setup runs with the whole parent environment (unlike hosts and checks)."""
    monkeypatch.setenv("ATLANTE_SETUP_ONLY", "visible")
    code = "import os; open('env.txt', 'w').write(os.environ['ATLANTE_SETUP_ONLY'])"
    scenario = make_scenario(project, fixture="fix", setup=[PY, "-c", code])
    async with _sandbox(project, scenario, 0) as sandbox:
        assert (sandbox.root / "env.txt").read_text() == "visible"


@pytest.mark.anyio
async def test_snapshot_is_null_for_missing_directory_and_symlink(project: Path) -> None:
    """file-unchanged snapshots hash regular files only; a setup-planted symlink is null."""
    setup = [PY, "-c", "import os; os.symlink('README.md', 'link.md'); os.mkdir('dir')"]
    checks = [
        {"type": "file-unchanged", "path": "README.md"},
        {"type": "file-unchanged", "path": "absent.txt"},
        {"type": "file-unchanged", "path": "dir"},
        {"type": "file-unchanged", "path": "link.md"},
    ]
    scenario = make_scenario(project, fixture="fix", setup=setup, checks=checks)
    async with _sandbox(project, scenario, 0) as sandbox:
        assert sandbox.snapshot == {
            "README.md": hashlib.sha256(b"hello\n").hexdigest(),
            "absent.txt": None,
            "dir": None,
            "link.md": None,
        }


@pytest.mark.anyio
async def test_host_preparation_error_fails_the_assembly(project: Path) -> None:
    """A SandboxError from host preparation ends assembly and names the trial directory."""

    def prepare(_root: Path, _state: Path) -> None:
        raise SandboxError("fixture provides .mcp.json")

    with pytest.raises(SandboxError, match=r"\.mcp\.json") as caught:
        await _assemble(project, make_scenario(project, fixture="fix"), prepare=prepare)
    assert caught.value.trial_dir is not None
    assert not caught.value.trial_dir.exists()


def test_file_digest_hashes_regular_files_only(tmp_path: Path) -> None:
    """file_digest is the SHA-256 of a regular file and None for missing or directories."""
    (tmp_path / "f").write_bytes(b"abc")
    (tmp_path / "d").mkdir()
    assert file_digest(tmp_path, "f") == hashlib.sha256(b"abc").hexdigest()
    assert file_digest(tmp_path, "missing") is None
    assert file_digest(tmp_path, "d") is None
    assert file_digest(tmp_path, "f/below") is None
