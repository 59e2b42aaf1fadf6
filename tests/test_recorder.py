"""The history is written by a process of its own: the run's process never loads SQLAlchemy,
the child's answer is the outcome recording in-process gave, and a child that cannot
start, dies or answers nonsense is the same ``history-not-recorded`` warning as a store
that cannot be opened."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import RunOptions
from atlante_eval.diagnostics import warning
from atlante_eval.history import parse_history_url
from atlante_eval.history.models import IngestResult
from atlante_eval.history.store import open_store
from atlante_eval.run import recorder as recorder_module
from atlante_eval.run.record import Recording, RecordOutcome
from atlante_eval.run.recorder import RecorderProcess, outcome_from_json, outcome_to_json
from atlante_eval.run.runner import execute_run

GOOD = actions({"write": "out.txt", "content": "x"}, {"usage": 10, "cost": 0.001})
CHECK = [{"type": "file-exists", "path": "out.txt"}]
TESTS = Path(__file__).resolve().parent


def _project(root: Path) -> Path:
    return make_project(root, scenarios=[scenario("task", prompt=GOOD, checks=CHECK)])


def test_the_run_records_without_loading_sqlalchemy(tmp_path: Path) -> None:
    """A recorded run, in a fresh interpreter: the store holds it, the run's process
    imported no SQL library, and the outcome says what the child did."""
    store = tmp_path / "h.sqlite"
    code = f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from functools import partial
        from pathlib import Path
        import anyio
        from factory import make_project, scenario
        from standin import StandinHost, actions
        from atlante_eval import RunOptions
        from atlante_eval.run.runner import execute_run
        good = actions({{"write": "out.txt", "content": "x"}}, {{"usage": 10}})
        root = make_project(Path({str(tmp_path / "p")!r}),
            scenarios=[scenario("task", prompt=good,
                                checks=[{{"type": "file-exists", "path": "out.txt"}}])])
        options = RunOptions(trials=3, jobs=2, out=Path({str(tmp_path / "r")!r}),
                             history=True, history_url={str(store)!r})
        outcome = anyio.run(partial(execute_run, root, options, host=StandinHost()))
        print(outcome.history.ingested.status, outcome.history.ingested.trials,
              outcome.history.store == {str(store)!r}, outcome.history.notes,
              sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "alembic")))
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["recorded", "3", "True", "[]", "[]"]
    with open_store(parse_history_url(str(store))) as opened:
        [run] = opened.runs()
    assert run.passed == 3


def _recording(store: Path) -> Recording:
    return Recording(
        location=parse_history_url(str(store)), webhook=None, baseline="default", step_summary=None
    )


def _published(tmp_path: Path) -> Path:
    """A real published report (recorded nowhere)."""
    options = RunOptions(trials=2, out=tmp_path / "reports")
    outcome = anyio.run(partial(execute_run, _project(tmp_path / "p"), options, host=StandinHost()))
    return outcome.path


def test_a_recorder_started_early_records_once_and_again_is_unchanged(tmp_path: Path) -> None:
    """Started ahead (as the prewarm thread does), it records the published report; a
    second recorder given the same report leaves the store unchanged."""
    report = _published(tmp_path)
    store = tmp_path / "h.sqlite"
    first = RecorderProcess(_recording(store))
    first.start()
    first.start()  # once
    outcome = first.record(report)
    first.close()
    assert outcome.notes == []
    assert outcome.ingested is not None
    assert (outcome.ingested.status, outcome.ingested.trials) == ("recorded", 2)
    second = RecorderProcess(_recording(store))
    assert second.record(report).ingested == IngestResult(
        run_id=outcome.ingested.run_id, status="unchanged", trials=2
    )
    with pytest.raises(RuntimeError):
        second.record(report)


def test_a_submitted_report_is_recorded_even_if_nobody_asks(tmp_path: Path) -> None:
    """Handed the report (as the run does before rendering report.html), the child
    records it; closing the recorder waits for that instead of ending it."""
    report = _published(tmp_path)
    store = tmp_path / "h.sqlite"
    recorder = RecorderProcess(_recording(store))
    recorder.start()
    recorder.submit(report)
    recorder.submit(report)  # once
    recorder.close()
    with open_store(parse_history_url(str(store))) as opened:
        [run] = opened.runs()
    assert run.trials == 2


def test_a_recorder_never_asked_leaves_no_store(tmp_path: Path) -> None:
    """A run that ends before its report (started, then closed): the child ends, no store."""
    store = tmp_path / "h.sqlite"
    unused = RecorderProcess(_recording(store))
    unused.start()
    process = unused._process
    unused.close()
    assert process is not None
    assert process.returncode is not None
    assert not store.exists()


def test_a_child_that_cannot_start_or_dies_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter to start, an interpreter that fails, a report that is gone: each is
    history-not-recorded, with the cause."""
    report = _published(tmp_path)
    store = tmp_path / "h.sqlite"
    python = sys.executable
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    [missing] = RecorderProcess(_recording(store)).record(report).notes
    assert missing.code == "history-not-recorded"
    assert "could not start" in missing.message
    assert "FileNotFoundError" in (missing.cause or "")
    monkeypatch.setattr(recorder_module, "_MODULE", "atlante_eval.no_such_module")
    monkeypatch.setattr(sys, "executable", python)
    [died] = RecorderProcess(_recording(store)).record(report).notes
    assert died.code == "history-not-recorded"
    assert "exited with status 1" in (died.cause or "")
    assert "No module named 'atlante_eval.no_such_module'" in (died.cause or "")
    monkeypatch.undo()
    [gone] = RecorderProcess(_recording(store)).record(tmp_path / "nowhere" / "report.json").notes
    assert gone.code == "history-not-recorded"
    assert "no report at" in gone.message
    assert not store.exists()


def test_nothing_in_the_current_directory_is_imported_by_the_recorder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a project that plants ``sqlalchemy.py`` (the recorder's first import of
    it): the planted module never runs and the run is recorded; with the child started
    the way ``python -m`` would (the current directory first), the same plant runs."""
    report = _published(tmp_path)
    project = tmp_path / "hostile"
    project.mkdir()
    marker = tmp_path / "planted-ran"
    (project / "sqlalchemy.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise SystemExit(7)\n", encoding="utf-8"
    )
    monkeypatch.chdir(project)
    outcome = RecorderProcess(_recording(tmp_path / "h.sqlite")).record(report)
    assert outcome.notes == []
    assert outcome.ingested is not None
    assert not marker.exists()
    monkeypatch.setattr(recorder_module, "_PYTHON_FLAGS", ())  # the defence weakened
    [note] = RecorderProcess(_recording(tmp_path / "h2.sqlite")).record(report).notes
    assert marker.exists()
    assert "exited with status 7" in (note.cause or "")


def test_the_outcome_crosses_the_pipe_unchanged() -> None:
    """What the child sends is what the parent rebuilds, warnings included."""
    outcome = RecordOutcome(
        ingested=IngestResult(run_id="r1", status="replaced", trials=4, absorbed=["r0"]),
        store="/x/h.sqlite",
        alert=None,
        alert_sent=False,
        notes=[warning("alert-failed", "no alert: x", next="y")],
    )
    again = outcome_from_json(json.loads(json.dumps(outcome_to_json(outcome))))
    assert again == outcome
