"""Summarise transcripts into the report's ``activity``: per trial, and per scenario."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..choices import TOKEN_CEILING
from ..report import (
    Activity,
    RunFiles,
    ToolCallCounts,
)
from .models import (
    TRANSCRIPT_FILE,
    ErrorEntry,
    ResultEntry,
    SkillEntry,
    SubagentEntry,
    ToolCallEntry,
    TranscriptEntry,
    TranscriptError,
    UsageEntry,
    parse_transcript,
)

__all__ = [
    "MAX_FILES_WRITTEN",
    "MAX_NAMES",
    "ActivityCounter",
    "copy_trial_files",
    "recorded_activity",
]

#: Most paths ``activity.filesWritten`` lists.
MAX_FILES_WRITTEN = 200
#: Most distinct tool, skill or subagent names counted by name (the rest count in totals).
MAX_NAMES = 200
_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "notebookPath")


def _count(counter: Counter[str], name: str) -> None:
    """Count ``name``, unless :data:`MAX_NAMES` other names are counted already."""
    if name in counter or len(counter) < MAX_NAMES:
        counter[name] += 1


class ActivityCounter:
    """Counts what a trial's entries show, as they are written."""

    def __init__(self, sandbox: Path | None = None) -> None:
        self._roots = [str(sandbox), str(sandbox.resolve())] if sandbox is not None else []
        self._calls: Counter[str] = Counter()
        self._names: Counter[str] = Counter()
        self._skills: Counter[str] = Counter()
        self._subagents: Counter[str] = Counter()
        self._files: dict[str, None] = {}
        self._turns: int | None = None
        self._usage_steps = 0
        self._first_error: str | None = None

    def add(self, entry: TranscriptEntry) -> None:
        """Account for one entry."""
        if isinstance(entry, ToolCallEntry):
            self._calls[entry.tool_kind] += 1
            _count(self._names, entry.name)
            if entry.tool_kind == "write" and entry.status == "ok":
                self._file(entry.input)
        elif isinstance(entry, SkillEntry):
            _count(self._skills, entry.name)
        elif isinstance(entry, SubagentEntry):
            _count(self._subagents, entry.name)
        elif isinstance(entry, ErrorEntry) and self._first_error is None:
            self._first_error = entry.message.splitlines()[0][:500] if entry.message else "error"
        elif isinstance(entry, ResultEntry) and entry.turns is not None and entry.turns >= 0:
            # A Claude session that waits for a background subagent ends with two results.
            self._turns = min((self._turns or 0) + entry.turns, TOKEN_CEILING)
        elif isinstance(entry, UsageEntry):
            self._usage_steps += 1

    def _file(self, arguments: dict[str, object]) -> None:
        path = next((v for k in _PATH_KEYS if isinstance(v := arguments.get(k), str) and v), None)
        if path is None or len(self._files) >= MAX_FILES_WRITTEN:
            return
        for root in self._roots:
            if path == root or path.startswith(root.rstrip("/") + "/"):
                path = path[len(root.rstrip("/")) + 1 :] or "."
                break
        self._files[str(PurePosixPath(path))] = None

    @property
    def first_error(self) -> str | None:
        """The first host error seen."""
        return self._first_error

    def activity(self) -> Activity:
        """Return the summary so far."""
        return Activity(
            turns=self._turns if self._turns is not None else self._usage_steps,
            tool_calls=ToolCallCounts(
                total=sum(self._calls.values()),
                by_kind=dict(sorted(self._calls.items())),
                by_name=dict(sorted(self._names.items())),
            ),
            skills=dict(sorted(self._skills.items())),
            subagents=dict(sorted(self._subagents.items())),
            files_written=list(self._files),
            first_error=self._first_error,
        )


#: The most bytes of a transcript read back to count what an unfinished trial did.
_RECORDED_LIMIT = 32 * 1024 * 1024


def recorded_activity(run: RunFiles, scenario: str, index: int) -> tuple[str, Activity] | None:
    """The transcript a trial that never finished left, and its activity (``None``: none).

    Used for trials an interruption cut short: what they did is still on disk. Only
    a regular file reached without symlinks is read (an agent may have planted
    something else there).
    """
    files = run.trial(scenario, index, create=False)
    if files is None:
        return None
    with files:
        data = files.read(TRANSCRIPT_FILE, limit=_RECORDED_LIMIT)
        relative = files.path_of(TRANSCRIPT_FILE)
    if data is None:
        return None
    try:
        entries = parse_transcript(
            data.decode("utf-8", errors="replace").splitlines(), source=relative
        )
    except TranscriptError:
        return None
    counter = ActivityCounter()
    for entry in entries:
        counter.add(entry)
    return relative, counter.activity()


def copy_trial_files(source: Path, target: RunFiles, trials: Sequence[tuple[str, int]]) -> None:
    """Copy the given trials' regular files from run directory ``source`` into ``target``.

    Symlinks, FIFOs, devices and subdirectories in ``source`` are skipped, and so is
    any file over the size a transcript or log can reach.
    """
    try:
        origin_run = RunFiles.open_existing(source)
    except OSError:
        return
    with contextlib.closing(origin_run):
        for scenario, index in trials:
            origin = origin_run.trial(scenario, index, create=False)
            if origin is None:
                continue
            with origin:
                kept = {name: origin.read(name, limit=_RECORDED_LIMIT) for name in origin.names()}
            destination = target.trial(scenario, index)
            if destination is None:
                continue
            with destination:
                for name, data in kept.items():
                    if data is not None:
                        with destination.create(name) as handle:
                            handle.write(data)
