"""A scenario's result from its trials, with the scenario's own description and origin."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..hosts.base import secret_values
from ..project import Scenario
from ..report import OriginInfo, ScenarioResult, TrialResult
from ..transcript import Redactor

__all__ = ["scenario_result"]


def scenario_result(
    scenario: Scenario,
    trials: Sequence[TrialResult],
    *,
    fingerprint: str | None = None,
    definition: str | None = None,
    redact: Redactor | None = None,
) -> ScenarioResult:
    """Summarise one scenario's trials (in index order) with the reference's statistics.

    The prompt is stored with every secret value redacted, as every other report
    field is (run/redaction.py): ``redact``'s, else the environment's secrets.
    """
    from ..report.results import summarize  # the statistics: once trials have ended

    origin = scenario.origin
    redact = redact if redact is not None else Redactor(secret_values(os.environ))
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
        prompt=redact(scenario.document.task.prompt),
    )
