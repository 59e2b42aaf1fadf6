"""Terminal rendering of a run: progress lines on stderr, the summary on stdout.

With one job, progress lines are the reference's (``== name``, ``trial 0
running...``, ``trial 0: pass (98ms)``, ``name: 1/1 trials passed``). With
parallel trials every line is prefixed with its scenario name. A trial that did
not pass gets its cause after the reference's line (``trial 0: fail (98ms) —
check 2 file-contains: ...``, see :mod:`atlante_eval.views.causes`). On an interactive
stderr a live status line (done/total, running, pass/fail, elapsed, ticking every
second) stays at the bottom and owns the terminal: progress lines and anything
written to ``sys.stderr`` meanwhile (``--log-format`` logs) are printed above it.
Lines are grey there; piped output or a non-empty ``NO_COLOR`` gives plain lines.
Untrusted text (scenario names, errors, evidence) is shown with its control
characters escaped.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported only when a live status line or its text is drawn
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

from .._util.logs import get_logger
from .._util.terminal import first_line, printable, shorten, use_color
from ..report import (
    DiagnosticNotice,
    HostInstallProgress,
    MetaConfig,
    ProgressEvent,
    RunFinished,
    RunReport,
    RunStarted,
    ScenarioFinished,
    ScenarioLooked,
    ScenarioResult,
    ScenarioStarted,
    ShardBalance,
    TrialFinished,
    TrialResult,
    TrialStarted,
)
from .causes import check_failures, no_graded_note, trial_cause
from .run_setup import setup_line
from .status import RunStatus

__all__ = [
    "ProgressPrinter",
    "format_duration",
    "render_summary",
    "trial_detail",
    "trial_line",
    "unmonitored_warning",
    "use_color",
]

_GREY = "\x1b[90m"
_YELLOW = "\x1b[33m"
_GREEN = "\x1b[32m"
_RESET = "\x1b[0m"
_LOG = get_logger("atlante_eval.progress")
#: Separates the reference's trial line from the cause.
CAUSE_SEPARATOR = " — "


def format_duration(ms: int) -> str:
    """``<n>ms`` under ten seconds, else seconds with one decimal."""
    if ms < 10_000:
        return f"{ms}ms"
    return f"{ms / 1000:.1f}s"


def trial_detail(result: TrialResult) -> str:
    """``98.5s · $0.0123 · 9860 tokens`` for a trial-end line."""
    parts = [format_duration(result.duration_ms)]
    if result.cost is not None:
        parts.append(f"${result.cost:.4f}")
    if result.tokens is not None:
        parts.append(f"{result.tokens} tokens")
    return " · ".join(parts)


def trial_line(result: TrialResult, config: MetaConfig | None = None, *, prefix: str = "") -> str:
    """``trial 0: fail (98ms) — check 2 file-contains: ...``: the reference's line and the cause."""
    return "".join(_trial_parts(result, config, prefix=prefix))


def _trial_parts(
    result: TrialResult, config: MetaConfig | None, *, prefix: str, variant: str | None = None
) -> tuple[str, str, str]:
    """The trial line in three: before the verdict, the verdict, and after it."""
    cause = trial_cause(result, config)
    tail = f" ({trial_detail(result)})" + ("" if cause is None else f"{CAUSE_SEPARATOR}{cause}")
    return f"{prefix}trial {result.i}{arm_label(variant)}: ", result.verdict, tail


def arm_label(variant: str | None) -> str:
    """`` [<arm>]`` after a trial's index in a run with arms, else ``""``."""
    return "" if variant is None else f" [{variant}]"


def _arm_fields(variant: str | None) -> dict[str, Any]:
    """The structured log's ``variant`` field of a trial in a run with arms."""
    return {} if variant is None else {"variant": variant}


#: The colour of each verdict word on a terminal (rich style names and ANSI codes).
VERDICT_COLORS: dict[str, tuple[str, str]] = {
    "pass": ("green", "\x1b[32m"),
    "fail": ("red", "\x1b[31m"),
    "timeout": ("red", "\x1b[31m"),
    "budget-exceeded": ("red", "\x1b[31m"),
    "infra-error": ("yellow", _YELLOW),
}


