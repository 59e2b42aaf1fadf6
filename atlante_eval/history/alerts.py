"""After a run: a webhook message when scenarios regressed, and the GitHub step summary.

The message (:class:`AlertMessage`, documented in docs/history.md) carries a
Slack-compatible ``text`` and the structured facts: the run, the blessed baseline,
each regressed scenario that is not quarantined (with its behaviour-delta
``cause`` when a cause finder is given), and the regressed scenarios the
quarantine held back. Delivery failures are returned, never raised past the run.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from ..report import OutputModel, RunReport
from ..report.compare import CompareResult, Comparison, compare_reports
from .models import Blessing, Quarantine

__all__ = [
    "ALERT_FORMAT",
    "AlertBaseline",
    "AlertError",
    "AlertMessage",
    "AlertRun",
    "AlertScenario",
    "CauseFinder",
    "post_webhook",
    "regression_alert",
    "step_summary",
    "write_step_summary",
]

#: The ``format`` of every alert message; bumped only for an incompatible change.
ALERT_FORMAT = "atlante-eval/alert/v1"
#: Seconds a webhook may take to answer.
WEBHOOK_TIMEOUT_S = 10.0
#: Finds the behaviour-delta cause of a scenario's regression (``None``: none found).
CauseFinder = Callable[[str, RunReport, RunReport], str | None]


class AlertRun(OutputModel):
    """The run the alert is about."""

    run_id: str
    """Its run id."""
    host: str
    """Host."""
    host_version: str | None
    """Host version."""
    model: str
    """Model."""
    arm: str | None
    """Arm (variant); null for a run of one harness."""
    harness: str | None
    """Manifest digest (the harness revision)."""
    started_at: str | None
    """UTC start."""
    partial: bool
    """The run stopped part-way."""
    report: str | None
    """Where its report was published."""


class AlertBaseline(OutputModel):
    """The blessed baseline the run was compared with."""

    name: str
    """Baseline name."""
    run_id: str
    """The blessed run."""
    blessed_by: str
    """Who blessed it."""
    blessed_at: str
    """When."""


class AlertScenario(OutputModel):
    """A regressed scenario."""

    scenario: str
    """Its name."""
    base_passed: int
    """Baseline passes."""
    base_graded: int
    """Baseline graded trials."""
    head_passed: int
    """This run's passes."""
    head_graded: int
    """This run's graded trials."""
    difference: float
    """Pass-rate change, HEAD - BASE (0-1 scale)."""
    difference_interval: tuple[float, float]
    """Its interval."""
    adjusted_p: float
    """Adjusted p-value."""
    cause: str | None = None
    """The behaviour-delta cause, where one was found."""


class AlertMessage(OutputModel):
    """The JSON a webhook receives."""

    format: str = ALERT_FORMAT
    """Always ``atlante-eval/alert/v1``."""
    text: str
    """A one-message summary (Slack mrkdwn; also readable as plain text)."""
    run: AlertRun
    """The run."""
    baseline: AlertBaseline
    """The baseline."""
    regressed: list[AlertScenario]
    """Regressed scenarios that are not quarantined (never empty in a sent alert)."""
    quarantined: list[str]
    """Regressed scenarios the quarantine held back."""


class AlertError(Exception):
    """Raised by :func:`post_webhook` when the webhook did not take the message."""


def regression_alert(
    report: RunReport,
    baseline: RunReport,
    blessing: Blessing,
    *,
    quarantined: Mapping[str, Quarantine],
    report_file: str | None = None,
    cause_of: CauseFinder | None = None,
) -> tuple[AlertMessage | None, CompareResult]:
    """Compare ``report`` with its baseline; an alert when a non-quarantined scenario regressed."""
    result = compare_reports(baseline, report)
    regressed = sorted(n for n, c in result.scenarios.items() if c.verdict == "regressed")
    held = [n for n in regressed if n in quarantined]
    alerted = [
        _scenario(
            name, result.scenarios[name], cause_of(name, baseline, report) if cause_of else None
        )
        for name in regressed
        if name not in quarantined
    ]
    if not alerted:
        return None, result
    meta = report.meta
    run = AlertRun(
        run_id=report.run_id,
        host=meta.host,
        host_version=meta.host_version,
        model=meta.model,
        arm=None,
        harness=meta.manifest_digest,
        started_at=meta.started_at,
        partial=bool(meta.interrupted) or meta.shard is not None,
        report=report_file,
    )
    base = AlertBaseline(
        name=blessing.name,
        run_id=blessing.run_id,
        blessed_by=blessing.blessed_by,
        blessed_at=blessing.blessed_at,
    )
    message = AlertMessage(
        text=_text(run, base, alerted, held),
        run=run,
        baseline=base,
        regressed=alerted,
        quarantined=held,
    )
    return message, result


