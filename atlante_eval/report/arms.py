"""Read a report of a run with arms: each arm's scenarios, its own report view, its totals.

A report with arms keeps the reference shape for its control arm (the seed
fields, ``scenarios.<name>.trials``); every other arm's results sit in
``scenarios.<name>.arms.<arm>``. :func:`arm_view` turns any arm back into a
plain report of that arm alone, which is how ``compare --arms``, the uplift
section and the views read an arm.
"""

from __future__ import annotations

from ..diagnostics import DiagnosticError, error
from .arm_models import ArmInfo, ArmTotals
from .models import RunReport, ScenarioResult
from .results import statistics_of

__all__ = [
    "arm_names",
    "arm_of",
    "arm_pair",
    "arm_scenarios",
    "arm_totals",
    "arm_view",
    "arms_as_scenarios",
    "control_arm",
    "trial_key",
]


def arm_names(report: RunReport) -> list[str]:
    """The report's arms, the control first (empty for a run without arms)."""
    arms = report.meta.variants or []
    return [a.name for a in arms if a.control] + [a.name for a in arms if not a.control]


def control_arm(report: RunReport) -> str | None:
    """The control arm's name (``None`` for a run without arms)."""
    names = arm_names(report)
    return names[0] if names else None


def _info(report: RunReport, arm: str) -> ArmInfo | None:
    return next((a for a in report.meta.variants or [] if a.name == arm), None)


def arm_scenarios(report: RunReport, arm: str) -> dict[str, ScenarioResult]:
    """The scenarios of one arm, each a plain scenario result (no nested ``arms``).

    Raises:
        KeyError: the report has no such arm.
    """
    info = _info(report, arm)
    if info is None:
        raise KeyError(arm)
    if info.control:
        return {
            name: result.model_copy(update={"arms": None})
            for name, result in report.scenarios.items()
        }
    return {
        name: result.arms[arm]
        for name, result in report.scenarios.items()
        if result.arms is not None and arm in result.arms
    }


def arm_view(report: RunReport, arm: str) -> RunReport:
    """The report of one arm alone, as a run of that arm would have written it.

    Raises:
        KeyError: the report has no such arm.
    """
    info = _info(report, arm)
    if info is None:
        raise KeyError(arm)
    meta = report.meta.model_copy(
        update={
            "model": info.model or report.meta.model,
            "host_version": info.host_version,
            "manifest_digest": info.manifest_digest,
            "variants": None,
            "variant_seed": None,
            "totals": None,
        }
    )
    return report.model_copy(
        update={
            "meta": meta,
            "scenarios": arm_scenarios(report, arm),
            "uplift": None,
            "adaptive": None,
        }
    )


def arm_totals(report: RunReport) -> dict[str, ArmTotals]:
    """Every arm's trials over every scenario: pass rate, tokens, cost, cost per pass."""
    totals: dict[str, ArmTotals] = {}
    for arm in arm_names(report):
        results = list(arm_scenarios(report, arm).values())
        stats = [statistics_of(r) for r in results]
        passed, graded = sum(s.passed for s in stats), sum(s.graded for s in stats)
        trials = [t for r in results for t in r.trials]
        cost = sum(t.cost or 0.0 for t in trials)
        totals[arm] = ArmTotals(
            trials=len(trials),
            graded=graded,
            passed=passed,
            pass_rate=passed / graded if graded else 0.0,
            tokens=sum(t.tokens or 0 for t in trials),
            cost=cost,
            cost_per_pass=cost / passed if passed else None,
        )
    return totals


def arm_of(report: RunReport, arm: str, *, option: str) -> RunReport:
    """:func:`arm_view` of a user-named arm, refused with a diagnostic when it has none.

    Args:
        report: The report the user named.
        arm: The arm the user named.
        option: The option or argument that named it, for the message.

    Raises:
        DiagnosticError: ``unknown-variant`` (exit 2) listing the report's arms.
    """
    names = arm_names(report)
    if arm not in names:
        listed = ", ".join(names) if names else "none (the run has no eval.variants arms)"
        raise DiagnosticError(
            [
                error(
                    "unknown-variant",
                    f"{option}: run {report.run_id} has no arm {arm!r}",
                    expected=f"one of: {listed}",
                    next="name an arm listed in the report's meta.variants "
                    "(`atlante-eval show RUN` prints them)",
                )
            ]
        )
    return arm_view(report, arm)


def arm_pair(spec: str) -> tuple[str, str]:
    """Split ``--arms A,B`` into its two arm names.

    Raises:
        DiagnosticError: ``invalid-option`` (exit 2) unless it names two arms.
    """
    parts = [part.strip() for part in spec.split(",")]
    if len(parts) != 2 or not all(parts):
        raise DiagnosticError(
            [
                error(
                    "invalid-option",
                    f"--arms {spec}: expected two arm names separated by a comma",
                    expected="--arms CONTROL,ARM, e.g. --arms bare,project",
                    next="name the base arm, then the arm to compare with it",
                )
            ]
        )
    return parts[0], parts[1]


def trial_key(report: RunReport, scenario: str, arm: str | None) -> str:
    """Where an arm's trials of ``scenario`` are in the run directory: ``trials/<key>/<i>``.

    The control's (and a run without arms') key is the scenario's name, every other
    arm's ``<scenario>@<arm>`` (``ArmInfo.scenarioKey``).
    """
    info = None if arm is None else _info(report, arm)
    return scenario + (info.scenario_key or "" if info is not None else "")


def arms_as_scenarios(report: RunReport) -> RunReport:
    """``report`` with every arm's scenarios side by side, as ``<scenario>@<arm>``.

    This is how a history follows each arm: the same arm's scenario lines up
    across runs. A report without arms is returned as it is.
    """
    names = arm_names(report)
    if not names:
        return report
    scenarios = {
        f"{name}@{arm}": result
        for arm in names
        for name, result in arm_scenarios(report, arm).items()
    }
    meta = report.meta.model_copy(update={"variants": None, "variant_seed": None, "totals": None})
    return report.model_copy(
        update={"meta": meta, "scenarios": scenarios, "uplift": None, "adaptive": None}
    )
