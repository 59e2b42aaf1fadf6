"""Progress lines and the summary: formats, prefixes and colour rules."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from enginekit import make_scenario

from atlante_eval import (
    RunFinished,
    RunStarted,
    ScenarioFinished,
    ScenarioResult,
    ScenarioStarted,
    TrialFinished,
    TrialResult,
    TrialStarted,
)
from atlante_eval.report import MetaConfig
from atlante_eval.report.models import Spread
from atlante_eval.run.summary import scenario_result
from atlante_eval.views.progress import ProgressPrinter, format_duration, trial_detail, use_color


class Tty(io.StringIO):
    """A text stream that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def _result(*verdicts: str) -> ScenarioResult:
    trials = [TrialResult(i=i, verdict=v, duration_ms=5) for i, v in enumerate(verdicts)]  # type: ignore[arg-type]
    return scenario_result(make_scenario(Path("/x"), "s"), trials)


CONFIG = MetaConfig(
    trials=2,
    timeout_ms=600_000,
    max_sessions=1,
    max_tokens=400_000,
    setup_timeout_ms=120_000,
    check_timeout_default_ms=120_000,
)
SKIPPED_CAUSE = " — maxSessions 1 reached: the trial did not start"


def _feed(printer: ProgressPrinter, *, jobs: int) -> None:
    printer(RunStarted("run", 2, jobs, "standin", CONFIG))
    printer(ScenarioStarted("s"))
    printer(TrialStarted("s", 0))
    first = TrialResult(i=0, verdict="pass", duration_ms=98_500, tokens=9860, cost=0.0123)
    printer(TrialFinished("s", 0, first))
    printer(TrialFinished("s", 1, TrialResult(i=1, verdict="skipped-budget", duration_ms=0)))
    printer(ScenarioFinished("s", _result("pass", "skipped-budget")))
    printer(RunFinished("run", False))


@pytest.mark.parametrize(
    ("ms", "text"), [(0, "0ms"), (9_999, "9999ms"), (10_000, "10.0s"), (98_549, "98.5s")]
)
def test_durations_switch_to_seconds_at_ten(ms: int, text: str) -> None:
    """Under ten seconds durations are in ms, else seconds with one decimal."""
    assert format_duration(ms) == text


def test_trial_detail_joins_duration_cost_and_tokens() -> None:
    """The trial-end detail is duration, then $cost (4 decimals), then tokens."""
    result = TrialResult(i=0, verdict="pass", duration_ms=98_500, tokens=9860, cost=0.0123)
    assert trial_detail(result) == "98.5s · $0.0123 · 9860 tokens"
    assert trial_detail(TrialResult(i=1, verdict="skipped-budget", duration_ms=0)) == "0ms"


def test_sequential_lines_follow_the_reference() -> None:
    """With one job the lines are the reference's, plain on a pipe."""
    stream = io.StringIO()
    with ProgressPrinter(stream) as printer:
        _feed(printer, jobs=1)
    assert stream.getvalue().splitlines() == [
        "== s",
        "trial 0 running...",
        "trial 0: pass (98.5s · $0.0123 · 9860 tokens)",
        f"trial 1: skipped-budget (0ms){SKIPPED_CAUSE}",
        "s: 1/1 trials passed",
    ]


def test_parallel_lines_are_prefixed() -> None:
    """With several jobs, trial lines carry the scenario name and there is no header."""
    stream = io.StringIO()
    with ProgressPrinter(stream) as printer:
        _feed(printer, jobs=4)
    assert stream.getvalue().splitlines() == [
        "s trial 0 running...",
        "s trial 0: pass (98.5s · $0.0123 · 9860 tokens)",
        f"s trial 1: skipped-budget (0ms){SKIPPED_CAUSE}",
        "s: 1/1 trials passed",
    ]


def test_all_skipped_scenario_line() -> None:
    """A scenario with no executed trial says so."""
    stream = io.StringIO()
    with ProgressPrinter(stream) as printer:
        printer(RunStarted("run", 1, 1, "standin"))
        printer(ScenarioFinished("s", _result("skipped-budget")))
    assert stream.getvalue() == "s: no trials executed\n"


def test_terminal_lines_are_grey(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal every line is wrapped in ESC[90m ... ESC[0m."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Tty()
    with ProgressPrinter(stream, live=False) as printer:
        printer(RunStarted("run", 1, 1, "standin"))
        printer(ScenarioStarted("s"))
    assert stream.getvalue() == "\x1b[90m== s\x1b[0m\n"


@pytest.mark.parametrize(("value", "colour"), [("1", False), ("", True), (None, True)])
def test_no_color_rules(monkeypatch: pytest.MonkeyPatch, value: str | None, colour: bool) -> None:
    """A non-empty NO_COLOR disables colour; an empty one does not; pipes never colour."""
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    assert use_color(Tty()) is colour
    assert use_color(io.StringIO()) is False


def test_live_status_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the live status line runs and the progress lines still appear."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Tty()
    with ProgressPrinter(stream) as printer:
        _feed(printer, jobs=2)
    output = stream.getvalue()
    assert "s trial 0: pass (98.5s · $0.0123 · 9860 tokens)" in output
    assert "s: 1/1 trials passed" in output


def test_scenario_result_helper_counts() -> None:
    """The helper builds scenario results whose stats count executed trials."""
    result = _result("pass", "fail", "skipped-budget")
    assert isinstance(result.spread, Spread)
    assert result.stats is not None
    assert (result.stats.executed, result.stats.passed) == (2, 1)
