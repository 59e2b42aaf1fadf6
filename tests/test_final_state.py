"""A trial's stored final state rebuilds exactly the sandbox the agent left, and nothing else.

Trials run through the whole engine with the stand-in host (``--keep`` keeps the
real sandbox to compare with); the rebuilt sandbox must hold the same entries:
text and binary contents, deletions, permission bits, symbolic links, empty
directories and the agent's git commits. Stored data is untrusted: a damaged
content, a changed manifest or a path through a planted link is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import RunReport, TrialResult, run_eval
from atlante_eval.project import load_suite
from atlante_eval.report import RunFiles
from atlante_eval.report.blobstore import BlobError, BlobStore
from atlante_eval.report.final_state import FinalState, ManifestError, StateEntry
from atlante_eval.report.state_files import read_final_state, state_blobs
from atlante_eval.trial import rebuild, trial_dirs
from atlante_eval.trial.kept import defuse_repositories
from atlante_eval.trial.rebuild import RebuildError, apply_entries, rebuilt_sandbox

BINARY = bytes(range(256)) * 8 + b"\0\xff\xfe"
WRITE_BINARY = (
    f"import pathlib; p = pathlib.Path('bin/data.bin'); p.parent.mkdir(); p.write_bytes({BINARY!r})"
)
SETUP = (
    "import os, pathlib; pathlib.Path('gen').mkdir(); "
    "pathlib.Path('gen/out.txt').write_text('made by setup'); "
    "pathlib.Path('README.md').write_text('rewritten by setup'); os.chmod('tool.sh', 0o700)"
)
GIT = ["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com"]
AGENT = actions(
    {"write": "src/new.txt", "content": "a new file\n"},
    {"run": [sys.executable, "-c", WRITE_BINARY]},
    {"delete": "README.md"},
    {"delete": "docs"},
    {"symlink": "link-in", "target": "src/new.txt"},
    {"symlink": "link-out", "target": "/etc/hostname"},
    {"symlink": "dangling", "target": "no/such/file"},
    {"chmod": "tool.sh", "mode": 0o755},
    {"chmod": "keep.txt", "mode": 0o600},
    {"mkdir": "empty/inner"},
    {"delete": "swap"},
    {"write": "swap/inside.txt", "content": "a directory now"},
    {"write": "ünïcode name.txt", "content": "ok"},
    {"run": [*GIT, "add", "-A"]},
    {"run": [*GIT, "commit", "-q", "-m", "agent work"]},
    {"write": "after-commit.txt", "content": "uncommitted"},
)
FIXTURE = {
    "README.md": "hello\n",
    "tool.sh": "#!/bin/sh\necho tool\n",
    "keep.txt": "unchanged content\n",
    "swap": "a file first\n",
    "docs/a.md": "doc a\n",
    "docs/deep/b.md": "doc b\n",
}


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry below ``root`` (``.git`` included): type, permission bits, content or target.

    Walked with an explicit stack (``os.walk`` recurses on Python 3.11).
    """
    found: dict[str, tuple[Any, ...]] = {}
    pending = [""]
    while pending:
        relative_dir = pending.pop()
        with os.scandir(root / relative_dir if relative_dir else root) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            relative = f"{relative_dir}/{name}" if relative_dir else name
            path = root / relative
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", str(path.readlink()))
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode))
                pending.append(relative)
            else:
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


def _project(tmp_path: Path, prompt: str = AGENT, **task: Any) -> Path:
    doc = scenario(
        "work",
        prompt=prompt,
        checks=[{"type": "file-exists", "path": "src/new.txt"}],
        **task,
    )
    project = make_project(tmp_path / "p", scenarios=[doc], fixtures={"eval/fixtures/app": FIXTURE})
    (project / "eval/fixtures/app/tool.sh").chmod(0o644)
    return project


def _run(project: Path, **options: Any) -> tuple[RunReport, TrialResult, Path]:
    report = anyio.run(lambda: run_eval(project, host=StandinHost(), trials=1, jobs=1, **options))
    [trial] = report.scenarios["work"].trials
    return report, trial, project / ".atlante" / "eval" / report.run_id


def _state(run_dir: Path, trial: TrialResult) -> FinalState:
    assert trial.final_state is not None
    with contextlib.closing(RunFiles.open_existing(run_dir)) as run:
        return read_final_state(run, trial.final_state)


@contextlib.contextmanager
def _store(run_dir: Path) -> Iterator[BlobStore]:
    with contextlib.closing(RunFiles.open_existing(run_dir)) as run:
        store = BlobStore.open(run, create=False)
        assert store is not None
        with store:
            yield store


