"""One trial as data, for every view of it: ``show RUN SCENARIO:I`` and the HTML report's panel.

:func:`build_trial_view` turns a report's :class:`~atlante_eval.report.TrialResult`
and the run's files into a :class:`TrialView`, the one model of a trial:
``show`` prints it (:mod:`atlante_eval.views.show_render`, or as JSON with
``--json``) and the run page lays it out (:mod:`atlante_eval.views.html.trial`).
The transcript (``trials/<scenario>/<i>/transcript.jsonl``) is read through the
run directory's descriptor (:class:`~atlante_eval.report.RunFiles`), so a symlink
or FIFO planted in ``trials/`` is never followed or opened, and entry by entry
into a timeline by the field names of the transcript format (docs/transcripts.md:
``kind``, ``t``, and per kind e.g. ``toolKind``, ``durationMs``, ``costUsd``);
unknown kinds and lines that are not JSON are kept as ``raw`` entries. Each view
reads the transcript within its own :class:`TranscriptCaps`. All text in these
models is as recorded (untrusted): renderers escape it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.terminal import first_line, printable
from ..report import (
    CheckResult,
    MetaConfig,
    OutputModel,
    RunFiles,
    TamperEvidence,
    TrialResult,
    TrialUsage,
)
from ..report.final_state import FINAL_STATE_FILE
from ..transcript import RAW_FILE, TRANSCRIPT_FILE, decode_transcript
from ..transcript.model_calls import MODEL_CALLS_FILE, ModelCall, parse_model_call_line
from .causes import evidence_line, trial_cause
from .output import output_log

__all__ = [
    "KNOWN_KINDS",
    "AttemptView",
    "CheckView",
    "TimelineEntry",
    "TranscriptCaps",
    "TrialView",
    "build_trial_view",
    "read_model_calls",
    "read_timeline",
    "regrade_note",
]

#: Entry kinds of the transcript contract; any other kind is shown as ``raw``.
KNOWN_KINDS = frozenset(
    {
        "header",
        "session-start",
        "text",
        "tool-call",
        "skill",
        "subagent",
        "usage",
        "error",
        "result",
        "raw",
        "truncated",
    }
)
#: The trial's files a view names (and the page links), in this order.
TRIAL_FILES = (TRANSCRIPT_FILE, RAW_FILE, MODEL_CALLS_FILE, FINAL_STATE_FILE)


@dataclass(frozen=True, slots=True)
class TranscriptCaps:
    """How much of a transcript one view reads, and how it names its cut."""

    max_bytes: int
    """Most transcript bytes read."""
    max_entries: int
    """Most transcript entries read."""
    reader: str
    """Who cut it, in the ``truncated`` entry's reason (``show: entry limit``)."""


class CheckView(OutputModel):
    """One check of a trial with its evidence."""

    index: int
    """Position in the scenario document."""
    type: str
    """Check type."""
    verdict: str
    """``pass``, ``fail`` or ``error``."""
    summary: str
    """What the check saw, in one line (empty on a pass)."""
    evidence: dict[str, Any]
    """The evidence as recorded."""
    output_log: str | None = None
    """The file holding a command check's whole output (``check-N.log``), when kept."""


class AttemptView(OutputModel):
    """An earlier attempt of a trial that ended ``infra-error`` and was retried."""

    attempt: int
    """Its number (1 = the first)."""
    verdict: str
    """Its verdict (``infra-error``)."""
    duration_ms: int
    """How long it took."""
    error: str | None
    """Why it failed (one escaped line)."""


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One transcript entry, by the transcript contract's field names.

    A plain dataclass, not a model: a page reads tens of thousands of entries,
    built here from decoded JSON (nothing to validate), and a :class:`TrialView`
    holding them keeps them as they are.
    """

    kind: str
    """Entry kind; unknown kinds read as ``raw``."""
    t: int | None
    """Milliseconds since the session started."""
    data: dict[str, Any]
    """The entry's fields other than ``kind`` and ``t`` (for ``raw``: ``event``)."""


