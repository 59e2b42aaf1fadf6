"""`atlante-eval run` and the history store: recorded by default, --no-history, --out,
--history, and a dead --alert-webhook that changes nothing but a warning (stand-in host)."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import pytest
from factory import make_project, scenario, write_json
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import hosts
from atlante_eval.cli import app
from atlante_eval.trial import process as process_module

GOOD = actions({"write": "out.txt", "content": "x"}, {"usage": 10, "cost": 0.001})
BAD = actions({"usage": 10})
CHECK = [{"type": "file-exists", "path": "out.txt"}]


@pytest.fixture(autouse=True)
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in host for both host names; run roots under the test's directory."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    monkeypatch.setitem(hosts.HOST_FACTORIES, "claude-code", StandinHost)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _project(tmp_path: Path, prompt: str = GOOD, trials: int = 1) -> Path:
    return make_project(
        tmp_path / "project",
        scenarios=[scenario("task", prompt=prompt, checks=CHECK)],
        eval_extra={"budget": {"trials": trials}},
    )


def test_run_records_itself_by_default(tmp_path: Path) -> None:
    """Each run lands in <project>/.atlante/eval/history.sqlite, kept out of git."""
    root = _project(tmp_path)
    first = _invoke("run", root)
    second = _invoke("run", root)
    assert (first.exit_code, second.exit_code) == (0, 0)
    store = root / ".atlante" / "eval" / "history.sqlite"
    assert store.is_file()
    assert "history" not in first.stdout + first.stderr  # recording is silent
    listed = _invoke("history", "list", "--project", root, "--json")
    assert len(json.loads(listed.stdout)) == 2
    assert "eval/" in (root / ".atlante" / ".gitignore").read_text(encoding="utf-8")


def test_no_history_writes_no_store(tmp_path: Path) -> None:
    """--no-history: no store is created and nothing is said about one."""
    root = _project(tmp_path)
    result = _invoke("run", root, "--no-history")
    assert result.exit_code == 0
    assert not (root / ".atlante" / "eval" / "history.sqlite").exists()


def test_out_records_into_the_project_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run --out DIR publishes there and records into the project's store, where the
    history commands look; DIR holds the run directory only."""
    root = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = _invoke("run", root, "--out", "reports")
    assert result.exit_code == 0
    assert (root / ".atlante" / "eval" / "history.sqlite").is_file()
    assert [p.is_dir() for p in (tmp_path / "reports").iterdir()] == [True]
    listed = json.loads(_invoke("history", "list", "--project", root, "--json").stdout)
    assert listed[0]["reportPath"].startswith(str(tmp_path / "reports"))


def test_a_symlinked_store_directory_is_refused(tmp_path: Path) -> None:
    """A .atlante/eval that is a symbolic link gets no store written through it."""
    root = _project(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (root / ".atlante").mkdir(exist_ok=True)
    (root / ".atlante" / "eval").symlink_to(target)
    result = _invoke("history", "ingest", tmp_path, "--project", root)
    assert result.exit_code == 3
    assert "error [history-unavailable]" in result.stderr
    assert "symbolic link" in result.stderr
    assert list(target.iterdir()) == []


def test_a_bad_history_url_stops_before_any_trial(tmp_path: Path) -> None:
    """--history with an unsupported scheme is history-invalid-url (exit 2), nothing runs."""
    root = _project(tmp_path)
    result = _invoke("run", root, "--history", "mysql://db/evals")
    assert result.exit_code == 2
    assert "error [history-invalid-url]" in result.stderr
    assert not (root / ".atlante" / "eval").exists()


def test_a_dead_webhook_only_warns(tmp_path: Path) -> None:
    """A regression whose webhook nobody answers: exit 1 as for any failing trial, the
    report and the history record stand, and a warning says the alert was not sent."""
    root = _project(tmp_path, trials=5)
    assert _invoke("run", root).exit_code == 0
    [run] = json.loads(_invoke("history", "list", "--project", root, "--json").stdout)
    blessed = _invoke("history", "bless", run["runId"], "--reason", "ok", "--project", root)
    assert blessed.exit_code == 0, blessed.stderr
    write_json(
        root / "eval" / "scenarios" / "task.eval.json",
        scenario("task", prompt=BAD, checks=CHECK),
    )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/hook"
    result = _invoke("run", root, "--alert-webhook", dead)
    assert result.exit_code == 1
    assert "warning [alert-failed]: the regression alert was not delivered" in result.stderr
    assert "alert: not sent: regressed against blessed baseline: task" in result.stderr
    runs = json.loads(_invoke("history", "list", "--project", root, "--json").stdout)
    assert len(runs) == 2
