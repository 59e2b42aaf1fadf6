"""Symlink races: fixtures, native outputs and the report path changed while a run uses them.

Anything the project holds can change between validation and use (an agent of a
concurrent trial has ordinary access to it). A fixture entry, a native-output
parent or a report directory swapped for a symbolic link at the wrong moment must
be refused, never followed: nothing is read from or written to its target.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from enginekit import InstantHost, native_outputs
from factory import make_project, scenario

from atlante_eval import EvalRunError, ProgressEvent, RunStarted, TrialStarted, run_eval
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.trial import SandboxError
from atlante_eval.trial.sandbox import copy_fixture, write_native_outputs


@pytest.fixture
def anyio_backend() -> str:
    """Run these tests on asyncio."""
    return "asyncio"


@contextmanager
def racing(swap: Callable[[], None], restore: Callable[[], None]) -> Iterator[None]:
    """Run ``swap``/``restore`` in a tight loop on a thread for the duration of the block."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            swap()
            time.sleep(0.0001)
            restore()
            time.sleep(0.0001)

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_fixture_directory_swapped_during_the_copy_is_never_followed(tmp_path: Path) -> None:
    """A fixture directory toggled with a symlink to a secret mid-copy never leaks the secret."""
    fixture = tmp_path / "fixture"
    (fixture / "sub").mkdir(parents=True)
    for n in range(20):
        (fixture / f"f{n}.txt").write_text("x")
    (fixture / "sub" / "a.txt").write_text("a")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "stolen.txt").write_text("secret")

    def swap() -> None:
        os.rename(fixture / "sub", fixture / "sub.real")
        os.symlink(secret, fixture / "sub")

    def restore() -> None:
        os.unlink(fixture / "sub")
        os.rename(fixture / "sub.real", fixture / "sub")

    outcomes = {"copied": 0, "refused": 0}
    with racing(swap, restore):
        for n in range(200):
            copy = tmp_path / f"copy-{n}"
            try:
                copy_fixture(fixture, copy)
                outcomes["copied"] += 1
            except SandboxError:
                outcomes["refused"] += 1
            assert not (copy / "sub" / "stolen.txt").exists()
            shutil.rmtree(copy, ignore_errors=True)
    assert outcomes["copied"] + outcomes["refused"] == 200


def test_native_output_parent_swapped_while_writing_is_never_followed(tmp_path: Path) -> None:
    """A native-output parent toggled with a symlink never lets a file land outside the root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    native = native_outputs(
        {f".opencode/agents/a{n}.md": b"agent\n" for n in range(10)}
        | {".opencode/skills/s/SKILL.md": b"skill\n"}
    )
    for n in range(150):
        root = tmp_path / f"root-{n}"
        root.mkdir()

        def swap(root: Path = root) -> None:
            parent = root / ".opencode"
            if parent.is_dir() and not parent.is_symlink():
                with suppress(OSError):
                    parent.rename(root / f".moved-{time.monotonic_ns()}")
            with suppress(FileExistsError):
                parent.symlink_to(outside)

        def restore(root: Path = root) -> None:
            if (root / ".opencode").is_symlink():
                (root / ".opencode").unlink()

        # Refused, or written in time: never outside.
        with racing(swap, restore), suppress(SandboxError):
            write_native_outputs(native, root)
        assert list(outside.iterdir()) == [], f"written outside in round {n}"


# -- through a run -------------------------------------------------------------------------


def _project(tmp_path: Path, **eval_extra: Any) -> Path:
    return make_project(
        tmp_path / "project",
        scenarios=[scenario("swapped")],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n"}},
        eval_extra={"budget": {"trials": 2}, **eval_extra},
    )


async def _run(project: Path, on_event: Callable[[ProgressEvent], None], **kwargs: Any) -> Any:
    return await run_eval(project, host=InstantHost(), jobs=1, on_event=on_event, **kwargs)


@pytest.mark.anyio
@pytest.mark.parametrize("what", ["entry", "fixture", "fixture-parent"])
async def test_fixture_swapped_after_validation_is_refused(tmp_path: Path, what: str) -> None:
    """A fixture entry or path component made a symlink after validation fails only that trial."""
    project = _project(tmp_path)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "README.md").write_text("stolen\n")
    fixture = project / "eval" / "fixtures" / "app"

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, TrialStarted) and event.trial == 1:
            if what == "entry":
                (fixture / "README.md").unlink()
                (fixture / "README.md").symlink_to(secret / "README.md")
            elif what == "fixture":
                fixture.rename(fixture.with_name("app.real"))
                fixture.symlink_to(secret)
            else:
                fixtures = fixture.parent
                fixtures.rename(fixtures.with_name("fixtures.real"))
                fixtures.with_name("fixtures.other").mkdir()
                shutil.copytree(secret, fixtures.with_name("fixtures.other") / "app")
                fixtures.symlink_to(fixtures.with_name("fixtures.other"))

    report = await _run(project, on_event)
    first, second = report.scenarios["swapped"].trials
    assert first.verdict == "pass"
    assert second.verdict == "infra-error"
    # The project check before assembly sees the change first; assembly would refuse the link.
    assert "the project was modified during the run" in (second.error or "")
    assert report.meta.project_modified


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["default", "out"])
async def test_report_directory_swapped_during_the_run_is_refused(
    tmp_path: Path, where: str
) -> None:
    """A report base swapped for a symlink after reservation: publication is refused."""
    project = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    base = project / ".atlante" / "eval" if where == "default" else tmp_path / "reports"
    extra = {"out": base} if where == "out" else {}

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            (elsewhere / event.run_id).mkdir(parents=True)
            base.rename(base.with_name(base.name + ".moved"))
            base.symlink_to(elsewhere)

    with pytest.raises(DiagnosticError) as caught:
        await _run(project, on_event, **extra)
    assert not isinstance(caught.value, EvalRunError)
    assert caught.value.exit_code == 3
    assert caught.value.diagnostics[0].code == "eval-report-failed"
    assert [p.name for p in elsewhere.rglob("*") if p.is_file()] == []


@pytest.mark.anyio
async def test_run_directory_replaced_during_the_run_is_refused(tmp_path: Path) -> None:
    """A run directory replaced by another directory of the same name is not written to."""
    project = _project(tmp_path)

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            run_dir = project / ".atlante" / "eval" / event.run_id
            run_dir.rename(run_dir.with_name("moved"))
            run_dir.mkdir()

    with pytest.raises(DiagnosticError) as caught:
        await _run(project, on_event)
    assert caught.value.diagnostics[0].code == "eval-report-failed"
    assert not list((project / ".atlante" / "eval").glob("*/report.json"))


@pytest.mark.anyio
async def test_report_file_planted_as_a_symlink_is_never_followed(tmp_path: Path) -> None:
    """A report.json symlink planted in the run directory is moved aside, never followed."""
    project = _project(tmp_path)
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")

    def on_event(event: ProgressEvent) -> None:
        if isinstance(event, RunStarted):
            (project / ".atlante" / "eval" / event.run_id / "report.json").symlink_to(target)

    report = await _run(project, on_event)
    run_dir = project / ".atlante" / "eval" / report.run_id
    assert not (run_dir / "report.json").is_symlink()
    assert (run_dir / "tampered-1" / "report.json").readlink() == target
    assert report.meta.tampered is not None
    assert [t.path for t in report.meta.tampered] == ["report.json"]
    assert target.read_text() == "precious\n"