def _rebuilt(project: Path, run_dir: Path, state: FinalState, into: Path) -> dict[str, Any]:
    """Rebuild the trial's sandbox (as ``regrade`` does) and return its tree."""
    suite = load_suite(project)
    [work] = suite.scenarios
    native = suite.native
    assert native is not None
    into.mkdir()

    async def build() -> dict[str, Any]:
        with _store(run_dir) as store:
            async with (
                trial_dirs(keep=False) as owned,
                rebuilt_sandbox(
                    into, work, state, native=native, store=store, owner=owned
                ) as sandbox,
            ):
                git_log = (
                    await anyio.run_process(["git", "log", "--format=%s"], cwd=sandbox.root)
                ).stdout.decode()
                # A kept sandbox is defused before it is handed over (trial/kept.py: neutral
                # git config, empty hooks); the rebuild is compared defused alike.
                defuse_repositories(sandbox.root)
                return {"tree": tree(sandbox.root), "log": git_log}

    return anyio.run(build)


def test_the_rebuilt_sandbox_is_the_one_the_agent_left(tmp_path: Path) -> None:
    """Binary files, deletions, modes, links, empty dirs, a type change and commits round-trip."""
    project = _project(tmp_path, setup=[sys.executable, "-c", SETUP])
    _report, trial, run_dir = _run(project, keep=True)
    assert trial.verdict == "pass", trial.error
    assert trial.final_state is not None
    assert trial.final_state.complete
    assert trial.sandbox is not None
    kept = tree(Path(trial.sandbox) / "project")
    # what the test relies on really happened in the trial
    assert kept["bin/data.bin"] == ("file", 0o644, BINARY)
    assert kept["link-out"] == ("link", "/etc/hostname")
    assert kept["keep.txt"][1] == 0o600
    assert kept["tool.sh"][1] == 0o755
    assert kept["gen/out.txt"][2] == b"made by setup"
    assert "README.md" not in kept
    assert "docs" not in kept
    assert kept["empty/inner"][0] == "dir"
    state = _state(run_dir, trial)
    assert [e.path for e in state.modes] == ["keep.txt", "tool.sh"]  # chmods, same content
    assert "gen/out.txt" in {e.path for e in state.prepared}
    rebuilt = _rebuilt(project, run_dir, state, tmp_path / "rebuild")
    assert rebuilt["tree"] == kept
    assert rebuilt["log"].splitlines() == ["agent work", "atlante-eval baseline"]


