"""Progress lines and the summary: formats, prefixes and colour rules."""

from __future__ import annotations

import io
import json
import logging
import re
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
from atlante_eval._util.logs import configure_logging
from atlante_eval.report import MetaConfig
from atlante_eval.report.models import Spread
from atlante_eval.run.summary import scenario_result
from atlante_eval.views.progress import ProgressPrinter, format_duration, trial_detail, use_color
from atlante_eval.views.status import RunStatus, clock, remaining_ms

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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
    output = _ANSI.sub("", stream.getvalue())
    assert "s trial 0: pass (98.5s · $0.0123 · 9860 tokens)" in output
    assert "s: 1/1 trials passed" in output


def test_scenario_result_helper_counts() -> None:
    """The helper builds scenario results whose stats count executed trials."""
    result = _result("pass", "fail", "skipped-budget")
    assert isinstance(result.spread, Spread)
    assert result.stats is not None
    assert (result.stats.executed, result.stats.passed) == (2, 1)


def test_terminal_verdicts_are_coloured(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the verdict word takes its colour (pass green, fail red, ...)."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = Tty()
    with ProgressPrinter(stream, live=False) as printer:
        printer(RunStarted("run", 3, 1, "standin", CONFIG))
        for i, verdict in enumerate(("pass", "fail", "infra-error")):
            result = TrialResult(i=i, verdict=verdict, duration_ms=5)  # type: ignore[arg-type]
            printer(TrialFinished("s", i, result))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("\x1b[90mtrial 0: \x1b[0m\x1b[32mpass\x1b[0m\x1b[90m (5ms)")
    assert "\x1b[31mfail\x1b[0m" in lines[1]
    assert "\x1b[33minfra-error\x1b[0m" in lines[2]
    assert _ANSI.sub("", lines[1]) == "trial 1: fail (5ms) — no failing check recorded"


def test_no_color_keeps_verdicts_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR on a terminal: not one escape sequence, verdicts included."""
    monkeypatch.setenv("NO_COLOR", "1")
    stream = Tty()
    with ProgressPrinter(stream) as printer:
        printer(RunStarted("run", 1, 1, "standin", CONFIG))
        printer(TrialFinished("s", 0, TrialResult(i=0, verdict="fail", duration_ms=5)))
    assert stream.getvalue() == "trial 0: fail (5ms) — no failing check recorded\n"


def test_status_counts_timeouts_and_errors_apart() -> None:
    """The status line counts pass, fail, timeout and error (infra-error) apart, others as other."""
    now = [100.0]
    status = RunStatus(now=lambda: now[0])
    assert status.line() == "preparing the run · 0:00"
    status.plan(8, 2)
    for i, verdict in enumerate(("pass", "fail", "timeout", "timeout", "infra-error")):
        status.start("s", i)
        status.finish("s", i, verdict, 4000)
    status.finish("s", 5, "skipped-budget", 0)
    status.start("s", 6)
    now[0] += 65
    assert status.line() == (
        "6/8 done · 1 running · 1 pass · 1 fail · 2 timeout · 1 error · 1 other · 1:05 · ~0:04 left"
    )


def test_eta_comes_from_the_finished_trials_durations() -> None:
    """The ETA: each trial left takes the mean so far, running ones less what they ran."""
    assert remaining_ms(finished=[], running=[], waiting=3, jobs=1) is None
    assert remaining_ms(finished=[1000, 3000], running=[], waiting=3, jobs=1) == 6000
    # two lanes; one running trial half done: (1000 + 3 * 2000) / 2
    assert remaining_ms(finished=[2000], running=[1000.0], waiting=3, jobs=2) == 3500
    # a running trial past the mean adds nothing; one trial left uses one lane
    assert remaining_ms(finished=[2000], running=[5000.0], waiting=1, jobs=4) == 2000
    now = [0.0]
    status = RunStatus(now=lambda: now[0])
    status.plan(4, 1)
    status.start("s", 0)
    now[0] = 30.0
    status.finish("s", 0, "pass", 30_000)
    status.start("s", 1)
    now[0] = 40.0
    # 20 s left of the running trial, 2 more of 30 s each
    assert status.line().endswith("· 0:40 · ~1:20 left")
    assert clock(3725) == "1:02:05"


def test_json_logs_carry_progress_as_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """--log-format json: each progress line is a JSON log event; nothing plain is written."""
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    configure_logging("json")
    try:
        stream = Tty()
        with ProgressPrinter(stream, structured=True) as printer:
            _feed(printer, jobs=1)
    finally:
        configure_logging("none")
        logging.getLogger("atlante_eval").handlers.clear()
    assert stream.getvalue() == ""
    events = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert [e["line"] for e in events] == [
        "== s",
        "trial 0 running...",
        "trial 0: pass (98.5s · $0.0123 · 9860 tokens)",
        f"trial 1: skipped-budget (0ms){SKIPPED_CAUSE}",
        "s: 1/1 trials passed",
    ]
    assert {e["event"] for e in events} == {"progress"}
    assert events[2]["verdict"] == "pass"
    assert events[2]["trial"] == 0
