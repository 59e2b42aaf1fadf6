"""The ``command`` check: run a program in the sandbox, judge its exit code and output.

``fail`` when the exit code differs from ``expectExit``, the program timed out, or
its output does not match ``outputMatches``; ``error`` when it cannot start or the
pattern is invalid. The last :data:`OUTPUT_EVIDENCE_CHARS` of its output (secrets
removed) are kept as evidence, and a longer output in a file beside the transcript.
"""

from __future__ import annotations

import shlex
from typing import Any

from .._util.environment import allowed_env
from .._util.patterns import PatternError, compile_pattern, search, timeout_message
from ..project import CommandCheck
from ..trial import run_process
from .context import CheckContext, Evidence, Outcome
from .output_cause import output_cause
from .wording import DETAIL_CHARS, quoted

__all__ = [
    "OUTPUT_EVIDENCE_CHARS",
    "command_detail",
    "command_label",
    "command_line",
    "run_command",
]

#: Command output kept as evidence: the last 2,000 characters.
OUTPUT_EVIDENCE_CHARS = 2000
#: How much of each stream of a command check is searched by ``outputMatches``.
_MATCH_BYTES = 4 * 1024 * 1024


async def run_command(check: CommandCheck, ctx: CheckContext) -> Outcome:
    """Run ``check.run`` in the sandbox (confined by ``ctx.wrap``) and judge it."""
    result = await run_process(
        check.run,
        cwd=ctx.root,
        env=allowed_env(),
        timeout_s=check.timeout_ms / 1000,
        capture_bytes=_MATCH_BYTES,
        sweep=True,  # servers a check starts in the background must not outlive it
        wrap=ctx.wrap,
    )
    if result.spawn_error:
        return "error", {"run": check.run, "cause": result.spawn_error}
    combined = f"{result.stdout}\n{result.stderr}"
    evidence: dict[str, Any] = {
        "run": check.run,
        "exit": result.exit,
        "expectExit": check.expect_exit,
    }
    if result.timed_out:
        evidence["timedOut"] = True
    output = ctx.redact(combined.strip())
    evidence["output"] = output[-OUTPUT_EVIDENCE_CHARS:]
    if len(output) > OUTPUT_EVIDENCE_CHARS and ctx.keep_output is not None:
        kept = ctx.keep_output(f"check-{ctx.index}.log", output)
        if kept is not None:
            evidence["outputLog"] = kept
    if check.output_matches is not None:
        evidence["outputMatches"] = check.output_matches
    if result.timed_out or result.exit != check.expect_exit:
        return "fail", evidence
    if check.output_matches is not None:
        try:
            pattern = compile_pattern(check.output_matches)
        except PatternError as exc:
            return "error", {"run": check.run, "cause": f"invalid outputMatches pattern: {exc}"}
        outcome = await search(pattern, combined)
        if outcome == "timeout":
            return "fail", {**evidence, "cause": timeout_message()}
        if outcome == "no-match":
            return "fail", evidence
    return "pass", evidence


def command_label(check: CommandCheck) -> str:
    """``command python3 -m unittest``."""
    return "command " + shlex.join(check.run)


def command_line(evidence: Evidence) -> str:
    """``exit 1, expected 0: pytest: assert 2 == 1.5 · <test>``, or the timeout or mismatch.

    The output's line is the one a person would read (:func:`.output_cause.output_cause`).
    """
    if evidence.get("timedOut"):
        what = "timed out"
    elif evidence.get("exit") != evidence.get("expectExit", 0):
        exit_code = evidence.get("exit")
        shown = "killed by a signal" if exit_code is None else f"exit {exit_code}"
        what = f"{shown}, expected {evidence.get('expectExit', 0)}"
    elif "outputMatches" in evidence:
        what = f"output does not match {quoted(evidence['outputMatches'])}"
    else:
        what = "failed"
    found = output_cause(str(evidence.get("output") or ""))
    return f"{what}: {found.describe()}" if found is not None else what


def command_detail(check: CommandCheck, evidence: Evidence) -> str:
    """The exit code, timeout or mismatch, and the output's last :data:`DETAIL_CHARS`."""
    parts = [f"exit {evidence.get('exit')}, expected {evidence.get('expectExit')}"]
    if evidence.get("timedOut"):
        parts.append(f"timed out after {check.timeout_ms}ms")
    if "outputMatches" in evidence and evidence.get("exit") == evidence.get("expectExit"):
        parts.append(f"output does not match {check.output_matches!r}")
    output = str(evidence.get("output", ""))[-DETAIL_CHARS:]
    if output:
        parts.append(f"output: {output}")
    return "; ".join(parts)
