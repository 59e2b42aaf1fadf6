"""``compare``'s BASE (a report, or ``blessed[:NAME]`` from the history) and its gate."""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..choices import FailOn
    from ..diagnostics import Diagnostic
    from ..history import HistoryLocation
    from ..history.gate import GateDecision
    from ..report import RunReport
    from ..report.compare import CompareResult

__all__ = ["CompareSides", "arm_sides", "compare_sides", "with_gate"]


@dataclass(frozen=True, slots=True)
class CompareSides:
    """BASE, how to name it, and the history the gate consults (if any)."""

    base: "RunReport"
    base_path: str
    location: "HistoryLocation | None"
    base_dir: Path | None = None
    """BASE's run directory, where its transcripts are (none for a blessed baseline)."""

    def gate(
        self,
        head: "RunReport",
        result: "CompareResult",
        fail_on: "FailOn",
        *,
        stable_nights: int | None,
    ) -> "tuple[GateDecision, list[Diagnostic]]":
        """Decide ``--fail-on``, leaving out quarantined (and unstable) scenarios."""
        from ..history.comparing import history_gate

        return history_gate(
            self.location, self.base, head, result, fail_on, stable_nights=stable_nights
        )


def compare_sides(base: Path, head: "RunReport", history: str | None) -> CompareSides:
    """Read BASE: a report, or the baseline blessed for HEAD's host and model."""
    from .._util.paths import display_path
    from ..history import blessed_name
    from ..report import load_report, report_path

    location = _location(history)
    name = None if os.path.lexists(base) else blessed_name(str(base))
    if name is not None:
        from ..history.comparing import blessed_base

        report, label = blessed_base(location, name, head)
        return CompareSides(report, label, location)
    file = report_path(base)
    return CompareSides(load_report(file), display_path(file), location, file.parent)


def arm_sides(
    base: Path, head: Path | None, arms: str, history: str | None
) -> "tuple[CompareSides, RunReport, Path, str]":
    """``compare BASE [HEAD] --arms A,B``: BASE's arm A, and HEAD's (default BASE's) arm B.

    Returns the sides (BASE's arm), HEAD's arm as a report, HEAD's report file and
    HEAD's label (``<report>@B``).
    """
    from .._util.paths import display_path
    from ..report import arm_of, arm_pair, load_report, report_path

    first, second = arm_pair(arms)
    base_file = report_path(base)
    head_file = base_file if head is None else report_path(head)
    base_report = load_report(base_file)
    head_report = base_report if head is None else load_report(head_file)
    base_arm = arm_of(base_report, first, option="--arms")
    head_arm = arm_of(head_report, second, option="--arms")
    sides = CompareSides(
        base_arm, f"{display_path(base_file)}@{first}", _location(history), base_file.parent
    )
    return sides, head_arm, head_file, f"{display_path(head_file)}@{second}"


def _location(history: str | None) -> "HistoryLocation | None":
    """``--history``, else the current project's store (None outside a project)."""
    from ..diagnostics import DiagnosticError
    from ..history import parse_history_url
    from .history import store_location

    if history is not None:
        return parse_history_url(history)
    try:
        return store_location(None, None, must_exist=False)
    except DiagnosticError:
        return None


def with_gate(result: "CompareResult", gate: "GateDecision | None") -> str:
    """The ``--json`` document, with the ``gate`` key when ``--fail-on`` was given."""
    if gate is None:
        return result.to_json()
    document = json.loads(result.to_json())
    document["gate"] = gate.model_dump(mode="json", by_alias=True)
    return json.dumps(document, indent=2) + "\n"
