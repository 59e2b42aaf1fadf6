"""JUnit XML from a run report, for CI systems that show test results.

One ``<testsuite>`` per scenario and one ``<testcase>`` per trial. A trial's verdict
maps to JUnit's outcomes: ``pass`` passes; ``fail``, ``timeout`` and
``budget-exceeded`` are ``<failure>`` (with that ``type``); ``infra-error`` is an
``<error>``; ``skipped-budget`` is ``<skipped>``. Suites carry the scenario's
statistics as ``<properties>``, test cases the trial's tokens, cost, duration and
verdict. A run with arms (``eval.variants``) has every arm's trials in its scenario's
suite, each named ``trial <i> [<arm>]`` with a ``variant`` property, and the suite's
properties give each arm's pass rate (``passRate[<arm>]``). Text is made XML 1.0-safe:
characters XML cannot carry are replaced with U+FFFD, and long evidence is truncated.
See docs/cli.md.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from ..report import (
    CheckResult,
    RunReport,
    ScenarioResult,
    TrialResult,
    arm_names,
    arm_scenarios,
    statistics_of,
)

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_EVIDENCE_CHARS",
    "MAX_MESSAGE_CHARS",
    "junit_xml",
]

#: Longest ``message`` attribute; longer ones end in an ellipsis.
MAX_MESSAGE_CHARS = 500
#: Longest evidence of one check in a failure body.
MAX_EVIDENCE_CHARS = 4_000
#: Longest failure or error body.
MAX_BODY_CHARS = 20_000

_ILLEGAL_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_FAILURE_VERDICTS = frozenset({"fail", "timeout", "budget-exceeded"})
_DEFAULT_MESSAGES = {
    "fail": "a check failed",
    "timeout": "the host session timed out",
    "budget-exceeded": "the trial exceeded its token budget",
    "infra-error": "infrastructure error",
    "skipped-budget": "skipped: the run's session budget was spent",
}


def junit_xml(report: RunReport) -> bytes:
    """Return the JUnit XML document (UTF-8, with an XML declaration) for ``report``."""
    root = ET.Element("testsuites", {"name": f"atlante-eval {_clean(report.run_id)}"})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_ms = 0
    arms = {arm: arm_scenarios(report, arm) for arm in arm_names(report)}
    for name, result in report.scenarios.items():
        each = {arm: scenarios[name] for arm, scenarios in arms.items() if name in scenarios}
        suite, counts, suite_ms = _suite(report, name, result, each)
        root.append(suite)
        for key in totals:
            totals[key] += counts[key]
        total_ms += suite_ms
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(total_ms))
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{text}\n'.encode()


def _suite(
    report: RunReport, name: str, result: ScenarioResult, arms: dict[str, ScenarioResult]
) -> tuple[ET.Element, dict[str, int], int]:
    trials = [t for r in arms.values() for t in r.trials] if arms else result.trials
    verdicts = [t.verdict for t in trials]
    counts = {
        "tests": len(verdicts),
        "failures": sum(1 for v in verdicts if v in _FAILURE_VERDICTS),
        "errors": verdicts.count("infra-error"),
        "skipped": verdicts.count("skipped-budget"),
    }
    duration_ms = sum(t.duration_ms for t in trials)
    suite = ET.Element(
        "testsuite",
        {
            "name": _clean(name),
            **{key: str(value) for key, value in counts.items()},
            "time": _seconds(duration_ms),
        },
    )
    if report.meta.started_at:
        suite.set("timestamp", _clean(report.meta.started_at.removesuffix("Z")[:19]))
    properties = _suite_properties(report, result)
    for arm, arm_result in arms.items():
        properties[f"passRate[{arm}]"] = arm_result.pass_rate
    _properties(suite, properties)
    for trial in trials:
        suite.append(_case(name, trial))
    return suite, counts, duration_ms


def _suite_properties(report: RunReport, result: ScenarioResult) -> dict[str, object]:
    stats = statistics_of(result)
    meta = report.meta
    return {
        "runId": report.run_id,
        "host": meta.host,
        "hostVersion": meta.host_version,
        "model": meta.model,
        "manifestDigest": meta.manifest_digest,
        "passRate": result.pass_rate,
        "passRateGraded": stats.pass_rate_graded,
        "graded": stats.graded,
        "infraErrors": stats.infra_errors,
        "wilson95Lower": stats.wilson95[0],
        "wilson95Upper": stats.wilson95[1],
        "stability": stats.stability,
        "meanDurationMs": result.mean_duration_ms,
        "durationP95Ms": result.spread.duration_p95_ms,
        "tokens": result.tokens,
        "cost": result.cost,
        "fingerprint": result.fingerprint,
        "source": result.source,
    }


def _case(scenario: str, trial: TrialResult) -> ET.Element:
    case = ET.Element(
        "testcase",
        {
            "classname": _clean(scenario),
            "name": f"trial {trial.i}"
            + (f" [{_clean(trial.variant)}]" if trial.variant is not None else ""),
            "time": _seconds(trial.duration_ms),
        },
    )
    _properties(
        case,
        {
            "verdict": trial.verdict,
            "durationMs": trial.duration_ms,
            "tokens": trial.tokens,
            "cost": trial.cost,
            "model": trial.model,
            "variant": trial.variant,
        },
    )
    verdict = trial.verdict
    if verdict == "skipped-budget":
        ET.SubElement(case, "skipped", {"message": _message(trial.error, verdict)})
    elif verdict == "infra-error":
        outcome = ET.SubElement(
            case, "error", {"type": verdict, "message": _message(trial.error, verdict)}
        )
        outcome.text = _body(_infra_body(trial))
    elif verdict in _FAILURE_VERDICTS:
        failing = [c for c in trial.checks or () if c.verdict != "pass"]
        summary = (
            "checks not passed: " + ", ".join(f"#{c.index} {c.type} ({c.verdict})" for c in failing)
            if failing and verdict == "fail"
            else trial.error
        )
        outcome = ET.SubElement(
            case, "failure", {"type": verdict, "message": _message(summary, verdict)}
        )
        outcome.text = _body(_failure_body(trial, failing))
    return case


def _failure_body(trial: TrialResult, failing: list[CheckResult]) -> str:
    parts = [trial.error] if trial.error else []
    for check in failing:
        evidence = json.dumps(check.evidence, indent=2, ensure_ascii=False, sort_keys=True)
        parts.append(
            f"check #{check.index} {check.type}: {check.verdict}\n"
            + _truncate(evidence, MAX_EVIDENCE_CHARS)
        )
    return "\n\n".join(parts)


def _infra_body(trial: TrialResult) -> str:
    parts = [trial.error or _DEFAULT_MESSAGES["infra-error"]]
    for number, attempt in enumerate(trial.attempts or (), start=1):
        parts.append(f"earlier attempt {number}: {attempt.error or attempt.verdict}")
    return "\n\n".join(parts)


def _properties(parent: ET.Element, values: dict[str, object]) -> None:
    present = {key: value for key, value in values.items() if value is not None}
    if not present:
        return
    properties = ET.SubElement(parent, "properties")
    for key, value in present.items():
        ET.SubElement(properties, "property", {"name": key, "value": _clean(_text(value))})


def _text(value: object) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _message(text: str | None, verdict: str) -> str:
    line = " ".join((text or _DEFAULT_MESSAGES[verdict]).split())
    return _clean(_truncate(line, MAX_MESSAGE_CHARS))


def _body(text: str) -> str:
    return _clean(_truncate(text, MAX_BODY_CHARS))


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _clean(text: str) -> str:
    """Replace characters XML 1.0 cannot carry (controls, lone surrogates, U+FFFE/F)."""
    return _ILLEGAL_XML.sub("\ufffd", text)


def _seconds(milliseconds: int) -> str:
    return f"{milliseconds / 1000:.3f}"
