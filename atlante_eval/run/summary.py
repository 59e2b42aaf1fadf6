"""A scenario's result from its trials, with the scenario's own description and origin."""

from __future__ import annotations

from collections.abc import Sequence

from ..project import Scenario
from ..report import OriginInfo, ScenarioResult, TrialResult, summarize

__all__ = ["scenario_result"]


def scenario_result(
    scenario: Scenario,
    trials: Sequence[TrialResult],
    *,
    fingerprint: str | None = None,
    definition: str | None = None,
) -> ScenarioResult:
    """Summarise one scenario's trials (in index order) with the reference's statistics."""
    origin = scenario.origin
    return summarize(
        trials,
        source=scenario.source,
        origin=OriginInfo(
            kind=origin.kind,
            package_name=origin.package_name,
            package_version=origin.package_version,
        ),
        fingerprint=fingerprint,
        definition=definition,
        description=scenario.document.description,
        prompt=scenario.document.task.prompt,
    )