class _Discard(io.StringIO):
    """Where progress goes once the terminal is gone."""

    def write(self, text: str) -> int:
        return len(text)


class _Status:
    """The live status line, rendered afresh on every refresh so its clock ticks."""

    def __init__(self, printer: ProgressPrinter) -> None:
        self.printer = printer

    def __rich__(self) -> Text:
        return self.printer.status()


class ProgressPrinter:
    """Turns progress events into stderr lines and an optional live status line.

    With ``structured`` (``--log-format json``) every line is a JSON log event
    (``progress``, or ``diagnostic``) in the log stream instead, with no status
    line and no colour, so stderr holds nothing but JSON lines.
    """

    def __init__(
        self, stream: IO[str], *, live: bool | None = None, structured: bool = False
    ) -> None:
        self.stream = stream
        self.structured = structured
        self.color = use_color(stream) and not structured
        self.live_enabled = (self.color if live is None else live) and not structured
        self.parallel = False
        self.config: MetaConfig | None = None
        self.run_status = RunStatus()
        self._live: Live | None = None
        self._console: Console | None = None

    def __enter__(self) -> ProgressPrinter:
        if self.live_enabled:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
            # Redirecting sys.stderr makes every other writer to it (logs, notices) print
            # above the status line instead of through it. stdout stays untouched: it
            # carries data (--json) that must not end up on stderr.
            self._live = Live(
                _Status(self),
                console=self._console,
                transient=True,
                auto_refresh=True,
                refresh_per_second=4,
                redirect_stdout=False,
                redirect_stderr=True,
            )
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
                live.stop()

    def _line(self, text: str, *, parts: tuple[str, str, str] | None = None, **fields: Any) -> None:
        """Print one line; ``parts`` is a trial line in three, its middle the verdict to colour."""
        try:
            self._write(text, parts=parts, **fields)
        except OSError:
            # The terminal closed under the run (SIGHUP): progress has nowhere to go,
            # the run goes on to its report.
            self._gone()

    def _gone(self) -> None:
        """Stop writing: the stream cannot take what we print."""
        self.live_enabled = False
        self.stream = _Discard()
        if self._live is not None:
            live, self._live = self._live, None
            with contextlib.suppress(OSError):
                live.stop()
        self._console = None

    def _write(self, text: str, *, parts: tuple[str, str, str] | None, **fields: Any) -> None:
        head, word, tail = (printable(part, multiline=True) for part in parts or (text, "", ""))
        if self.structured:
            _LOG.info("progress", line=head + word + tail, **fields)
            return
        colour = VERDICT_COLORS.get(word) if parts is not None else None
        if self._console is not None:
            from rich.text import Text

            line = Text(head, style="bright_black")
            line.append(word, style=colour[0] if colour else "bright_black")
            line.append(tail, style="bright_black")
            self._console.print(line)
        else:
            rendered = head + word + tail
            if self.color:
                middle = f"{_RESET}{colour[1]}{word}{_RESET}{_GREY}" if colour else word
                rendered = f"{_GREY}{head}{middle}{tail}{_RESET}"
            self.stream.write(rendered + "\n")
            self.stream.flush()
        if self._live is not None:
            self._live.refresh()

    def status(self) -> Text:
        """The status line: totals, what runs, verdicts so far, the elapsed time and the ETA."""
        from rich.text import Text

        return Text(self.run_status.line())

    def _notice(self, event: DiagnosticNotice) -> None:
        diagnostic = event.diagnostic
        if self.structured:
            log = _LOG.error if diagnostic.severity == "error" else _LOG.warning
            log(
                "diagnostic",
                code=diagnostic.code,
                severity=diagnostic.severity,
                message=printable(diagnostic.message, multiline=True),
                next=printable(diagnostic.next or "", multiline=True) or None,
            )
            return
        from ..diagnostics import format_diagnostic

        self._line(format_diagnostic(diagnostic))

    def __call__(self, event: ProgressEvent) -> None:
        """Render one event."""
        prefix = ""
        if isinstance(event, TrialStarted | TrialFinished) and self.parallel:
            prefix = f"{event.scenario} "
        if isinstance(event, DiagnosticNotice):
            self._notice(event)
        elif isinstance(event, HostInstallProgress):
            from .hosts_render import install_line

            self._line(install_line(event))
        elif isinstance(event, RunStarted):
            self.run_status.plan(event.total, event.jobs)
            self.config = event.config
            self.parallel = event.jobs > 1
        elif isinstance(event, ScenarioStarted):
            if not self.parallel:
                self._line(f"== {event.scenario}", scenario=event.scenario)
        elif isinstance(event, TrialStarted):
            self.run_status.start(_status_key(event.scenario, event.variant), event.trial)
            self._line(
                f"{prefix}trial {event.trial}{arm_label(event.variant)} running..."
                f"{attempt_note(event)}",
                scenario=event.scenario,
                trial=event.trial,
                **_arm_fields(event.variant),
            )
        elif isinstance(event, TrialFinished):
            self._finished(event, prefix)
        elif isinstance(event, ScenarioFinished):
            self._scenario_finished(event)
        elif isinstance(event, ScenarioLooked):
            from .adaptive_render import look_line

            self._line(look_line(event), scenario=event.scenario)
        elif isinstance(event, RunFinished) and self._live is not None:
            self._live.refresh()

    def _finished(self, event: TrialFinished, prefix: str) -> None:
        result = event.result
        self.run_status.finish(
            _status_key(event.scenario, event.variant),
            event.trial,
            result.verdict,
            result.duration_ms,
        )
        self._line(
            "",
            parts=_trial_parts(result, self.config, prefix=prefix, variant=event.variant),
            scenario=event.scenario,
            trial=event.trial,
            verdict=result.verdict,
            duration_ms=result.duration_ms,
            **_arm_fields(event.variant),
        )

    def _scenario_finished(self, event: ScenarioFinished) -> None:
        passed, executed = _passed(event.result)
        arms = "".join(
            " · [{}] {}/{}".format(arm, *_passed(result))
            for arm, result in (event.result.arms or {}).items()
        )
        if executed == 0:
            self._line(f"{event.scenario}: no trials executed{arms}", scenario=event.scenario)
        else:
            self._line(
                f"{event.scenario}: {passed}/{executed} trials passed{arms}",
                scenario=event.scenario,
            )