class TrialView(OutputModel):
    """One trial in full: ``show RUN SCENARIO:I``, and a trial's panel in the HTML report."""

    run_id: str
    """The run id."""
    scenario: str
    """Scenario name."""
    i: int
    """Trial index."""
    verdict: str
    """Verdict."""
    cause: str | None
    """Why it did not pass (one line)."""
    duration_ms: int
    """Duration."""
    tokens: int | None
    """Tokens reported."""
    cost: float | None
    """Cost reported."""
    model: str | None
    """Model reported for the trial."""
    error: str | None
    """The trial's error text, whole."""
    checks: list[CheckView]
    """Its checks (empty when the session did not complete)."""
    changed_files: list[str]
    """Paths the agent changed."""
    diff: str | None
    """The diff against the baseline."""
    transcript: str | None
    """Path of the transcript file, when there is one."""
    timeline: list[TimelineEntry]
    """The transcript's entries."""
    files: list[str]
    """The trial's recorded files present (transcript, the host's raw stream, the final-state
    manifest), run-relative."""
    attempts: int
    """Earlier infra-error attempts (``--retry-infra``)."""
    earlier_attempts: list[AttemptView]
    """Those attempts, oldest first: each one's verdict, duration and error."""
    reused: bool
    """The trial was carried over from an earlier run (``--resume``, ``--last-failed``)."""
    usage: TrialUsage | None = None
    """Where the figures come from, with the gateway on (docs/gateway.md)."""
    tampered: list[TamperEvidence] | None = None
    """Evidence that the host's stream was tampered with."""
    model_calls: str | None = None
    """Path of the model-call record, when there is one."""
    calls: list[ModelCall] | None = None
    """The model calls the gateway forwarded (``model-calls.jsonl``), within the view's caps."""
    prompt: str | None = None
    """The prompt the agent received (the scenario result's ``prompt``), when recorded."""
    regrade: str | None = None
    """How a regrade treated the trial, in one line (``None``: not a regraded report)."""


def _entry(value: object) -> TimelineEntry:
    if not isinstance(value, dict):
        return TimelineEntry(kind="raw", t=None, data={"event": value})
    t = value.get("t")
    stamp = t if isinstance(t, int) and not isinstance(t, bool) else None
    kind = value.get("kind")
    if not isinstance(kind, str) or kind not in KNOWN_KINDS:
        return TimelineEntry(kind="raw", t=stamp, data={"event": value})
    data = dict(value)
    del data["kind"]
    data.pop("t", None)
    return TimelineEntry(kind=kind, t=stamp, data=data)


def read_timeline(data: bytes, caps: TranscriptCaps) -> list[TimelineEntry]:
    """Read a ``transcript.jsonl``'s bytes into entries, tolerating anything they may hold.

    Lines that are not JSON, or entries of unknown kinds, become ``raw``
    entries; reading stops after ``caps.max_bytes`` or ``caps.max_entries``,
    with a ``truncated`` entry saying so.
    """
    read = decode_transcript(data, max_bytes=caps.max_bytes, max_entries=caps.max_entries)
    entries = [_entry(line.value if line.is_json else {"line": line.value}) for line in read.lines]
    if read.truncated is not None:
        cut = read.truncated
        entries.append(
            TimelineEntry(
                kind="truncated",
                t=None,
                data={
                    "reason": f"{caps.reader}: {cut.reason}",
                    "dropped": cut.dropped,
                    "unit": cut.unit,
                },
            )
        )
    return entries


def read_model_calls(data: bytes, caps: TranscriptCaps) -> list[ModelCall]:
    """Read a ``model-calls.jsonl``'s bytes into its calls, within ``caps`` (damage skipped)."""
    read = decode_transcript(data, max_bytes=caps.max_bytes, max_entries=caps.max_entries)
    found = (parse_model_call_line(line.value) for line in read.lines if line.is_json)
    return [call for call in found if isinstance(call, ModelCall)]


