"""After a run: it is recorded, a regression against the blessed baseline is POSTed to a
local webhook (naming the scenario), a dead webhook does not fail the run, and the
GitHub step summary is written. Every test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from historykit import fresh_database, postgres_server, store_url
from standin import StandinHost, actions

from atlante_eval import RunOptions, RunReport, run_eval
from atlante_eval.history import parse_history_url
from atlante_eval.history.store import open_store
from atlante_eval.run.runner import RunOutcome, execute_run

__all__ = ["fresh_database", "postgres_server", "store_url"]  # fixtures

GOOD = actions({"write": "out.txt", "content": "x"}, {"usage": 10, "cost": 0.001})
BAD = actions({"usage": 10})
CHECK = [{"type": "file-exists", "path": "out.txt"}]
TRIALS = 5


class Listener:
    """A webhook on 127.0.0.1 that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.received = threading.Event()
        bodies, received = self.bodies, self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")
                received.set()

            def log_message(self, *args: object) -> None:
                """Keep the test output quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/eval"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A running local webhook."""
    with Listener() as running:
        yield running


def _dead_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was just released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def _project(root: Path, prompt: str) -> Path:
    return make_project(root, scenarios=[scenario("task", prompt=prompt, checks=CHECK)])


def _blessed_baseline(tmp_path: Path, store_url: str) -> RunReport:
    """A passing run, recorded by the run itself and blessed."""
    base = anyio.run(
        partial(
            run_eval,
            _project(tmp_path / "good", GOOD),
            host=StandinHost(),
            trials=TRIALS,
            out=tmp_path / "reports",
            history=True,
            history_url=store_url,
        )
    )
    with open_store(parse_history_url(store_url)) as store:
        assert [r.run_id for r in store.runs()] == [base.run_id]
        store.bless(base.run_id, reason="accepted", by="test")
    return base


def _bad_run(tmp_path: Path, store_url: str, webhook: str) -> RunOutcome:
    options = RunOptions(
        trials=TRIALS,
        out=tmp_path / "reports",
        history=True,
        history_url=store_url,
        alert_webhook=webhook,
    )
    return anyio.run(
        partial(execute_run, _project(tmp_path / "bad", BAD), options, host=StandinHost())
    )


def test_a_regression_is_posted_to_the_webhook_naming_the_scenario(
    store_url: str, tmp_path: Path, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run that regressed against the blessed baseline POSTs the documented message,
    and the GitHub step summary marks the scenario regressed."""
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    base = _blessed_baseline(tmp_path, store_url)
    outcome = _bad_run(tmp_path, store_url, listener.url)
    assert outcome.history is not None
    assert outcome.history.ingested is not None
    assert outcome.history.ingested.status == "recorded"
    assert outcome.history.alert_sent
    assert listener.received.is_set()
    [body] = listener.bodies
    assert body["format"] == "atlante-eval/alert/v1"
    assert [s["scenario"] for s in body["regressed"]] == ["task"]
    assert body["regressed"][0]["basePassed"] == TRIALS
    assert body["regressed"][0]["headPassed"] == 0
    # Why: the behaviour deltas' probable cause (the stand-in's bad agent writes nothing).
    cause = body["regressed"][0]["cause"]
    assert cause is not None
    assert "check 0 file-exists" in cause, cause
    assert body["baseline"] == {
        "name": "default",
        "runId": base.run_id,
        "blessedBy": "test",
        "blessedAt": body["baseline"]["blessedAt"],
    }
    assert body["run"]["runId"] == outcome.report.run_id
    assert "1 scenario regressed" in body["text"]
    assert "• task: 5/5 (100%) → 0/5 (0%)" in body["text"]
    text = summary.read_text(encoding="utf-8")
    assert f"## atlante-eval run {outcome.report.run_id}" in text
    assert "| task | 0/5 (0%) | **regressed** |" in text


def test_a_dead_webhook_does_not_fail_the_run_but_is_reported(
    store_url: str, tmp_path: Path
) -> None:
    """A webhook nobody answers: the run returns its report and says the alert failed."""
    _blessed_baseline(tmp_path, store_url)
    outcome = _bad_run(tmp_path, store_url, _dead_url())
    assert outcome.report.exit_code() == 1  # the trials failed; nothing else changed
    assert outcome.path.is_file()
    assert outcome.history is not None
    assert outcome.history.alert is not None
    assert not outcome.history.alert_sent
    [note] = outcome.history.notes
    assert note.code == "alert-failed"
    assert "the regression alert was not delivered: the webhook could not be reached" in (
        note.message
    )
    with open_store(parse_history_url(store_url)) as store:
        assert store.runs()[0].run_id == outcome.report.run_id  # recorded all the same


def test_a_quarantined_regression_is_not_alerted(
    store_url: str, tmp_path: Path, listener: Listener
) -> None:
    """A regressed scenario under quarantine sends no alert."""
    _blessed_baseline(tmp_path, store_url)
    with open_store(parse_history_url(store_url)) as store:
        store.quarantine("task", reason="known", by="test")
    outcome = _bad_run(tmp_path, store_url, listener.url)
    assert outcome.history is not None
    assert outcome.history.alert is None
    assert listener.bodies == []


def test_an_unreachable_store_does_not_fail_the_run(tmp_path: Path) -> None:
    """A history that cannot be written is a warning; the run and its report stand."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    options = RunOptions(
        trials=1, out=tmp_path / "reports", history=True, history_url=str(blocker / "h.sqlite")
    )
    outcome = anyio.run(
        partial(execute_run, _project(tmp_path / "p", GOOD), options, host=StandinHost())
    )
    assert outcome.report.exit_code() == 0
    assert outcome.history is not None
    assert [n.code for n in outcome.history.notes] == ["history-not-recorded"]


def test_history_ingest_alerts_like_run(store_url: str, tmp_path: Path, listener: Listener) -> None:
    """`history ingest --alert-webhook` (a merged nightly report) alerts on a regression."""
    from historykit import dated_report, invoke
    from reports import counts, write

    base = write(tmp_path / "base", dated_report(1, {"task": counts(8), "ok": counts(8)}))
    head = write(tmp_path / "head", dated_report(2, {"task": counts(0, 8), "ok": counts(8)}))
    assert invoke("history", "bless", base, "--reason", "r", "--history", store_url).exit_code == 0
    result = invoke(
        "history", "ingest", head, "--alert-webhook", listener.url, "--history", store_url
    )
    assert result.exit_code == 0, result.stderr
    assert "alert: sent: regressed against blessed baseline: task" in result.stdout
    [body] = listener.bodies
    assert [s["scenario"] for s in body["regressed"]] == ["task"]
    again = invoke(
        "history", "ingest", head, "--alert-webhook", listener.url, "--history", store_url
    )
    assert again.exit_code == 0
    assert len(listener.bodies) == 1  # an already recorded run alerts no more


def test_an_adaptive_run_against_the_blessed_baseline(store_url: str, tmp_path: Path) -> None:
    """`run --until-decided --against blessed` reads BASE from the history store."""
    base = _blessed_baseline(tmp_path, store_url)
    head = anyio.run(
        partial(
            run_eval,
            _project(tmp_path / "bad", BAD),
            host=StandinHost(),
            trials=4,
            out=tmp_path / "reports",
            against="blessed",
            until_decided=True,
            max_trials=6,
            history_url=store_url,
        )
    )
    assert head.adaptive is not None
    assert head.adaptive.baseline_run_id == base.run_id
    assert head.adaptive.baseline.startswith(f"blessed:default (run {base.run_id}")
    assert head.adaptive.scenarios["task"].decision == "regressed"
