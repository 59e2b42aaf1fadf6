"""What ``atlante-eval run`` does before its first trial: the project read once, and the
garbage collector held until the first trial starts (``_util/memory.py``)."""

from __future__ import annotations

import gc
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factory import make_project, scenario
from standin import StandinHost, actions
from typer.testing import CliRunner

from atlante_eval import SessionEnd, SessionUsage, TrialContext, hosts
from atlante_eval._util.memory import pause_collection
from atlante_eval.cli import app, main
from atlante_eval.cli import run as cli_run
from atlante_eval.cli.app import guarded
from atlante_eval.project import config as config_module
from atlante_eval.project.suite import load_suite as real_load_suite

WRITE = actions({"write": "x.txt", "content": "done\n"}, {"usage": 10})


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.fixture(autouse=True)
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the test process's collector as it was: on, nothing frozen."""
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def _project(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "project",
        scenarios=[scenario("launch", prompt=WRITE)],
        eval_extra={"budget": {"trials": 1}},
    )


@pytest.mark.parametrize("history", [True, False])
def test_the_project_document_is_read_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: bool
) -> None:
    """With the history on, the run reads the project for the recording and the suite
    alike: one read of ``atlante.jsonc``, as without it."""
    root = _project(tmp_path)
    reads: list[Path] = []
    real = config_module._read_config

    def counted(config_path: Path, source: str) -> tuple[str, dict[str, Any]]:
        reads.append(config_path)
        return real(config_path, source)

    monkeypatch.setattr(config_module, "_read_config", counted)
    args = [str(root)] if history else [str(root), "--no-history"]
    result = CliRunner().invoke(app, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert reads == [root / "atlante.jsonc"]


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("handed_off", [True, False])
def test_the_collector_is_held_until_the_first_trial_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed_off: bool
) -> None:
    """The console script holds the collector through the launch (the suite is loaded
    with it off) and the first trial's start turns it back on, before the session; with
    the hand-off taken away, the session would run with the collector still held."""
    root = _project(tmp_path)
    seen: dict[str, bool] = {}

    def loading(*args: Any, **kwargs: Any) -> Any:
        seen["launch"] = gc.isenabled()
        return real_load_suite(*args, **kwargs)

    session = StandinHost.run_session

    async def running(self: StandinHost, context: TrialContext, usage: SessionUsage) -> SessionEnd:
        seen["session"] = gc.isenabled()
        return await session(self, context, usage)

    monkeypatch.setattr("atlante_eval.run.prepare.load_suite", loading)
    monkeypatch.setattr(StandinHost, "run_session", running)
    if not handed_off:
        monkeypatch.setattr(cli_run, "_collecting", lambda sink: sink)
    monkeypatch.setattr(sys, "argv", ["atlante-eval", "run", str(root), "--no-history"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 0
    assert seen == {"launch": False, "session": handed_off}
    assert gc.isenabled()  # and on again once the run is over, either way
    assert gc.get_freeze_count() > 0  # start-up's objects are never walked again


@pytest.mark.usefixtures("collector")
def test_every_other_command_runs_with_the_collector_on() -> None:
    """``guarded`` turns the collector back on before a command's work; ``run`` alone
    (``collect=False``) keeps it held for its launch."""
    pause_collection()
    assert guarded(lambda: int(gc.isenabled()), collect=False) == 0
    assert guarded(lambda: int(gc.isenabled())) == 1
    assert guarded(lambda: int(gc.isenabled())) == 1  # resuming twice is harmless
