"""Write one trial's transcript and raw host stream as the session streams, bounded and redacted.

:class:`TranscriptWriter` is the host-neutral seam: the engine opens one per trial
(``<run dir>/trials/<scenario>/<i>/``, created through
:class:`~atlante_eval.report.run_files.TrialFiles`, never through a symlink) and hands
it to the host on
:class:`~atlante_eval.hosts.base.TrialContext`; the host feeds it each stdout line
of its session and the normalizer that reads its dialect. Every entry is written
(and flushed) when its line arrives, so a session that times out, exceeds its
budget or is interrupted keeps everything up to that moment. Writes are a few
buffered bytes per line: cheap enough for the event loop.

Bounds (:class:`TranscriptLimits`): each entry's text fields are cut to a size,
with a ``… [truncated N characters]`` mark; the transcript holds at most
``max_entries`` entries and ``max_bytes`` bytes, after which one
:class:`~atlante_eval.transcript.models.TruncatedEntry` says how many entries were left
out; the raw stream keeps at most ``raw_bytes`` uncompressed bytes, then one
marker line. Secrets (:class:`Redactor`) are replaced in every line before
anything is parsed or stored.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._util.jsondoc import join_surrogates
from ..report import Activity, TrialFiles
from .activity import ActivityCounter
from .models import (
    TRANSCRIPT_FILE,
    ErrorEntry,
    HeaderEntry,
    RawEntry,
    ResultEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptEntry,
    TruncatedEntry,
    parse_entry,
)
from .normalize import Normalizer, cap_json, cap_text

__all__ = [
    "DEFAULT_LIMITS",
    "LOG_CHARS",
    "MIN_SECRET_LENGTH",
    "RAW_FILE",
    "REDACTED",
    "Redactor",
    "TranscriptLimits",
    "TranscriptWriter",
    "cap_text",
]

#: Name of the compressed raw host stream beside the transcript.
RAW_FILE = "raw.jsonl.gz"
#: What a redacted secret reads as.
REDACTED = "[redacted]"
#: Longest setup or command-check output kept in a log file beside the transcript.
LOG_CHARS = 4 * 1024 * 1024
#: Shortest value redacted: shorter ones (``1``, ``true``) would erase ordinary text.
MIN_SECRET_LENGTH = 6


@dataclass(frozen=True, slots=True)
class TranscriptLimits:
    """How much one trial's transcript and raw stream may hold."""

    text_chars: int = 8 * 1024
    """Longest text, tool output, error or result text kept in one entry."""
    input_chars: int = 4 * 1024
    """Longest tool input (as JSON) kept in one entry."""
    raw_event_chars: int = 4 * 1024
    """Longest unknown host event (as JSON) kept in a ``raw`` entry."""
    max_entries: int = 10_000
    """Most entries in one transcript."""
    max_bytes: int = 8 * 1024 * 1024
    """Most bytes in one transcript."""
    raw_bytes: int = 16 * 1024 * 1024
    """Most uncompressed bytes of the raw host stream kept."""
    reserve: int = 64
    """Entries still written after a cap for what ends a session (errors, the result)."""


DEFAULT_LIMITS = TranscriptLimits()


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class Redactor:
    """Replaces secret values in text, as written and as JSON escapes them."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._needles: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Redact these values too (values shorter than :data:`MIN_SECRET_LENGTH` are kept)."""
        needles = set(self._needles)
        for secret in secrets:
            if len(secret.strip()) < MIN_SECRET_LENGTH:
                continue
            for form in (
                secret,
                json.dumps(secret, ensure_ascii=False)[1:-1],
                json.dumps(secret)[1:-1],
            ):
                needles.add(form)
        # Longest first: a secret containing another is replaced whole.
        self._needles = sorted(needles, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._needles)

    def __call__(self, text: str) -> str:
        """Return ``text`` with every secret replaced by :data:`REDACTED`."""
        for needle in self._needles:
            if needle in text:
                text = text.replace(needle, REDACTED)
        return text


