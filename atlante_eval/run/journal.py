"""The run journal: every finished trial, appended as it ends.

``<run dir>/journal.jsonl`` starts with a header line (run id, plan digest, host
version and where the host came from) and
gets one line per finished trial (plan position, scenario, trial index,
fingerprint, result). Each line is written with a single ``write`` as its trial
ends, so a killed run loses none; a crash can at worst leave a torn last line,
which readers ignore. The file is flushed to the disk (``fsync``) at most once
every :data:`SYNC_INTERVAL_S` seconds and when it is closed, not once per trial:
a crash of the whole machine loses at most that many seconds of trials, which a
``--resume`` runs again.
``run --resume RUN_DIR`` reads it back to reuse trials whose fingerprint still
matches.

A run holds an exclusive ``flock`` on its own journal, and a resuming run one on
the journal it resumes, for as long as it runs: two ``--resume`` of one run
directory at once (or a resume of a run still going on) are refused
(``eval-resume-busy``) instead of running the same trials twice.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..diagnostics import DiagnosticError, error
from ..report import REPORT_FILE, HostSource, RunReport, TrialResult

__all__ = [
    "JOURNAL_NAME",
    "Journal",
    "JournalEntry",
    "JournalError",
    "ResumeLock",
    "lock_for_resume",
    "read_journal",
]

JOURNAL_NAME = "journal.jsonl"
#: Longest time a journaled trial stays unflushed to the disk.
SYNC_INTERVAL_S = 2.0


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One finished trial as recorded."""

    scenario: str
    index: int
    fingerprint: str | None
    result: TrialResult


class JournalError(Exception):
    """Raised by :class:`Journal` when the journal cannot be created or appended to.

    The run stops: a finished trial that cannot be recorded could not be resumed.
    """

    def __init__(self, message: str, *, cause: OSError) -> None:
        super().__init__(message)
        self.cause = cause


class Journal:
    """An append-only journal in a run directory, locked while the run lasts."""

    def __init__(
        self,
        run_dir: Path,
        *,
        run_id: str,
        plan_digest: str,
        host_version: str | None = None,
        host_source: HostSource | None = None,
    ) -> None:
        self.path = run_dir / JOURNAL_NAME
        self._lock = threading.Lock()
        self._fd = -1
        self._synced = time.monotonic()
        self._unsynced = False
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        try:
            self._fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.close()
            raise JournalError(
                f"cannot create {self.path}: {exc.strerror or exc}", cause=exc
            ) from exc
        header: dict[str, Any] = {"journal": 1, "runId": run_id, "planDigest": plan_digest}
        if host_version is not None:
            header["hostVersion"] = host_version
        if host_source is not None:
            header["hostSource"] = host_source.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        self._append(header)

    def moved(self, run_dir: Path) -> None:
        """Say the journal's directory is now ``run_dir`` (renamed into place; the file is open)."""
        self.path = run_dir / JOURNAL_NAME

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            view = memoryview(line)
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                self._unsynced = True
                if time.monotonic() - self._synced >= SYNC_INTERVAL_S:
                    self._sync()
            except OSError as exc:
                raise JournalError(
                    f"cannot write to {self.path}: {exc.strerror or exc}", cause=exc
                ) from exc

    def record(
        self, scenario: str, index: int, fingerprint: str | None, result: TrialResult
    ) -> None:
        """Append one finished trial (safe from worker threads); see :data:`SYNC_INTERVAL_S`."""
        self._append(
            {
                "scenario": scenario,
                "i": index,
                "fingerprint": fingerprint,
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    def _sync(self) -> None:
        os.fsync(self._fd)
        self._synced = time.monotonic()
        self._unsynced = False

    def close(self) -> None:
        """Flush what is not on the disk yet (best effort) and close the journal file."""
        if self._fd >= 0:
            with self._lock:
                if self._unsynced:
                    # every line was written; only the flush to the disk can fail here
                    with contextlib.suppress(OSError):
                        self._sync()
            os.close(self._fd)
            self._fd = -1


class ResumeLock:
    """An exclusive lock on the journal of a run directory being resumed."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def close(self) -> None:
        """Release the lock."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def lock_for_resume(run_dir: Path) -> ResumeLock:
    """Lock ``run_dir``'s journal (or report) for a resuming run; held until :meth:`close`.

    Raises:
        DiagnosticError: ``eval-resume-busy`` (exit 3) when another run is resuming
            the directory, or the run that writes it is still going on.
    """
    for name in (JOURNAL_NAME, REPORT_FILE):
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(run_dir / name, flags | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return ResumeLock(-1)
            raise DiagnosticError(
                [
                    error(
                        "eval-resume-busy",
                        f"{run_dir} is being resumed by another atlante-eval run, or its "
                        "run is still going on",
                        source=str(run_dir),
                        next="wait for that run to finish, then resume the run directory it "
                        "published (or this one again)",
                    )
                ]
            ) from None
        return ResumeLock(fd)
    return ResumeLock(-1)


def _unreadable(path: Path, why: str) -> DiagnosticError:
    return DiagnosticError(
        [
            error(
                "eval-resume-mismatch",
                f"cannot resume from {path}: {why}",
                source=str(path),
                next="pass the run directory of an earlier `atlante-eval run` "
                "(it holds journal.jsonl or report.json)",
            )
        ]
    )


def read_journal(run_dir: Path) -> list[JournalEntry]:
    """Read the finished trials of an earlier run directory.

    Uses ``journal.jsonl`` when present (ignoring a torn last line), else the
    trials of ``report.json`` (reports carry each scenario's fingerprint).

    Raises:
        DiagnosticError: ``eval-resume-mismatch`` when the directory holds neither.
    """
    journal = run_dir / JOURNAL_NAME
    if journal.is_file():
        entries: list[JournalEntry] = []
        with open(journal, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                    if "result" not in record:
                        continue
                    entries.append(
                        JournalEntry(
                            scenario=str(record["scenario"]),
                            index=int(record["i"]),
                            fingerprint=record.get("fingerprint"),
                            result=TrialResult.model_validate(record["result"]),
                        )
                    )
                except (ValueError, KeyError, TypeError, ValidationError):
                    continue
        return entries
    report_file = run_dir / REPORT_FILE
    if not report_file.is_file():
        raise _unreadable(run_dir, "it has no journal.jsonl or report.json")
    try:
        report = RunReport.model_validate_json(report_file.read_bytes())
    except (OSError, ValidationError) as exc:
        raise _unreadable(run_dir, f"report.json is not a valid report ({exc})") from None
    keyed = [(name, result) for name, result in report.scenarios.items()] + [
        (f"{name}@{arm}", each)  # a non-control arm's trials (docs/variants.md)
        for name, result in report.scenarios.items()
        for arm, each in (result.arms or {}).items()
    ]
    return [
        JournalEntry(scenario=key, index=trial.i, fingerprint=result.fingerprint, result=trial)
        for key, result in keyed
        for trial in result.trials
    ]