def _passed(result: ScenarioResult) -> tuple[int, int]:
    """A scenario's (or an arm's) passing and executed trials."""
    stats = result.stats
    return (stats.passed, stats.executed) if stats else (0, len(result.trials))


def _verdict_lines(result: ScenarioResult, config: MetaConfig | None) -> list[str]:
    """``  check 2 file-contains failed 2/3`` and ``  timeout 1/3: timeout after ...``."""
    lines = [f"  {failure.describe()}" for failure in check_failures(result)]
    ran = [t for t in result.trials if not t.not_started]
    counts = Counter(t.verdict for t in ran)
    for verdict in ("timeout", "budget-exceeded", "infra-error", "skipped-budget"):
        if not counts[verdict]:
            continue
        first = next(t for t in ran if t.verdict == verdict)
        cause = trial_cause(first, config)
        lines.append(f"  {verdict} {counts[verdict]}/{len(ran)}: {cause}")
    left = len(result.trials) - len(ran)
    if left:
        lines.append(f"  not started {left}/{len(result.trials)}: the run was interrupted first")
    return lines


def _status_key(scenario: str, variant: str | None) -> str:
    """Which running trial the status line tracks: each arm's trials apart."""
    return scenario if variant is None else f"{scenario}@{variant}"


def attempt_note(event: TrialStarted) -> str:
    """`` (attempt 2/3, after infra-error: <why>)`` on a ``--retry-infra`` retry, else ``""``."""
    if not event.retry:
        return ""
    why = printable(first_line(event.previous or "")) or "no error recorded"
    return f" (attempt {event.attempt}/{event.attempts}, after infra-error: {shorten(why, 120)})"


def partial_note(report: RunReport) -> list[str]:
    """``the run was interrupted; 2 trials never started and count in no pass rate`` (or none)."""
    if not report.meta.interrupted:
        return []
    left = sum(1 for t in report.all_trials() if t.not_started)
    if not left:
        return ["the run was interrupted; unfinished trials are infra-errors"]
    trials = "trial never started and counts" if left == 1 else "trials never started and count"
    return [f"the run was interrupted; {left} {trials} in no pass rate"]


