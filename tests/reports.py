"""Build run reports in memory for tests of compare, junit and merge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from atlante_eval import Meta, RunReport, ScenarioResult, TrialResult
from atlante_eval.report import MetaConfig, finalize, summarize


def config(**overrides: Any) -> MetaConfig:
    """Return a MetaConfig with the reference defaults, changed by ``overrides``."""
    values: dict[str, Any] = {
        "trials": 10,
        "timeout_ms": 600_000,
        "max_sessions": 15,
        "max_tokens": 400_000,
        "setup_timeout_ms": 300_000,
        "check_timeout_default_ms": 120_000,
        **overrides,
    }
    return MetaConfig(**values)


def meta(**overrides: Any) -> Meta:
    """Return run metadata for host ``opencode``, changed by ``overrides``."""
    values: dict[str, Any] = {
        "atlante": "0.1.0",
        "host": "opencode",
        "model": "anthropic/claude-sonnet-4",
        "model_version": "claude-sonnet-4",
        "config": config(),
        "host_version": "1.2.3",
        "manifest_digest": "a" * 64,
        **overrides,
    }
    return Meta(**values)


def trials(verdicts: Sequence[str], *, start: int = 0, **fields: Any) -> list[TrialResult]:
    """Return trials with these verdicts and indexes from ``start``; ``fields`` go on each."""
    return [
        TrialResult.model_validate(
            {"i": start + n, "verdict": v, "duration_ms": 1000 + 10 * n, **fields}
        )
        for n, v in enumerate(verdicts)
    ]


def counts(passed: int, failed: int = 0, **others: int) -> list[str]:
    """Return a verdict list: ``passed`` passes, ``failed`` fails, then other verdicts.

    ``others`` keys use underscores for hyphens (``infra_error=2``).
    """
    verdicts = ["pass"] * passed + ["fail"] * failed
    for key, number in others.items():
        verdicts += [key.replace("_", "-")] * number
    return verdicts


def report(
    scenarios: Mapping[str, Sequence[str] | Sequence[TrialResult] | ScenarioResult],
    *,
    run_id: str = "2026-01-01T00-00-00-0000",
    **meta_overrides: Any,
) -> RunReport:
    """Return a finalized report; each scenario is verdicts, trials or a ScenarioResult."""
    results: dict[str, ScenarioResult] = {}
    for name, value in sorted(scenarios.items()):
        if isinstance(value, ScenarioResult):
            results[name] = value
        elif value and isinstance(value[0], TrialResult):
            results[name] = summarize(list(value))  # type: ignore[arg-type]
        else:
            results[name] = summarize(trials(value))  # type: ignore[arg-type]
    return finalize(RunReport(run_id=run_id, meta=meta(**meta_overrides), scenarios=results))


def write(path: Path, value: RunReport) -> Path:
    """Write ``value`` as ``path/report.json`` (a run directory) and return the directory."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "report.json").write_text(value.to_json(), encoding="utf-8")
    return path
