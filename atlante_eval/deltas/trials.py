"""One side of a comparison: a set of trials and the transcripts of those that have one.

A :class:`TrialSet` is what the deltas compare, so two runs' scenarios and two
arms of one run are compared the same way. :meth:`TrialSet.from_run` builds one
from a report and its run directory: each trial's ``transcript.jsonl`` is read
through :class:`~atlante_eval.report.run_files.RunFiles` (never through a
symbolic link, within a size cap); a missing, unreadable or headerless file is
simply absent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..report import TRIALS_DIR, RunFiles, RunReport, TrialResult
from ..transcript import (
    TRANSCRIPT_FILE,
    HeaderEntry,
    TranscriptEntry,
    decode_transcript,
    parse_entry,
)

__all__ = ["MAX_TRANSCRIPT_BYTES", "MAX_TRANSCRIPT_ENTRIES", "TrialSet", "read_entries"]

#: Largest transcript read (a larger one counts as absent).
MAX_TRANSCRIPT_BYTES = 32 * 1024 * 1024
#: Most entries read from one transcript.
MAX_TRANSCRIPT_ENTRIES = 20_000
_UNGRADED = frozenset({"infra-error", "skipped-budget"})


@dataclass(frozen=True, slots=True)
class TrialSet:
    """One side's trials, and the transcript entries of those that have one.

    Args:
        trials: The trials as the report has them (any verdicts: only graded ones,
            executed minus infra-errors, are compared).
        transcripts: Transcript entries by trial index (``load_transcript``'s result);
            a trial without one is left out.
        files: Where each transcript was read, relative to the run directory, by trial
            index (example trials link to them; optional).
    """

    trials: Sequence[TrialResult]
    transcripts: Mapping[int, Sequence[TranscriptEntry]] = field(default_factory=dict)
    files: Mapping[int, str] = field(default_factory=dict)

    def graded(self) -> list[TrialResult]:
        """The trials compared: executed trials minus infra-errors, in index order."""
        return sorted((t for t in self.trials if t.verdict not in _UNGRADED), key=lambda t: t.i)

    @classmethod
    def from_run(cls, report: RunReport, scenario: str, run_dir: Path | None) -> TrialSet:
        """The trials of ``scenario``, with the graded ones' transcripts from ``run_dir``."""
        trials = report.scenarios[scenario].trials
        if run_dir is None:
            return cls(trials)
        try:
            run = RunFiles.open_existing(run_dir)
        except OSError:
            return cls(trials)
        graded = [t for t in trials if t.verdict not in _UNGRADED]  # the only ones compared
        with contextlib.closing(run):
            found = {t.i: read_entries(run, scenario, t.i) for t in graded}
        read = {i: entries for i, entries in found.items() if entries is not None}
        files = {i: f"{TRIALS_DIR}/{scenario}/{i}/{TRANSCRIPT_FILE}" for i in read}
        return cls(trials, read, files)


def read_entries(run: RunFiles, scenario: str, index: int) -> list[TranscriptEntry] | None:
    """Trial ``index``'s transcript entries, or ``None`` when it has no readable transcript."""
    files = run.trial(scenario, index, create=False)
    if files is None:
        return None
    with files:
        data = files.read(TRANSCRIPT_FILE, limit=MAX_TRANSCRIPT_BYTES)
    if data is None:
        return None
    read = decode_transcript(data, max_entries=MAX_TRANSCRIPT_ENTRIES)
    entries = [parse_entry(line.value) for line in read.lines]
    if not entries or not isinstance(entries[0], HeaderEntry):
        return None
    if read.truncated is not None:
        entries.append(read.truncated)
    return entries
