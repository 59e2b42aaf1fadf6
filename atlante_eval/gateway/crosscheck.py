"""Cross-check the transcript's tool calls against the tool calls the model asked for.

The transcript is built from the host's stdout, which the agent's own tools can
write into (``/proc/<host pid>/fd/1``); the gateway's record is built from the
provider's answers, which the agent cannot touch. So, with the gateway metering
a trial, the engine compares the two (docs/gateway.md, "Cross-check"):

* a transcript tool call that matches no model request is ``unrequested-tool-call``
  (matched by the provider's call id, which both hosts keep, and the tool's name;
  by name and input only where the provider gave no id);
* a tool call the model asked for in an answer the host received whole, missing
  from the transcript of a session that ended normally, is ``unrecorded-tool-call``
  (a glued or dropped line hid it), unless a subagent's conversation asked for it
  (OpenCode prints only the main session's calls);
* more ``result`` events than the session can legitimately print (one, plus one
  per subagent call the model made, which the host may run in the background) is
  ``second-result``.

:class:`TranscriptLedger` watches every entry as the transcript writer writes it,
before any cap, so a flooded (truncated) transcript hides nothing from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..report import TamperKind
from ..transcript import ResultEntry, ToolCallEntry, TranscriptEntry
from .routes import RequestedCall, TrialRoute, input_key

__all__ = ["LEDGER_LIMIT", "Finding", "TranscriptLedger", "cross_check"]

#: Most transcript tool calls the ledger remembers (the rest are counted).
LEDGER_LIMIT = 20_000
#: Most findings of one kind kept (the rest are counted in the last one's detail).
_FINDINGS_LIMIT = 10
#: The name OpenCode gives a call it repaired (the model named no tool it has): matched by id
#: alone. (A call the normalizer could not name, ``unknown``, is not: its ``tool_use`` line
#: was lost, which is how a glued fragment hides a call.)
_REPAIRED_NAMES = frozenset({"invalid"})


@dataclass(frozen=True, slots=True)
class _Seen:
    id: str
    name: str
    key: str | None


@dataclass(frozen=True, slots=True)
class Finding:
    """One piece of tampering evidence the cross-check found."""

    kind: TamperKind
    detail: str


class TranscriptLedger:
    """The transcript's tool calls and result events, as they are written (bounded)."""

    def __init__(self) -> None:
        self.calls: list[_Seen] = []
        self.omitted = 0
        self.results = 0

    def observe(self, entry: TranscriptEntry) -> None:
        """Note one transcript entry (the writer calls this before its caps)."""
        if isinstance(entry, ToolCallEntry):
            if len(self.calls) >= LEDGER_LIMIT:
                self.omitted += 1
                return
            self.calls.append(_Seen(entry.id, entry.name, input_key(entry.input)))
        elif isinstance(entry, ResultEntry):
            self.results += 1


def _describe(name: str, call_id: str | None) -> str:
    return f"{name[:80]} (id {call_id[:80]})" if call_id else name[:80]


def _findings(kind: TamperKind, items: list[str], what: str) -> list[Finding]:
    if not items:
        return []
    kept = [Finding(kind, f"{what}: {item}") for item in items[:_FINDINGS_LIMIT]]
    if len(items) > _FINDINGS_LIMIT:
        kept[-1] = Finding(kind, f"{kept[-1].detail} (and {len(items) - _FINDINGS_LIMIT} more)")
    return kept


def _match(
    requested: list[RequestedCall], seen: Iterable[_Seen]
) -> tuple[list[_Seen], list[RequestedCall]]:
    """Pair transcript calls with requests; return the unpaired of each side."""
    by_id: dict[str, list[int]] = {}
    for index, call in enumerate(requested):
        if call.id is not None:
            by_id.setdefault(call.id, []).append(index)
    used = [False] * len(requested)
    loose: list[_Seen] = []
    for entry in seen:
        slots = [i for i in by_id.get(entry.id, []) if not used[i]]
        named = [
            i for i in slots if requested[i].name == entry.name or entry.name in _REPAIRED_NAMES
        ]
        if named:
            used[named[0]] = True
        else:
            loose.append(entry)
    unpaired: list[_Seen] = []
    for entry in loose:
        candidates = [
            i
            for i, call in enumerate(requested)
            if not used[i]
            and call.name == entry.name
            and call.id is None  # with an id, only the id pairs (a forged copy has another)
            and call.key is not None
            and call.key == entry.key
        ]
        if candidates:
            used[candidates[0]] = True
        else:
            unpaired.append(entry)
    return unpaired, [call for i, call in enumerate(requested) if not used[i]]


def cross_check(route: TrialRoute, ledger: TranscriptLedger, *, completed: bool) -> list[Finding]:
    """The tampering evidence of a metered trial (see the module docstring).

    Args:
        route: the trial's route, with the tool calls the model asked for.
        ledger: the transcript's tool calls and results.
        completed: whether the session ended normally (no timeout, budget or error):
            only then must every requested call be in the transcript.
    """
    unrequested, unrecorded = _match(route.requested, ledger.calls)
    found = _findings(
        "unrequested-tool-call",
        [_describe(e.name, e.id) for e in unrequested],
        "a tool call in the host's stream that the model never asked for",
    )
    if completed and not route.requested_omitted and not ledger.omitted:
        found += _findings(
            "unrecorded-tool-call",
            [_describe(c.name, c.id) for c in unrecorded if not c.nested],
            "a tool call the model asked for that the host's stream does not show",
        )
    allowed = 1 + sum(1 for call in route.requested if call.subagent)
    if ledger.results > allowed:
        found.append(
            Finding(
                "second-result",
                f"{ledger.results} result events in the host's stream, where the model's "
                f"calls allow {allowed}",
            )
        )
    return found
