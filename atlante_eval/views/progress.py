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

import os
import time
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only when a live status line or its text is drawn
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

from .._util.terminal import printable, use_color
from ..report import (
    DiagnosticNotice,
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
from .causes import check_failures, no_graded_note, trial_cause, verdict_counts

__all__ = [
    "ProgressPrinter",
    "format_duration",
    "render_summary",
    "trial_detail",
    "trial_line",
    "use_color",
]

_GREY = "\x1b[90m"
_YELLOW = "\x1b[33m"
_GREEN = "\x1b[32m"
_RESET = "\x1b[0m"
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
    line = f"{prefix}trial {result.i}: {result.verdict} ({trial_detail(result)})"
    cause = trial_cause(result, config)
    return line if cause is None else f"{line}{CAUSE_SEPARATOR}{cause}"


class _Status:
    """The live status line, rendered afresh on every refresh so its clock ticks."""

    def __init__(self, printer: ProgressPrinter) -> None:
        self.printer = printer

    def __rich__(self) -> Text:
        return self.printer.status()


class ProgressPrinter:
    """Turns progress events into stderr lines and an optional live status line."""

    def __init__(self, stream: IO[str], *, live: bool | None = None) -> None:
        self.stream = stream
        self.color = use_color(stream)
        self.live_enabled = self.color if live is None else live
        self.parallel = False
        self.total: int | None = None
        self.config: MetaConfig | None = None
        self.running: set[tuple[str, int]] = set()
        self.verdicts: Counter[str] = Counter()
        self.started = time.monotonic()
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
            self._live.stop()
            self._live = None

    def _line(self, text: str) -> None:
        text = printable(text, multiline=True)
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text(text, style="bright_black"))
        else:
            rendered = f"{_GREY}{text}{_RESET}" if self.color else text
            self.stream.write(rendered + "\n")
            self.stream.flush()
        if self._live is not None:
            self._live.refresh()

    def status(self) -> Text:
        """The status line: totals, what runs, verdicts so far and the elapsed time."""
        from rich.text import Text

        elapsed = int(time.monotonic() - self.started)
        clock = f"{elapsed // 60}:{elapsed % 60:02d}"
        if self.total is None:
            return Text(f"preparing the run · {clock}")
        done = sum(self.verdicts.values())
        others = done - self.verdicts["pass"] - self.verdicts["fail"]
        return Text(
            f"{done}/{self.total} done · {len(self.running)} running · "
            f"{self.verdicts['pass']} pass · {self.verdicts['fail']} fail · {others} other · "
            f"{clock}"
        )

    def __call__(self, event: ProgressEvent) -> None:
        """Render one event."""
        prefix = ""
        if isinstance(event, TrialStarted | TrialFinished) and self.parallel:
            prefix = f"{event.scenario} "
        if isinstance(event, DiagnosticNotice):
            from ..diagnostics import format_diagnostic

            self._line(format_diagnostic(event.diagnostic))
        elif isinstance(event, RunStarted):
            self.total = event.total
            self.config = event.config
            self.parallel = event.jobs > 1
        elif isinstance(event, ScenarioStarted):
            if not self.parallel:
                self._line(f"== {event.scenario}")
        elif isinstance(event, TrialStarted):
            self.running.add((event.scenario, event.trial))
            self._line(f"{prefix}trial {event.trial} running...")
        elif isinstance(event, TrialFinished):
            self.running.discard((event.scenario, event.trial))
            self.verdicts[event.result.verdict] += 1
            self._line(trial_line(event.result, self.config, prefix=prefix))
        elif isinstance(event, ScenarioFinished):
            stats = event.result.stats
            executed = stats.executed if stats else len(event.result.trials)
            passed = stats.passed if stats else 0
            if executed == 0:
                self._line(f"{event.scenario}: no trials executed")
            else:
                self._line(f"{event.scenario}: {passed}/{executed} trials passed")
        elif isinstance(event, ScenarioLooked):
            from .adaptive_render import look_line

            self._line(look_line(event))
        elif isinstance(event, RunFinished) and self._live is not None:
            self._live.refresh()


def _verdict_lines(result: ScenarioResult, config: MetaConfig | None) -> list[str]:
    """``  check 2 file-contains failed 2/3`` and ``  timeout 1/3: timeout after ...``."""
    lines = [f"  {failure.describe()}" for failure in check_failures(result)]
    counts = verdict_counts(result)
    total = len(result.trials)
    for verdict in ("timeout", "budget-exceeded", "infra-error", "skipped-budget"):
        if not counts[verdict]:
            continue
        first = next(t for t in result.trials if t.verdict == verdict)
        cause = trial_cause(first, config)
        lines.append(f"  {verdict} {counts[verdict]}/{total}: {cause}")
    return lines


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


def render_summary(
    report: RunReport, report_path: Path, *, color: bool, html: Path | None = None
) -> str:
    """The human summary printed on stdout after a run."""

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    meta = report.meta
    lines = [
        f"eval {printable(report.run_id)}",
        f"host {printable(meta.host)} · model {printable(meta.model)}",
    ]
    if any(t.budget_unmonitored for t in report.all_trials()):
        lines.append(
            f"{paint(_YELLOW, 'warning:')} token budget unmonitored for one or more trials "
            "(no usage events were observed)"
        )
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
    if meta.shard_balance is not None:
        lines.append("")
        lines.extend(balance_lines(meta.shard_balance))
    if report.adaptive is not None:
        from .adaptive_render import summary_lines

        lines.append("")
        lines.extend(summary_lines(report.adaptive))
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
