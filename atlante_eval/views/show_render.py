"""Draw ``atlante-eval show`` views with rich: plain text on a pipe, styled on a terminal.

Every piece of recorded text (scenario names, errors, evidence, diffs, the
agent's words and tool inputs) is untrusted: it goes through
:func:`atlante_eval._util.terminal.printable` and into :class:`rich.text.Text` objects,
never into markup, so neither escape sequences nor rich markup in it can act.
On a terminal the diff is syntax-highlighted; elsewhere it prints as is.
"""

from __future__ import annotations

import json
from typing import IO, Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from .._util.terminal import printable, shorten
from ..transcript.model_calls import ModelCall
from .arms_render import arm_table_text
from .causes import describe_failure
from .diff_parts import split_diff
from .output import output_excerpt
from .progress import CAUSE_SEPARATOR, format_duration
from .show import RunView, ScenarioSummary, ScenarioView
from .trial import CheckView, TimelineEntry, TrialView

__all__ = [
    "make_console",
    "model_call_lines",
    "render_run",
    "render_scenario",
    "render_trial",
    "timeline_lines",
]

#: Longest shortened value (tool input or output, evidence field) in one line.
VALUE_WIDTH = 160

_VERDICT_STYLE = {"pass": "green", "fail": "red", "error": "red"}
_KIND_STYLE = {
    "tool-call": "cyan",
    "text": "default",
    "skill": "magenta",
    "subagent": "magenta",
    "usage": "bright_black",
    "error": "red",
    "result": "bold",
    "raw": "yellow",
    "truncated": "yellow",
}
_KIND_LABEL = {"tool-call": "tool", "session-start": "session"}


def make_console(stream: IO[str], *, color: bool) -> Console:
    """A console that never interprets markup or emoji codes in what it prints."""
    return Console(
        file=stream,
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )


def _safe(value: object, width: int | None = VALUE_WIDTH) -> str:
    text = printable(value if isinstance(value, str) else _compact(value))
    return shorten(text, width) if width is not None else text


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _verdict(verdict: str) -> Text:
    return Text(printable(verdict), style=_VERDICT_STYLE.get(verdict, "yellow"))


def _percent(value: float) -> str:
    return f"{round(value * 100)}%"


def _summary_line(summary: ScenarioSummary) -> Text:
    line = Text(f"{printable(summary.name)}: ", style="bold")
    if summary.note is not None:
        line.append(summary.note, style="yellow")
    else:
        line.append(f"pass {_percent(summary.pass_rate)}")
        if summary.pass_rate_graded is not None and summary.wilson95 is not None:
            low, high = summary.wilson95
            line.append(
                f" ({summary.passed}/{summary.graded} graded, "
                f"95% interval [{_percent(low)}, {_percent(high)}])"
            )
        line.append(
            f" · mean {format_duration(summary.mean_duration_ms)}"
            f" · p95 {format_duration(summary.duration_p95_ms)}"
        )
    counts = " · ".join(f"{printable(v)} {n}" for v, n in sorted(summary.verdicts.items()))
    line.append(f" · {counts}" if counts else "")
    return line


def _failing_lines(summary: ScenarioSummary) -> list[Text]:
    return [
        Text("  " + describe_failure(c.index, c.type, c.failed, c.errored, c.graded), style="red")
        for c in summary.failing_checks
    ]


def render_run(view: RunView, console: Console) -> None:
    """Print a run overview: meta, then each scenario with its failing checks."""
    console.print(Text(f"run {printable(view.run_id)}", style="bold"))
    console.print(Text(f"report {printable(view.report)}"))
    console.print(Text(printable(view.setup)))
    config = view.config
    timing = []
    if view.started_at:
        timing.append(f"started {printable(view.started_at)}")
    if view.wall_time_ms is not None:
        timing.append(f"wall {format_duration(view.wall_time_ms)}")
    timing.append(
        f"budget {config.get('trials')} trials · timeout {config.get('timeoutMs')} ms · "
        f"maxSessions {config.get('maxSessions')} · maxTokens {config.get('maxTokens', 0):,}"
    )
    console.print(Text(" · ".join(timing)))
    total = sum(view.verdicts.values())
    counts = " · ".join(f"{printable(v)} {n}" for v, n in sorted(view.verdicts.items()))
    line = Text(f"trials {total}" + (f" · {counts}" if counts else ""))
    if view.interrupted:
        line.append(" · interrupted (partial report)", style="yellow")
    console.print(line)
    if view.arms is not None:
        console.print(Text(f"control arm {printable(view.arms.control)}: the scenarios below"))
    for summary in view.scenarios:
        console.print()
        console.print(_summary_line(summary))
        for failing in _failing_lines(summary):
            console.print(failing)
    if view.arms is not None:
        console.print()
        for text in arm_table_text(view.arms):
            console.print(Text(text))
        console.print(Text("each arm's trials: show RUN SCENARIO@ARM[:I]", style="dim"))


