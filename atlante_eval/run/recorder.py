"""The history recorder's own process: SQLAlchemy never loads in the run's process.

Recording a run (the store, SQLAlchemy and its driver, the comparison with the
blessed baseline) costs about 12 MiB and a few hundred milliseconds of imports.
A run's process does none of it: :class:`RecorderProcess` starts a Python
process running :func:`main` (``python -P``: nothing in the current directory
is imported) once the first session is over (from the
prewarm thread, :mod:`.prewarm`), where it imports what recording needs while
later sessions wait on the model; after the report is published, it is sent
the :class:`~.record.Recording` and the report's path on stdin, records the
report as :func:`~.record.record_run` always did (read back from the published
file, as ``history ingest`` does) and answers with the
:class:`~.record.RecordOutcome` as JSON on stdout. The request goes as soon as
``report.json`` is out, so the child records while the run renders
``report.html``; a run that ends without a report ends the child, which has not
touched the store.

Nothing here can fail the run either: a child that cannot start, dies or answers
nonsense is the same ``history-not-recorded`` warning as a store that cannot be
opened. The child runs in a process group of its own, so the terminal's Ctrl-C
interrupts trials, not the recording (as when the run recorded in its own
process; it ignores SIGINT and SIGHUP too); its group is one of the run's live
groups (:data:`~atlante_eval.trial.groups.LIVE_GROUPS`), so a second Ctrl-C,
which ends the run at once, kills it with the hosts.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, get_args

from ..choices import HistoryBackend
from ..diagnostics import Diagnostic
from ..history import HistoryLocation
from .record import Recording, RecordOutcome, not_recorded, record_run

__all__ = ["RecorderProcess", "main", "outcome_from_json", "outcome_to_json"]

#: The child's entry point (this module).
_MODULE = __name__
#: ``-P``: the current directory (the project being evaluated, often) is not put first
#: on the child's module path, so nothing planted there is imported by it.
_PYTHON_FLAGS = ("-P",)
#: The child's start: the parent's package directory goes last on the module path (found
#: there when it is not installed), then :func:`main` with the rest of the arguments;
#: once its answer is flushed it exits at once (``os._exit``): tearing down SQLAlchemy's
#: modules took about 200 ms, all of it in the run's tail, which waits for the child.
_BOOT = (
    "import os, sys; sys.path.append(sys.argv[1]); "
    "from {module} import main; code = main(sys.argv[2:]); "
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(code)"
)
#: What the child imports before it waits for the request (and the backend's dialect; the
#: alerts only when the recording will compare with a baseline).
_WARM = ("atlante_eval.report.loading", "atlante_eval.history.store")
_ALERTS = "atlante_eval.history.alerts"
#: How much of a failed child's stderr a warning quotes.
_STDERR_TAIL = 400


class RecorderProcess:
    """One run's recorder process: started early (:meth:`start`), handed the published
    report (:meth:`submit`), asked for the outcome once (:meth:`record`).

    Thread-safe: the prewarm thread starts it, worker threads submit and record, the
    run's end closes it.
    """

    def __init__(self, recording: Recording) -> None:
        self._recording = recording
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._spawn_error: OSError | None = None
        self._submitted: Path | None = None
        self._used = False

    def start(self) -> None:
        """Start the child (once; a no-op once a report was submitted or it was closed)."""
        with self._lock:
            if self._process is None and self._submitted is None and not self._used:
                self._spawn()

    def submit(self, report_path: Path) -> None:
        """Hand the child the published report: it records while the run renders
        ``report.html``. Once; a later call (or :meth:`record`'s) is a no-op."""
        with self._lock:
            if self._submitted is not None or self._used:
                return
            self._submitted = report_path
            if self._process is None:
                self._spawn()
            process = self._process
        if process is None or process.stdin is None:
            return
        request = {"recording": _recording_to_json(self._recording), "report": str(report_path)}
        stdin, process.stdin = process.stdin, None  # communicate() then only reads
        try:
            stdin.write(json.dumps(request).encode("utf-8"))
        except OSError:  # it died: its exit status and stderr say why (record())
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def record(self, report_path: Path) -> RecordOutcome:
        """Record the report published at ``report_path`` (submitted now unless it was);
        problems become warnings."""
        self.submit(report_path)
        with self._lock:
            if self._used:
                raise RuntimeError("a recorder process records one report")
            self._used = True
            process = self._process
        if process is None:
            return RecordOutcome(
                notes=[
                    not_recorded(
                        "the recording process could not start", _cause(self._spawn_error), None
                    )
                ]
            )
        stdout, stderr = process.communicate()
        _forget(process)
        return _answer(process.returncode, stdout, stderr)

    def close(self) -> None:
        """The run is over: a child never handed a report is ended at once (it has not
        touched the store); one recording is waited for."""
        with self._lock:
            if self._used:
                return
            self._used = True
            process, submitted = self._process, self._submitted is not None
        if process is None:
            return
        if not submitted:
            process.kill()
        process.communicate()
        _forget(process)

    def _spawn(self) -> None:
        location = self._recording.location
        backend = location.backend if location is not None else ""
        alerts = ["alerts"] if self._recording.webhook or self._recording.step_summary else []
        package_root = str(Path(__file__).resolve().parents[2])
        boot = _BOOT.format(module=_MODULE)
        try:
            self._process = subprocess.Popen(
                [sys.executable, *_PYTHON_FLAGS, "-c", boot, package_root, backend, *alerts],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                process_group=0,
            )
        except OSError as exc:
            self._spawn_error = exc
            return
        from ..trial.groups import LIVE_GROUPS

        LIVE_GROUPS.pids.add(self._process.pid)


def _forget(process: subprocess.Popen[bytes]) -> None:
    """The child was reaped: its group is no longer one a second Ctrl-C must kill."""
    from ..trial.groups import LIVE_GROUPS

    LIVE_GROUPS.pids.discard(process.pid)


def _cause(exc: BaseException | None) -> str | None:
    return f"{type(exc).__name__}: {exc}" if exc is not None else None


def _answer(returncode: int, stdout: bytes, stderr: bytes) -> RecordOutcome:
    """The child's answer as a :class:`RecordOutcome` (a warning when there is none)."""
    if returncode == 0:
        try:
            return outcome_from_json(json.loads(stdout.decode("utf-8")))
        except (ValueError, KeyError, TypeError) as exc:
            return RecordOutcome(
                notes=[not_recorded("the recording process answered nonsense", _cause(exc), None)]
            )
    tail = stderr.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
    lines = tail.splitlines()
    return RecordOutcome(
        notes=[
            not_recorded(
                "unexpected error",
                f"the recording process exited with status {returncode}"
                + (f": {lines[-1]}" if lines else ""),
                None,
            )
        ]
    )


def _recording_to_json(recording: Recording) -> dict[str, Any]:
    location = recording.location
    return {
        "location": None
        if location is None
        else {
            "backend": location.backend,
            "url": location.url,
            "display": location.display,
            "path": str(location.path) if location.path is not None else None,
        },
        "webhook": recording.webhook,
        "baseline": recording.baseline,
        "stepSummary": recording.step_summary,
    }


def _recording_from_json(data: dict[str, Any]) -> Recording:
    where = data["location"]
    location = (
        None
        if where is None
        else HistoryLocation(
            backend=where["backend"],
            url=where["url"],
            display=where["display"],
            path=Path(where["path"]) if where["path"] is not None else None,
        )
    )
    return Recording(
        location=location,
        webhook=data["webhook"],
        baseline=data["baseline"],
        step_summary=data["stepSummary"],
    )


def outcome_to_json(outcome: RecordOutcome) -> dict[str, Any]:
    """A :class:`RecordOutcome` as the child sends it."""
    return {
        "ingested": asdict(outcome.ingested) if outcome.ingested is not None else None,
        "store": outcome.store,
        "alert": outcome.alert.model_dump(mode="json", by_alias=True)
        if outcome.alert is not None
        else None,
        "alertSent": outcome.alert_sent,
        "notes": [note.model_dump(mode="json") for note in outcome.notes],
    }


def outcome_from_json(data: dict[str, Any]) -> RecordOutcome:
    """The :class:`RecordOutcome` the child sent."""
    from ..history.models import IngestResult  # pydantic models: not on the launch path

    alert = None
    if data["alert"] is not None:
        from ..history.alerts import AlertMessage

        alert = AlertMessage.model_validate(data["alert"])
    ingested = data["ingested"]
    return RecordOutcome(
        ingested=IngestResult(**ingested) if ingested is not None else None,
        store=data["store"],
        alert=alert,
        alert_sent=bool(data["alertSent"]),
        notes=[Diagnostic.model_validate(note) for note in data["notes"]],
    )


def main(args: Sequence[str] | None = None) -> int:
    """The child: import, wait for the request, record, answer (see the module's docstring).

    ``args``: the store's backend (its SQL dialect is imported ahead), then ``alerts``
    when the recording will compare with a baseline (default: ``sys.argv[1:]``).
    """
    import importlib

    for name in ("SIGINT", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    args = list(sys.argv[1:] if args is None else args)
    backend = args[0] if args else ""
    dialect = (f"sqlalchemy.dialects.{backend}",) if backend in get_args(HistoryBackend) else ()
    alerts = (_ALERTS,) if "alerts" in args[1:] else ()
    for name in (*_WARM, *dialect, *alerts):
        importlib.import_module(name)
    raw = sys.stdin.buffer.read()
    if not raw.strip():
        return 0
    request = json.loads(raw.decode("utf-8"))
    outcome = _record(_recording_from_json(request["recording"]), Path(request["report"]))
    sys.stdout.buffer.write(json.dumps(outcome_to_json(outcome)).encode("utf-8"))
    sys.stdout.flush()
    return 0


def _record(recording: Recording, report_path: Path) -> RecordOutcome:
    from ..diagnostics import DiagnosticError
    from ..report.loading import load_report

    try:
        report = load_report(report_path)
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        return RecordOutcome(notes=[not_recorded(first.message, first.cause, first.next)])
    return record_run(recording, report, report_path)


if __name__ == "__main__":
    sys.exit(main())