def regrade_note(trial: TrialResult) -> str | None:
    """One line on how ``regrade`` treated ``trial`` (``None`` outside a regraded report)."""
    record = trial.regrade
    if record is None:
        return None
    if record.status == "kept":
        return f"kept: never graded, verdict {record.previous_verdict} stands"
    if record.status == "unavailable":
        return f"could not be rebuilt: {record.reason or 'unknown reason'}"
    if record.previous_verdict == trial.verdict:
        return f"regraded: still {trial.verdict}"
    return f"regraded: was {record.previous_verdict}, now {trial.verdict}"


def _check(check: CheckResult, run_dir: Path | None) -> CheckView:
    return CheckView(
        index=check.index,
        type=check.type,
        verdict=check.verdict,
        summary="" if check.verdict == "pass" else evidence_line(check),
        evidence=check.evidence,
        output_log=output_log(check.evidence, run_dir),
    )


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What the run directory holds for one trial."""

    transcript: str | None = None
    timeline: tuple[TimelineEntry, ...] = ()
    files: tuple[str, ...] = ()
    model_calls: str | None = None
    calls: tuple[ModelCall, ...] | None = None


def _recorded(files: RunFiles | None, scenario: str, index: int, caps: TranscriptCaps) -> _Recorded:
    """Read the trial's transcript and list its files, by descriptor; nothing when unsafe."""
    if files is None:
        return _Recorded()
    trial_files = files.trial(scenario, index, create=False)  # None for a name like ../x
    if trial_files is None:
        return _Recorded()
    with trial_files:
        try:
            names = trial_files.names()
            data = trial_files.read_head(TRANSCRIPT_FILE, limit=caps.max_bytes)
            record = trial_files.read_head(MODEL_CALLS_FILE, limit=caps.max_bytes)
        except OSError:
            return _Recorded()
        present = tuple(trial_files.path_of(n) for n in TRIAL_FILES if n in names)
        record_path = str(files.path / trial_files.path_of(MODEL_CALLS_FILE))
        path = str(files.path / trial_files.path_of(TRANSCRIPT_FILE))
    calls = None if record is None else tuple(read_model_calls(record, caps))
    return _Recorded(
        transcript=None if data is None else path,
        timeline=() if data is None else tuple(read_timeline(data, caps)),
        files=present,
        model_calls=None if record is None else record_path,
        calls=calls,
    )


def build_trial_view(
    trial: TrialResult,
    *,
    run_id: str,
    scenario: str,
    config: MetaConfig | None,
    files: RunFiles | None,
    caps: TranscriptCaps,
    prompt: str | None = None,
) -> TrialView:
    """The view of ``trial`` of ``scenario``, its transcript read from the run's ``files``.

    Args:
        trial: the trial's result in the report.
        run_id: the report's run id.
        scenario: the scenario's name (one that is no single path component reads no file).
        config: the run's budget (``meta.config``), which the cause names.
        files: the run directory, held open; ``None`` when there is none to read.
        caps: how much of the transcript this view reads.
        prompt: the prompt the agent received (``ScenarioResult.prompt``).
    """
    recorded = _recorded(files, scenario, trial.i, caps)
    return TrialView(
        run_id=run_id,
        scenario=scenario,
        i=trial.i,
        verdict=trial.verdict,
        cause=trial_cause(trial, config),
        duration_ms=trial.duration_ms,
        tokens=trial.tokens,
        cost=trial.cost,
        model=trial.model,
        error=trial.error,
        checks=[_check(c, files.path if files is not None else None) for c in trial.checks or []],
        changed_files=list(trial.changed_files or []),
        diff=trial.diff,
        transcript=recorded.transcript,
        timeline=list(recorded.timeline),
        files=list(recorded.files),
        attempts=len(trial.attempts or []),
        earlier_attempts=[
            AttemptView(
                attempt=n,
                verdict=a.verdict,
                duration_ms=a.duration_ms,
                error=printable(first_line(a.error or "")) or None,
            )
            for n, a in enumerate(trial.attempts or [], start=1)
        ],
        reused=bool(trial.reused),
        usage=trial.usage,
        tampered=trial.tampered,
        model_calls=recorded.model_calls,
        calls=None if recorded.calls is None else list(recorded.calls),
        prompt=prompt,
        regrade=regrade_note(trial),
    )