def _trial_detail(duration_ms: int, tokens: int | None, cost: float | None) -> str:
    parts = [format_duration(duration_ms)]
    if cost is not None:
        parts.append(f"${cost:.4f}")
    if tokens is not None:
        parts.append(f"{tokens} tokens")
    return " · ".join(parts)


def render_scenario(view: ScenarioView, console: Console) -> None:
    """Print a scenario's summary and one line per trial with its cause."""
    arm = f" · arm {printable(view.arm)}" if view.arm is not None else ""
    console.print(
        Text(
            f"scenario {printable(view.summary.name)}{arm} · run {printable(view.run_id)}",
            style="bold",
        )
    )
    console.print(_summary_line(view.summary))
    for failing in _failing_lines(view.summary):
        console.print(failing)
    console.print()
    for trial in view.trials:
        line = Text(f"trial {trial.i}: ")
        line.append_text(_verdict(trial.verdict))
        line.append(f" ({_trial_detail(trial.duration_ms, trial.tokens, trial.cost)})")
        if trial.cause:
            line.append(f"{CAUSE_SEPARATOR}{trial.cause}")
        console.print(line)
    if view.other_arms:
        name = printable(view.summary.name)
        console.print()
        console.print(
            Text(
                "other arms: " + ", ".join(f"show {name}@{printable(a)}" for a in view.other_arms),
                style="dim",
            )
        )


def _tail_lines(key: str, value: str, check: CheckView) -> list[Text]:
    """A multi-line value's last lines (a failure is read at the end), and where the rest is."""
    excerpt = output_excerpt(value, check.evidence)
    left_out = []
    if excerpt.earlier:
        left_out.append(f"the last {len(excerpt.lines)} of {len(excerpt.lines) + excerpt.earlier}")
    if excerpt.cut and key == "output":
        left_out.append("the check kept the output's end")
    head = f"      {printable(key)}" + (f" ({'; '.join(left_out)})" if left_out else "") + ":"
    lines = [Text(head, style="bright_black")]
    lines.extend(Text(f"        {_safe(row)}") for row in excerpt.lines)
    return lines


def _evidence_lines(check: CheckView) -> list[Text]:
    lines = []
    for key, value in check.evidence.items():
        if isinstance(value, str) and "\n" in value:
            lines.extend(_tail_lines(key, value, check))
        elif key == "outputLog" and check.output_log is not None:
            lines.append(Text(f"      full output: {printable(check.output_log)}"))
        else:
            lines.append(Text(f"      {printable(key)}: {_safe(value)}", style="bright_black"))
    return lines


def _render_checks(view: TrialView, console: Console) -> None:
    if not view.checks:
        console.print(Text("checks: none ran (the session did not complete)"))
        return
    console.print(Text("checks", style="bold"))
    for check in view.checks:
        line = Text(f"  check {check.index} {printable(check.type)}: ")
        line.append_text(_verdict(check.verdict))
        if check.summary:
            line.append(f" — {check.summary}")
        console.print(line)
        if check.verdict != "pass":
            for evidence in _evidence_lines(check):
                console.print(evidence)


def _render_diff(view: TrialView, console: Console) -> None:
    parts = split_diff(view.diff or "")
    binary = {item.path: item.change for item in parts.binary}
    if view.changed_files:
        console.print(Text("changed files", style="bold"))
        for path in view.changed_files:
            tag = f" (binary, {binary[path]})" if path in binary else ""
            console.print(Text(f"  {printable(path)}{tag}"))
    if parts.binary:
        names = ", ".join(printable(item.path) for item in parts.binary)
        console.print(Text(f"binary files (content not shown): {names}"))
    if not parts.text.strip():
        return
    console.print(Text("diff", style="bold"))
    diff = printable(parts.text.rstrip("\n"), multiline=True)
    if console.is_terminal and not console.no_color:
        console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
    else:
        console.print(Text(diff))


