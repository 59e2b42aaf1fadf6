"""The run journal: every finished trial, appended and flushed to disk as it ends.

``<run dir>/journal.jsonl`` starts with a header line (run id, plan digest) and
gets one line per finished trial (plan position, scenario, trial index,
fingerprint, result). Each line is written with a single ``write`` and
``fsync``; a crash can at worst leave a torn last line, which readers ignore.
``run --resume RUN_DIR`` reads it back to reuse trials whose fingerprint still
matches.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .diagnostics import DiagnosticError, error
from .report import REPORT_FILE, RunReport, TrialResult

__all__ = ["JOURNAL_NAME", "Journal", "JournalEntry", "read_journal"]

JOURNAL_NAME = "journal.jsonl"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One finished trial as recorded."""

    scenario: str
    index: int
    fingerprint: str | None
    result: TrialResult


class Journal:
    """An append-only, fsynced journal in a run directory."""

    def __init__(self, run_dir: Path, *, run_id: str, plan_digest: str) -> None:
        self.path = run_dir / JOURNAL_NAME
        self._lock = threading.Lock()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        self._fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._append({"journal": 1, "runId": run_id, "planDigest": plan_digest})

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            view = memoryview(line)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)

    def record(
        self, scenario: str, index: int, fingerprint: str | None, result: TrialResult
    ) -> None:
        """Append one finished trial and flush it to disk (safe from worker threads)."""
        self._append(
            {
                "scenario": scenario,
                "i": index,
                "fingerprint": fingerprint,
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    def close(self) -> None:
        """Close the journal file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
    return [
        JournalEntry(scenario=name, index=trial.i, fingerprint=result.fingerprint, result=trial)
        for name, result in report.scenarios.items()
        for trial in result.trials
    ]