def _scenario(name: str, comparison: Comparison, cause: str | None) -> AlertScenario:
    return AlertScenario(
        scenario=name,
        base_passed=comparison.base.passed,
        base_graded=comparison.base.graded,
        head_passed=comparison.head.passed,
        head_graded=comparison.head.graded,
        difference=comparison.difference,
        difference_interval=comparison.difference_interval,
        adjusted_p=comparison.adjusted_p,
        cause=cause,
    )


def _slack(text: str) -> str:
    """Escape the three characters Slack's mrkdwn reads as markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _pct(passed: int, graded: int) -> str:
    return f"{passed}/{graded} ({round(100 * passed / graded)}%)" if graded else "0/0"


def _text(run: AlertRun, base: AlertBaseline, alerted: list[AlertScenario], held: list[str]) -> str:
    count = len(alerted)
    lines = [
        f"atlante-eval: {count} scenario{'s' if count != 1 else ''} regressed in run "
        f"{_slack(run.run_id)} against baseline {_slack(base.name)} ({_slack(base.run_id)}) · "
        f"{_slack(run.host)} {_slack(run.host_version or '')} · {_slack(run.model)}"
        + (" · partial run" if run.partial else "")
    ]
    for item in alerted:
        low, high = item.difference_interval
        line = (
            f"• {_slack(item.scenario)}: {_pct(item.base_passed, item.base_graded)} → "
            f"{_pct(item.head_passed, item.head_graded)}, {100 * item.difference:+.0f} pts "
            f"[{100 * low:+.0f}, {100 * high:+.0f}]"
        )
        if item.cause:
            line += f" — {_slack(item.cause)}"
        lines.append(line)
    if held:
        lines.append("quarantined, not alerted: " + ", ".join(_slack(n) for n in held))
    return "\n".join(lines)


def post_webhook(url: str, message: AlertMessage, *, timeout: float = WEBHOOK_TIMEOUT_S) -> None:
    """POST ``message`` as JSON to ``url``.

    Raises:
        AlertError: the URL is not http(s), or the webhook did not answer 2xx in time.
    """
    if not url.lower().startswith(("http://", "https://")):
        raise AlertError("the webhook must be an http:// or https:// URL")
    body = message.model_dump_json(by_alias=True).encode("utf-8")
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "atlante-eval"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310
            answer.read(65536)
    except urllib.error.HTTPError as exc:
        raise AlertError(f"the webhook answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AlertError(f"the webhook could not be reached: {reason}") from None


def _md(text: str) -> str:
    """Escape text for a Markdown table cell (GitHub renders inline HTML: escape it too)."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return escaped.replace("|", "\\|").replace("`", "\\`").replace("\n", " ")


def step_summary(
    report: RunReport,
    *,
    blessing: Blessing | None,
    comparison: CompareResult | None,
    quarantined: Mapping[str, Quarantine],
) -> str:
    """The run as GitHub-flavoured Markdown: per scenario its result and its baseline verdict."""
    meta = report.meta
    lines = [
        f"## atlante-eval run {_md(report.run_id)}",
        "",
        f"host {_md(meta.host)} {_md(meta.host_version or '')} · model {_md(meta.model)}"
        + (" · **partial run**" if meta.interrupted else ""),
        "",
        f"baseline: {_md(blessing.name)} = run {_md(blessing.run_id)} (blessed by "
        f"{_md(blessing.blessed_by)})"
        if blessing
        else "baseline: none blessed (`atlante-eval history bless RUN_ID --reason ...`)",
        "",
        "| scenario | passed | vs baseline | note |",
        "| --- | --- | --- | --- |",
    ]
    for name, result in report.scenarios.items():
        graded = sum(1 for t in result.trials if t.verdict not in ("infra-error", "skipped-budget"))
        passed = sum(1 for t in result.trials if t.verdict == "pass")
        verdict: str = (
            comparison.scenarios[name].verdict
            if comparison and name in comparison.scenarios
            else ""
        )
        held = quarantined.get(name)
        note = f"quarantined: {_md(held.reason)}" if held else ""
        if verdict == "regressed" and not held:
            verdict = "**regressed**"
        lines.append(f"| {_md(name)} | {_pct(passed, graded)} | {verdict} | {note} |")
    return "\n".join(lines) + "\n"


def write_step_summary(text: str, path: str | None = None) -> Path | None:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` (or ``path``); None when neither is set."""
    target = path or os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with Path(target).open("a", encoding="utf-8") as handle:
        handle.write(text + "\n")
    return Path(target)