def _stamp(t: int | None) -> str:
    return f"+{t / 1000:.1f}s" if t is not None else ""


def _tool_text(data: dict[str, Any]) -> str:
    parts = [f"{_safe(data.get('name', '?'), 60)} ({_safe(data.get('toolKind', 'other'), 20)})"]
    if data.get("input") is not None:
        parts.append(_safe(data["input"]))
    status = data.get("status")
    if status:
        duration = data.get("durationMs")
        parts.append(_safe(status, 20) + (f" {duration}ms" if isinstance(duration, int) else ""))
    if data.get("error"):
        parts.append(f"error: {_safe(data['error'])}")
    elif data.get("output") is not None:
        parts.append(f"→ {_safe(data['output'])}")
    return " ".join(parts)


def _session_text(data: dict[str, Any]) -> str:
    parts = [f"host {_safe(data.get('host', '?'), 40)}"]
    if data.get("version"):
        parts[0] += f" {_safe(data['version'], 40)}"
    if data.get("model"):
        parts.append(f"model {_safe(data['model'], 80)}")
    for key in ("tools", "skills", "agents"):
        names = data.get(key)
        if isinstance(names, list) and names:
            parts.append(f"{key} {_safe(', '.join(str(n) for n in names))}")
    return " · ".join(parts)


def _money_tokens(data: dict[str, Any]) -> list[str]:
    parts = []
    if isinstance(data.get("tokens"), int):
        parts.append(f"{data['tokens']:,} tokens")
    if isinstance(data.get("costUsd"), int | float):
        parts.append(f"${data['costUsd']:.4f}")
    return parts


def _entry_text(entry: TimelineEntry) -> str:
    data = entry.data
    kind = entry.kind
    if kind == "header":
        return f"schema {_safe(data.get('schema'), 10)} · host {_safe(data.get('host', '?'), 40)}"
    if kind == "session-start":
        return _session_text(data)
    if kind == "text":
        agent = f"[{_safe(data['agent'], 40)}] " if data.get("agent") else ""
        return agent + _safe(data.get("text", ""))
    if kind == "tool-call":
        return _tool_text(data)
    if kind in ("skill", "subagent"):
        return _safe(data.get("name", "?"), 80)
    if kind == "usage":
        return " · ".join(_money_tokens(data)) or "no figures"
    if kind == "error":
        status = f"[{data['status']}] " if isinstance(data.get("status"), int) else ""
        return status + _safe(data.get("message", ""))
    if kind == "result":
        parts = [_safe(data.get("status", "?"), 40)]
        if isinstance(data.get("turns"), int):
            parts.append(f"{data['turns']} turns")
        parts.extend(_money_tokens(data))
        if data.get("text"):
            parts.append(_safe(data["text"]))
        return " · ".join(parts)
    if kind == "truncated":
        return (
            f"{_safe(data.get('dropped'), 20)} {_safe(data.get('unit', ''), 20)} dropped: "
            + _safe(data.get("reason", ""))
        )
    return _safe(data.get("event", data))


def timeline_lines(entries: list[TimelineEntry]) -> list[Text]:
    """One line per transcript entry: offset, kind and what happened, nested under subagents."""
    depth: dict[str, int] = {}
    lines = []
    for entry in entries:
        parent = entry.data.get("parent")
        level = depth.get(parent, 0) + 1 if isinstance(parent, str) else 0
        if entry.kind == "tool-call" and isinstance(entry.data.get("id"), str):
            depth[entry.data["id"]] = level
        label = _KIND_LABEL.get(entry.kind, entry.kind)
        line = Text(f"  {_stamp(entry.t):>8}  ", style="bright_black")
        line.append("  " * level)
        line.append(f"{label:<9}", style=_KIND_STYLE.get(entry.kind, "default"))
        line.append(f" {_entry_text(entry)}")
        lines.append(line)
    return lines


