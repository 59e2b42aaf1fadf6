"""The uplift section: every non-control arm against the control, as ``compare`` decides.

Each arm is compared with the control by :func:`~.compare.compare_reports` on the
two arms' views of the report (per scenario, and overall stratified by scenario).
The p-values of the whole table (every arm's scenarios and overall rows) are then
adjusted together (Holm), and each row's verdict is decided again with its
adjusted p-value, so more arms do not mean more false findings.
"""

from __future__ import annotations

from ..choices import DEFAULT_ALPHA, DEFAULT_MARGIN
from ..stats import ProportionComparison, holm_adjust, verdict
from .arm_models import UpliftArm, UpliftComparison, UpliftRecord
from .arms import arm_names, arm_totals, arm_view
from .compare import Comparison, compare_reports
from .models import RunReport

__all__ = ["uplift_record", "with_uplift"]


def uplift_record(
    report: RunReport, *, alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN
) -> UpliftRecord | None:
    """The report's uplift section (``None`` for a run without arms)."""
    names = arm_names(report)
    if not names:
        return None
    control = arm_view(report, names[0])
    found: dict[str, tuple[dict[str, Comparison], Comparison | None]] = {}
    for arm in names[1:]:
        result = compare_reports(
            control, arm_view(report, arm), alpha=alpha, margin=margin, adjust="none"
        )
        found[arm] = (result.scenarios, result.overall)
    rows = [
        (arm, key, row)
        for arm, (scenarios, overall) in found.items()
        for key, row in [*scenarios.items(), (None, overall)]
        if row is not None
        and row.base.graded
        and row.head.graded
        and (key is not None or len(scenarios) > 1)  # one scenario: its overall is that row
    ]
    adjusted = holm_adjust([row.p_value for _, _, row in rows])
    table = {(arm, key): p for (arm, key, _), p in zip(rows, adjusted, strict=True)}
    for arm, (scenarios, _overall) in found.items():
        if len(scenarios) == 1 and (arm, next(iter(scenarios))) in table:
            table[(arm, None)] = table[(arm, next(iter(scenarios)))]
    arms = {
        arm: UpliftArm(
            scenarios={
                name: _row(row, table.get((arm, name), row.p_value), alpha, margin)
                for name, row in scenarios.items()
            },
            overall=_row(overall, table.get((arm, None), overall.p_value), alpha, margin)
            if overall is not None
            else None,
        )
        for arm, (scenarios, overall) in found.items()
    }
    return UpliftRecord(
        control=names[0],
        alpha=alpha,
        margin=margin,
        adjust="holm",
        family_size=len(rows),
        arms=arms,
        totals=arm_totals(report),
    )


def with_uplift(
    report: RunReport, *, alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN
) -> RunReport:
    """``report`` with its uplift section (re)computed from its trials."""
    return report.model_copy(update={"uplift": uplift_record(report, alpha=alpha, margin=margin)})


def _row(row: Comparison, adjusted_p: float, alpha: float, margin: float) -> UpliftComparison:
    """One uplift row, decided with the table-wide adjusted p-value."""
    comparison = ProportionComparison(
        rate1=row.base.pass_rate,
        rate2=row.head.pass_rate,
        difference=row.difference,
        difference_interval=row.difference_interval,
        p_value=row.p_value,
        trials_needed=None,
    )
    return UpliftComparison(
        control_passed=row.base.passed,
        control_graded=row.base.graded,
        control_rate=row.base.pass_rate,
        arm_passed=row.head.passed,
        arm_graded=row.head.graded,
        arm_rate=row.head.pass_rate,
        difference=row.difference,
        difference_interval=row.difference_interval,
        p_value=row.p_value,
        adjusted_p=adjusted_p,
        verdict=verdict(comparison, adjusted_p=adjusted_p, alpha=alpha, margin=margin),
    )
