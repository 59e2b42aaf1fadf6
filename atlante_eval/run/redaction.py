"""What the engine makes of a trial's untrusted data: secrets redacted, tampering acted on.

Redaction: the one place a trial's report entry loses every secret value.

An agent controls much of what a trial's report entry says: the diff (an agent
that writes ``env`` into a file puts the real ``ANTHROPIC_API_KEY`` there), the
changed file names, command checks' output, the host's error text, the host's
evidence, the activity's names. Each of those reaches ``report.json``, the HTML
report, the journal and the terminal through the :class:`TrialResult` the engine
builds, so :func:`redact_trial` replaces every secret value in every string of it,
keys included, once, before the result leaves the engine. The transcript, the raw
stream and the logs beside them are redacted as they are written
(:class:`~atlante_eval.transcript.Redactor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ..report import TamperEvidence, TrialResult
from ..transcript import Redactor

__all__ = ["UNREDACTABLE", "redact_trial", "untrusted_transcript"]

#: The error a result gets when a secret sat where no text may be replaced.
UNREDACTABLE = "the trial's result held a secret value in a field that cannot be redacted"


def _clean(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): _clean(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, redact) for v in value]
    return value


def redact_trial(result: TrialResult, redact: Redactor) -> TrialResult:
    """Return ``result`` with every secret value replaced in every string it holds.

    A value validated as a fixed word (a verdict, a kind) cannot be replaced; a
    secret there (only a forged result could hold one) makes the trial an
    ``infra-error`` that says so, never a report that stores it.
    """
    if not redact:
        return result
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    cleaned = _clean(data, redact)
    if cleaned == data:
        return result
    try:
        return TrialResult.model_validate(cleaned)
    except ValidationError:
        return TrialResult(
            i=result.i, verdict="infra-error", duration_ms=result.duration_ms, error=UNREDACTABLE
        )


def untrusted_transcript(evidence: Sequence[TamperEvidence]) -> str:
    """Why behaviour checks give ``error`` on a trial whose host stream was tampered with."""
    first = evidence[0]
    more = f" (and {len(evidence) - 1} more)" if len(evidence) > 1 else ""
    return f"the transcript cannot be trusted: {first.kind}: {first.detail}{more}"