def _history_lines(view: TrialView) -> list[Text]:
    """Every attempt, reuse, and how a regrade treated the trial."""
    lines = [Text(row) for row in _attempt_lines(view)]
    if view.reused:
        lines.append(Text("reused from an earlier run"))
    if view.regrade:
        lines.append(Text(f"regrade: {printable(view.regrade)}"))
    return lines


def _gateway_lines(view: TrialView) -> list[Text]:
    """Where the figures come from, and the tampering evidence."""
    lines: list[Text] = []
    usage = view.usage
    if usage is not None and usage.source == "gateway":
        host = f"; the host reported {usage.host_tokens}" if usage.host_tokens is not None else ""
        lines.append(Text(f"usage: metered by the gateway ({usage.calls} model calls{host})"))
    elif usage is not None:
        lines.append(Text(f"usage: reported by the host ({_safe(usage.fallback or 'no reason')})"))
    for evidence in view.tampered or []:
        lines.append(Text(f"tampered: {evidence.kind}: {_safe(evidence.detail)}", style="red"))
    return lines


def model_call_lines(calls: list[ModelCall]) -> list[Text]:
    """One line per model call: offset, model, tokens, duration, stop reason, tools asked for."""
    lines = []
    for call in calls:
        tools = ", ".join(_safe(t.name, 40) for t in call.tool_calls)
        parts = [
            _stamp(call.t),
            _safe(call.model or "unknown model", 60),
            f"{call.tokens} tokens" if call.tokens is not None else "no usage",
            format_duration(call.duration_ms),
            _safe(call.stop_reason or (f"ended: {call.ended}" if call.ended else "-"), 40),
        ]
        if tools:
            parts.append(f"→ {tools}")
        lines.append(Text(" ".join(parts)))
    return lines


def _prompt_lines(view: TrialView) -> list[Text]:
    """``prompt:`` and the prompt the agent received, indented (nothing when not recorded)."""
    if view.prompt is None:
        return []
    rows = view.prompt.strip("\n").splitlines()
    return [Text("prompt:"), *(Text(f"  {printable(row)}") for row in rows)]


def _attempt_lines(view: TrialView) -> list[str]:
    """``attempts 3 (--retry-infra ...)``, each earlier attempt, then this one; none if one."""
    if not view.attempts:
        return []
    lines = [f"attempts {view.attempts + 1} (--retry-infra retried infra-errors):"]
    for earlier in view.earlier_attempts:
        lines.append(
            f"  attempt {earlier.attempt}: {earlier.verdict} "
            f"({format_duration(earlier.duration_ms)}): {earlier.error or 'no error recorded'}"
        )
    lines.append(f"  attempt {view.attempts + 1}: {view.verdict} (this result)")
    return lines


def render_trial(view: TrialView, console: Console) -> None:
    """Print one trial: verdict and cause, checks with evidence, diff, transcript timeline."""
    title = Text(f"trial {printable(view.scenario)}:{view.i} · run {printable(view.run_id)}: ")
    title.stylize("bold")
    title.append_text(_verdict(view.verdict))
    title.append(f" ({_trial_detail(view.duration_ms, view.tokens, view.cost)})")
    console.print(title)
    if view.cause:
        console.print(Text(f"cause: {view.cause}"))
    if view.model:
        console.print(Text(f"model {printable(view.model)}"))
    for line in [*_history_lines(view), *_prompt_lines(view), *_gateway_lines(view)]:
        console.print(line)
    if view.error and "\n" in view.error.strip():
        console.print(Text("error:"))
        console.print(Text(printable(view.error.strip(), multiline=True)))
    console.print()
    _render_checks(view, console)
    if view.diff or view.changed_files:
        console.print()
        _render_diff(view, console)
    console.print()
    if view.transcript is None:
        console.print(Text("transcript: none recorded"))
    else:
        console.print(
            Text(
                f"transcript ({len(view.timeline)} entries) {printable(view.transcript)}",
                style="bold",
            )
        )
        for line in timeline_lines(view.timeline):
            console.print(line)
    if view.model_calls is not None:
        console.print()
        heading = f"model calls ({len(view.calls or [])}) {printable(view.model_calls)}"
        console.print(Text(heading, style="bold"))
        for line in model_call_lines(view.calls or []):
            console.print(line)
