"""Write a trial's ``model-calls.jsonl`` as its calls end: bounded, redacted, never via a link.

The file is created through the trial's
:class:`~atlante_eval.report.run_files.TrialFiles` (no symbolic link is followed)
when the first call ends, one line per call, flushed at once, so a session that
is cut short keeps every call up to then. Like the transcript it is capped: at
most :attr:`RecordLimits.max_calls` lines and :attr:`RecordLimits.max_bytes`
bytes, then one ``truncated`` line says how many calls were left out. Every line
goes through the trial's :class:`~atlante_eval.transcript.Redactor` (a tool input
the model wrote may hold what the agent found).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import BinaryIO

from .._util.logs import get_logger
from ..report import TrialFiles
from ..transcript import Redactor, TruncatedEntry
from ..transcript.model_calls import MODEL_CALLS_FILE, ModelCall

__all__ = ["DEFAULT_RECORD_LIMITS", "ModelCallWriter", "RecordLimits"]

log = get_logger("atlante_eval.gateway")


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """How much one trial's model-call record may hold."""

    max_calls: int = 10_000
    """Most call lines (as many as the transcript's entries)."""
    max_bytes: int = 8 * 1024 * 1024
    """Most bytes (as many as the transcript's)."""


DEFAULT_RECORD_LIMITS = RecordLimits()


class ModelCallWriter:
    """One trial's ``model-calls.jsonl`` (:meth:`write` each call, then :meth:`close`)."""

    def __init__(
        self,
        files: TrialFiles,
        *,
        redact: Redactor | None = None,
        limits: RecordLimits = DEFAULT_RECORD_LIMITS,
    ) -> None:
        """Prepare a writer; ``files`` is closed by :meth:`close`."""
        self._files = files
        self._redact = redact
        self.limits = limits
        self._file: BinaryIO | None = None
        self._lines = 0
        self._bytes = 0
        self._dropped = 0
        self._failed = False
        self.written = False
        """Whether the file exists (a call ended)."""

    @property
    def relative_path(self) -> str:
        """The record's path relative to the run directory."""
        return self._files.path_of(MODEL_CALLS_FILE)

    def write(self, call: ModelCall) -> None:
        """Append one call (counted instead once the caps are reached)."""
        if self._failed:
            return
        line = json.dumps(
            call.model_dump(mode="json", by_alias=True, exclude_none=True),
            ensure_ascii=False,
            separators=(",", ":"),
        )
        if self._redact:
            line = self._redact(line)
        data = (line + "\n").encode("utf-8")
        if self._lines >= self.limits.max_calls or self._bytes + len(data) > self.limits.max_bytes:
            self._dropped += 1
            return
        self._put(data)

    def _put(self, data: bytes) -> None:
        try:
            if self._file is None:
                self._file = self._files.create(MODEL_CALLS_FILE)
                self.written = True
            self._file.write(data)
            self._file.flush()
        except OSError as exc:
            log.warning("gateway.record-unwritable", error=str(exc))
            self._failed = True
            return
        self._lines += 1
        self._bytes += len(data)

    def close(self) -> None:
        """Write the truncation line, if any, and close the file and the directory."""
        with contextlib.ExitStack() as stack:
            stack.callback(self._files.close)
            if self._file is not None:
                stack.callback(self._file.close)
            if self._dropped and not self._failed:
                marker = TruncatedEntry(
                    reason=f"model-call record cap reached ({self.limits.max_calls} calls "
                    f"or {self.limits.max_bytes} bytes)",
                    dropped=self._dropped,
                    unit="entries",
                )
                payload = marker.model_dump(mode="json", by_alias=True)
                line = json.dumps({"kind": payload.pop("kind"), **payload})
                self._put((line + "\n").encode("utf-8"))