def test_setup_is_not_run_again_to_rebuild(tmp_path: Path) -> None:
    """What setup made comes from the stored state: a setup that now fails changes nothing."""
    marker = tmp_path / "setup-ran"
    setup = [sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x'); " + SETUP]
    project = _project(tmp_path, setup=setup)
    _report, trial, run_dir = _run(project, keep=True)
    assert marker.read_text() == "x"
    assert trial.sandbox is not None
    kept = tree(Path(trial.sandbox) / "project")
    rebuilt = _rebuilt(project, run_dir, _state(run_dir, trial), tmp_path / "rebuild")
    assert marker.read_text() == "x"  # not run again
    assert rebuilt["tree"] == kept


def test_a_state_over_the_cap_says_what_it_left_out(tmp_path: Path) -> None:
    """Contents beyond the cap are not stored; the state is incomplete and names them."""
    project = _project(tmp_path)
    _report, trial, run_dir = _run(project, final_state_cap=600)
    ref = trial.final_state
    assert ref is not None
    assert not ref.complete
    assert ref.omitted is not None
    assert ref.omitted > 0
    assert "over the final-state cap of 600 bytes" in (ref.reason or "")
    state = _state(run_dir, trial)
    assert state.bytes <= 600
    assert not state.complete
    assert state.omitted_count == ref.omitted


def test_a_fifo_is_not_stored_and_makes_the_state_incomplete(tmp_path: Path) -> None:
    """A special file cannot be stored: the trial says it cannot be regraded."""
    prompt = actions(
        {"write": "src/new.txt", "content": "x"},
        {"run": [sys.executable, "-c", "import os; os.mkfifo('pipe')"]},
    )
    project = _project(tmp_path, prompt=prompt)
    _report, trial, _run_dir = _run(project)
    assert trial.final_state is not None
    assert not trial.final_state.complete
    assert trial.final_state.reason == "pipe: a FIFO, socket or device (not stored)"


def test_contents_are_shared_across_trials_and_compressed(tmp_path: Path) -> None:
    """Two trials writing the same large text store it once, smaller than it is."""
    text = "the same line of text, again and again\n" * 5000
    prompt = actions({"write": "src/new.txt", "content": text})
    project = _project(tmp_path, prompt=prompt)
    report = anyio.run(lambda: run_eval(project, host=StandinHost(), trials=2, jobs=1))
    first, second = report.scenarios["work"].trials
    assert first.final_state is not None
    assert second.final_state is not None
    run_dir = project / ".atlante" / "eval" / report.run_id
    blob = next(
        e.blob for e in _state(run_dir, first).changes if e.path == "src/new.txt" and e.blob
    )
    stored = run_dir / "final-state" / "objects" / blob[:2] / blob[2:]
    assert stored.stat().st_size < len(text) // 10
    assert blob in state_blobs(_state(run_dir, second))
    assert first.final_state.stored_bytes > second.final_state.stored_bytes


def test_no_final_state_stores_nothing(tmp_path: Path) -> None:
    """``final_state=False`` (``--no-final-state``): no manifest, no store."""
    project = _project(tmp_path)
    _report, trial, run_dir = _run(project, final_state=False)
    assert trial.final_state is None
    assert not (run_dir / "final-state").exists()
    assert not (run_dir / "trials" / "work" / "0" / "final-state.json").exists()


def test_a_damaged_content_is_refused(tmp_path: Path) -> None:
    """A stored content edited after the run does not hash to its name: the rebuild fails."""
    project = _project(tmp_path)
    _report, trial, run_dir = _run(project)
    state = _state(run_dir, trial)
    entry = next(e for e in state.changes if e.path == "src/new.txt")
    assert entry.blob is not None
    stored = run_dir / "final-state" / "objects" / entry.blob[:2] / entry.blob[2:]
    stored.chmod(0o644)
    stored.write_bytes(b"r" + b"a forged file\n")
    with pytest.raises(RebuildError, match="damaged"):
        _rebuilt(project, run_dir, state, tmp_path / "rebuild")
    with _store(run_dir) as store, pytest.raises(BlobError, match="damaged"):
        store.read(entry.blob, size=entry.size or 0)


def test_a_changed_manifest_is_refused(tmp_path: Path) -> None:
    """The report's digest of the manifest pins it: an edited manifest is not read."""
    project = _project(tmp_path)
    _report, trial, run_dir = _run(project)
    manifest = run_dir / "trials" / "work" / "0" / "final-state.json"
    document = json.loads(manifest.read_text())
    document["changes"] = []
    manifest.write_text(json.dumps(document))
    with pytest.raises(ManifestError, match="changed since the run"):
        _state(run_dir, trial)


def test_a_changed_fixture_does_not_rebuild_the_trials_baseline(tmp_path: Path) -> None:
    """The rebuilt baseline must hash to the trial's: a file added to the fixture is refused.

    (``regrade`` refuses any fixture change before rebuilding, by the fixture's digest;
    this is the second guard, on the rebuilt tree itself.)
    """
    project = _project(tmp_path)
    _report, trial, run_dir = _run(project)
    (project / "eval/fixtures/app/added.txt").write_text("added after the run\n")
    with pytest.raises(RebuildError, match="rebuilt baseline differs"):
        _rebuilt(project, run_dir, _state(run_dir, trial), tmp_path / "rebuild")


def test_a_path_that_climbs_out_is_refused(tmp_path: Path) -> None:
    """A stored path with ``..`` is never written."""
    root = tmp_path / "root"
    root.mkdir()
    climbing = StateEntry(path="../outside.txt", kind="symlink", target="x")
    with pytest.raises(RebuildError, match="unsafe path"):
        apply_entries(root, [climbing], None)
    assert not (tmp_path / "outside.txt").exists()


def test_a_planted_link_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored link ``a -> outside`` then a file ``a/x``: ``x`` lands in the sandbox.

    With links followed (the defence removed), the same entries write outside:
    the test sees the breach it guards against.
    """
    outside = tmp_path / "outside"
    outside.mkdir()
    link = StateEntry(path="a", kind="symlink", target=str(outside))
    directory = StateEntry(path="a", kind="dir", mode=0o755)
    inner = StateEntry(path="a/x", kind="dir", mode=0o755)

    def build(root: Path) -> None:
        root.mkdir()
        apply_entries(root, [link], None)
        apply_entries(root, [directory, inner], None)

    build(tmp_path / "safe")
    assert not (outside / "x").exists()
    assert (tmp_path / "safe" / "a" / "x").is_dir()
    monkeypatch.setattr(rebuild, "_DIR_FLAGS", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    build(tmp_path / "weakened")
    assert (outside / "x").is_dir()


def test_a_tree_deeper_than_the_recursion_limit_round_trips(tmp_path: Path) -> None:
    """1,500 nested directories (beyond Python's recursion limit and the descriptor limit)."""
    nest = (
        "import os\n"
        "for _ in range(1500):\n"
        "    os.mkdir('d')\n"
        "    os.chdir('d')\n"
        "open('deep.txt', 'w').write('deep')\n"
    )
    project = _project(tmp_path, prompt=actions({"run": [sys.executable, "-c", nest]}))
    _report, trial, run_dir = _run(project, keep=True)
    assert trial.final_state is not None
    assert trial.final_state.complete, trial.final_state.reason
    assert trial.sandbox is not None
    state = _state(run_dir, trial)
    assert [e.path for e in state.changes] == ["d/" * 1500 + "deep.txt"]
    kept = tree(Path(trial.sandbox) / "project")
    assert _rebuilt(project, run_dir, state, tmp_path / "rebuild")["tree"] == kept