def scenario_line(name: str, result: ScenarioResult) -> str:
    """``name: pass 67% · mean 98ms · p95 120ms``, or ``name: not run (3 skipped-budget)``."""
    note = no_graded_note(result)
    if note is not None:
        return f"{printable(name)}: {note}"
    return (
        f"{printable(name)}: pass {round(result.pass_rate * 100)}% · "
        f"mean {format_duration(result.mean_duration_ms)} · "
        f"p95 {format_duration(result.spread.duration_p95_ms)}"
    )


def balance_lines(record: ShardBalance) -> list[str]:
    """How a split balanced by duration was expected to go, and how long the shards took."""
    lines = [
        f"shards balanced by duration (run {printable(record.from_run_id)}): longest expected "
        f"{format_duration(record.expected_makespan_ms)} (round robin "
        f"{format_duration(record.round_robin_makespan_ms)})"
    ]
    for load in record.shards:
        took = f" · took {format_duration(load.actual_ms)}" if load.actual_ms is not None else ""
        lines.append(
            f"  shard {load.shard}: {load.trials} trials · expected "
            f"{format_duration(load.expected_ms)}{took}"
        )
    return lines


#: Most trials an "unmonitored" warning names; the rest are counted.
UNMONITORED_NAMED = 10


def unmonitored_warning(report: RunReport) -> str | None:
    """``token budget unmonitored for 2 trials (...): alpha:0, beta:1``, escaped; or ``None``.

    Names the trials whose host reported no usage, so ``maxTokens`` could not be
    enforced on them (the first :data:`UNMONITORED_NAMED`, then how many more).
    """
    names = [
        f"{printable(name)}:{trial.i}"
        for name, result in report.scenarios.items()
        for trial in result.trials
        if trial.budget_unmonitored
    ]
    if not names:
        return None
    shown = ", ".join(names[:UNMONITORED_NAMED])
    more = len(names) - UNMONITORED_NAMED
    noun = "trial" if len(names) == 1 else "trials"
    return (
        f"token budget unmonitored for {len(names)} {noun} (no usage events were observed): "
        f"{shown}{f' and {more} more' if more > 0 else ''}"
    )


def _sections(report: RunReport) -> list[str]:
    """The summary's optional sections: arms, the shard balance, the adaptive record."""
    lines: list[str] = []
    if report.uplift is not None:
        from .arms_render import arm_table_lines

        lines += ["", *arm_table_lines(report)]
    if report.meta.shard_balance is not None:
        lines += ["", *balance_lines(report.meta.shard_balance)]
    if report.adaptive is not None:
        from .adaptive_render import summary_lines

        lines += ["", *summary_lines(report.adaptive)]
    return lines


def render_summary(
    report: RunReport, report_path: Path, *, color: bool, html: Path | None = None
) -> str:
    """The human summary printed on stdout after a run."""

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    meta = report.meta
    lines = [f"eval {printable(report.run_id)}", printable(setup_line(meta))]
    unmonitored = unmonitored_warning(report)
    if unmonitored is not None:
        lines.append(f"{paint(_YELLOW, 'warning:')} {unmonitored}")
    lines.extend(f"{paint(_YELLOW, 'partial report:')} {note}" for note in partial_note(report))
    for name, result in report.scenarios.items():
        lines.append("")
        lines.append(scenario_line(name, result))
        lines.extend(_verdict_lines(result, meta.config))
    totals = meta.totals
    if totals is not None and totals.trials:
        counts = " · ".join(f"{verdict} {count}" for verdict, count in totals.verdicts.items())
        lines.append("")
        lines.append(f"trials {totals.trials} · {counts}")
        if totals.tokens or totals.cost:
            lines.append(f"tokens {totals.tokens} · cost ${totals.cost:.4f}")
    lines.extend(_sections(report))
    if meta.run_root:
        lines.append("")
        lines.append(f"sandboxes kept in {printable(meta.run_root)}")
    lines.append("")
    for label, path in (("report", report_path), ("html", html)):
        if path is None:
            continue
        try:
            shown = os.path.relpath(path)
        except ValueError:
            shown = str(path)
        lines.append(f"{paint(_GREEN, label)} {paint(_GREY, printable(shown))}")
    return "\n".join(lines)