class TranscriptWriter:
    """One trial's ``transcript.jsonl`` and ``raw.jsonl.gz``, written as lines arrive.

    Use as a context manager, or call :meth:`open` and :meth:`close`.
    """

    def __init__(
        self,
        files: TrialFiles,
        *,
        host: str,
        scenario: str,
        trial: int,
        sandbox: Path | None = None,
        secrets: Iterable[str] = (),
        limits: TranscriptLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        redactor: Redactor | None = None,
        observer: Callable[[TranscriptEntry], None] | None = None,
    ) -> None:
        """Prepare a writer (nothing is written before :meth:`open`).

        Args:
            files: the trial's directory in the run directory (closed by :meth:`close`).
            host: the host's name, for the header.
            scenario: the scenario's name.
            trial: the 0-based trial index.
            sandbox: the trial's sandbox, so written files are listed relative to it.
            secrets: values never to store.
            limits: the caps.
            clock: seconds, monotonic (tests pass their own).
            redactor: the trial's redactor, shared with the engine (default: a new one);
                ``secrets`` are added to it.
            observer: sees every entry as it is written, before any cap (the gateway's
                cross-check).
        """
        self._files = files
        self._header = HeaderEntry(host=host, scenario=scenario, trial=trial)
        self.redact = redactor if redactor is not None else Redactor()
        self.redact.add(secrets)
        self.limits = limits
        self._clock = clock
        self._started = clock()
        self._counter = ActivityCounter(sandbox)
        self._observer = observer
        self._file: IO[str] | None = None
        self._raw: gzip.GzipFile | None = None
        self._raw_file: IO[bytes] | None = None
        self._entries = 0
        self._bytes = 0
        self._dropped = 0
        self._raw_bytes = 0
        self._raw_dropped = 0
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------

    def open(self) -> TranscriptWriter:
        """Create both files afresh and write the header.

        Raises:
            OSError: the files cannot be created.
        """
        self._file = io.TextIOWrapper(self._files.create(TRANSCRIPT_FILE), encoding="utf-8")
        self._raw_file = self._files.create(RAW_FILE)
        self._raw = gzip.GzipFile(fileobj=self._raw_file, mode="wb", compresslevel=6, mtime=0)
        self._started = self._clock()
        self._write(self._header, force=True)
        return self

    def __enter__(self) -> TranscriptWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write the truncation markers, if any, and close both files.

        Every file is closed even when an earlier one fails (a full disk, say);
        the first failure is raised after all are closed.
        """
        if self._closed:
            return
        self._closed = True
        with contextlib.ExitStack() as stack:
            # Run last to first: each compressed stream closes before the file under it.
            stack.callback(self._files.close)
            if self._raw_file is not None:
                stack.callback(self._raw_file.close)
            if self._raw is not None:
                stack.callback(self._close_raw, self._raw)
            if self._file is not None:
                stack.callback(self._close_transcript, self._file)

    def _close_transcript(self, file: IO[str]) -> None:
        try:
            if self._dropped:
                self._put(
                    TruncatedEntry(
                        t=self.elapsed_ms(),
                        reason=f"transcript cap reached ({self.limits.max_entries} entries "
                        f"or {self.limits.max_bytes} bytes)",
                        dropped=self._dropped,
                        unit="entries",
                    )
                )
        finally:
            file.close()

    def _close_raw(self, raw: gzip.GzipFile) -> None:
        try:
            if self._raw_dropped:
                marker = {"atlante": "truncated", "dropped": self._raw_dropped, "unit": "bytes"}
                raw.write((_json(marker) + "\n").encode("utf-8"))
        finally:
            raw.close()

    # -- what the engine reads -------------------------------------------------------

    @property
    def relative_path(self) -> str:
        """The transcript's path relative to the run directory (POSIX separators)."""
        return self._files.path_of(TRANSCRIPT_FILE)

    @property
    def first_error(self) -> str | None:
        """The first error entry's message."""
        return self._counter.first_error

    def activity(self) -> Activity:
        """What the entries so far show (counted before any cap, so it is complete)."""
        return self._counter.activity()

    def elapsed_ms(self) -> int:
        """Milliseconds since the session started."""
        return max(0, int((self._clock() - self._started) * 1000))

    # -- what hosts call -------------------------------------------------------------

    def add_secrets(self, values: Iterable[str]) -> None:
        """Redact these values from everything written from now on."""
        self.redact.add(values)

    def add_secret_env(self, env: Mapping[str, str], names: Iterable[str]) -> None:
        """Redact the values ``env`` gives the variables ``names``."""
        self.add_secrets(env[name] for name in names if name in env)

    def line(self, text: str, normalizer: Normalizer, event: Mapping[str, Any] | None) -> None:
        """Record one stdout line of the session, and the entries its event completes.

        Args:
            text: the line as the host printed it (decoded).
            normalizer: the host's dialect reader.
            event: the line decoded as a JSON object, or ``None`` when it is not one.
        """
        t = self.elapsed_ms()
        cleaned = self.redact(text) if self.redact else text
        self._raw_line(cleaned)
        if event is None:
            return
        if cleaned != text:
            event = _decode(cleaned)
            if event is None:
                self.write(RawEntry(t=t, event=cleaned))
                return
        for entry in _safe(normalizer.feed, event, t):
            self.write(entry, clean=True)

    def finish(self, normalizer: Normalizer) -> None:
        """Record what the normalizer still holds when the session ends."""
        for entry in _safe(normalizer.finish, None, self.elapsed_ms()):
            self.write(entry, clean=True)

    def write(self, entry: TranscriptEntry, *, clean: bool = False) -> None:
        """Redact, cap and append one entry (counted in the activity even past the caps).

        ``clean``: the entry comes from an already redacted line.
        """
        if self._closed:
            return
        if self.redact and not clean:
            entry = self._redacted(entry)
        self._counter.add(entry)
        if self._observer is not None:
            self._observer(entry)
        self._write(self._capped(entry))

    # -- internals -------------------------------------------------------------------

    def _raw_line(self, text: str) -> None:
        if self._raw is None or self._closed:
            return
        data = (text + "\n").encode("utf-8", errors="replace")
        if self._raw_bytes + len(data) > self.limits.raw_bytes:
            self._raw_dropped += len(data)
            return
        self._raw_bytes += len(data)
        self._raw.write(data)

    def _redacted(self, entry: TranscriptEntry) -> TranscriptEntry:
        """The entry with every secret replaced, before any cut could split one."""
        text = entry.model_dump_json(by_alias=True)
        cleaned = self.redact(text)
        if cleaned == text:
            return entry
        return parse_entry(json.loads(cleaned))

    def _capped(self, entry: TranscriptEntry) -> TranscriptEntry:
        limits = self.limits
        update: dict[str, Any] = {}
        if isinstance(entry, TextEntry):
            update["text"] = cap_text(entry.text, limits.text_chars)
        elif isinstance(entry, ToolCallEntry):
            update["input"], _ = cap_json(entry.input, limits.input_chars)
            if entry.output is not None:
                update["output"] = cap_text(entry.output, limits.text_chars)
            if entry.error is not None:
                update["error"] = cap_text(entry.error, limits.text_chars)
        elif isinstance(entry, ErrorEntry):
            update["message"] = cap_text(entry.message, limits.text_chars)
        elif isinstance(entry, ResultEntry) and entry.text is not None:
            update["text"] = cap_text(entry.text, limits.text_chars)
        elif isinstance(entry, RawEntry):
            update["event"], _ = cap_json(entry.event, limits.raw_event_chars)
        return entry.model_copy(update=update) if update else entry

    def _write(self, entry: TranscriptEntry, *, force: bool = False) -> None:
        if self._file is None:
            return
        data = entry.model_dump(mode="json", by_alias=True)
        line = _json({"kind": data.pop("kind"), **data})
        if self.redact:
            line = self.redact(line)
        size = len(line.encode("utf-8")) + 1
        limits = self.limits
        ending = isinstance(entry, ErrorEntry | ResultEntry)
        room = limits.max_entries + (limits.reserve if ending else 0)
        over = self._entries >= room or self._bytes + size > limits.max_bytes + (
            limits.reserve * (limits.text_chars + 1024) if ending else 0
        )
        if over and not force:
            self._dropped += 1
            return
        self._put_line(line, size)

    def _put(self, entry: TranscriptEntry) -> None:
        data = entry.model_dump(mode="json", by_alias=True)
        line = _json({"kind": data.pop("kind"), **data})
        self._put_line(line, len(line.encode("utf-8")) + 1)

    def _put_line(self, line: str, size: int) -> None:
        assert self._file is not None
        self._file.write(line + "\n")
        self._file.flush()
        self._entries += 1
        self._bytes += size


def _decode(text: str) -> dict[str, Any] | None:
    try:
        value = join_surrogates(json.loads(text), text=text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _safe(
    step: Callable[..., list[TranscriptEntry]], event: Mapping[str, Any] | None, t: int
) -> list[TranscriptEntry]:
    """Run a normalizer step; a bug in it becomes a ``raw`` entry instead of a lost session."""
    try:
        return step(event, t) if event is not None else step(t)
    except Exception as exc:  # noqa: BLE001 - the transcript must never end a session
        failure = f"{type(exc).__name__}: {exc}"
        return [RawEntry(t=t, event={"normalizerError": failure, "event": event})]
