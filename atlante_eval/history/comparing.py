"""``compare`` with a history: a blessed BASE, and the gate without quarantined scenarios."""

from __future__ import annotations

from ..choices import FailOn
from ..diagnostics import Diagnostic, DiagnosticError, error
from ..report import RunReport
from ..report.compare import CompareResult
from .gate import GateDecision, decide_gate, unstable_scenarios
from .location import HistoryLocation
from .models import ScenarioHistory
from .store import RunFilter, open_store

__all__ = ["blessed_base", "history_gate"]


def blessed_base(
    location: HistoryLocation | None, name: str, head: RunReport
) -> tuple[RunReport, str]:
    """The baseline ``name`` blessed for HEAD's host and model, and how to name it."""
    if location is None:
        raise DiagnosticError([_not_configured("blessed baselines")])
    if location.path is not None and not location.path.exists():
        raise DiagnosticError(
            [
                error(
                    "history-no-baseline",
                    f"no history store at {location.display}, so no baseline is blessed",
                    next="record runs (`atlante-eval run`, `history ingest`) and bless one "
                    'with `atlante-eval history bless RUN_ID --reason "..."`',
                )
            ]
        )
    with open_store(location) as store:
        blessing, report = store.baseline(name, host=head.meta.host, model=head.meta.model)
    return report, f"blessed:{blessing.name} (run {blessing.run_id})"


def history_gate(
    location: HistoryLocation | None,
    base: RunReport,
    head: RunReport,
    result: CompareResult,
    fail_on: FailOn,
    *,
    stable_nights: int | None,
) -> tuple[GateDecision, list[Diagnostic]]:
    """``--fail-on`` without the quarantined (and, with ``stable_nights``, unstable) scenarios."""
    if location is None or (location.path is not None and not location.path.exists()):
        if stable_nights is not None:
            raise DiagnosticError([_not_configured("--gate-stable-nights")])
        return decide_gate(base, head, result, fail_on, quarantined={}, unstable={})
    with open_store(location) as store:
        quarantined = store.quarantined()
        unstable: dict[str, str] = {}
        if stable_nights is not None:
            where = RunFilter(host=head.meta.host, model=head.meta.model)
            names = sorted(set(base.scenarios) | set(head.scenarios))
            histories = {
                name: _before(
                    store.scenario(name, last=stable_nights + 1, where=where),
                    head.run_id,
                    stable_nights,
                )
                for name in names
            }
            unstable = unstable_scenarios(histories, stable_nights)
    return decide_gate(base, head, result, fail_on, quarantined=quarantined, unstable=unstable)


def _before(history: ScenarioHistory | None, head_run: str, nights: int) -> ScenarioHistory | None:
    """The history before HEAD: HEAD's own run left out (``run`` records it first)."""
    if history is None:
        return None
    earlier = [n for n in history.nights if n.run_id != head_run][-nights:]
    return history.model_copy(update={"nights": earlier})


def _not_configured(what: str) -> Diagnostic:
    return error(
        "history-not-configured",
        f"{what} need a history store, and none was found",
        next="pass --history URL, or run the command in a project that records one",
    )
