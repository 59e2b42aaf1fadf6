"""One diagnostic type, the table of codes, and the exception that carries them.

Every problem a user can cause (a broken configuration, an invalid scenario, a
missing host) becomes a :class:`Diagnostic` with a stable ``code`` taken from the
reference ``atlante eval`` where one exists. Exit codes are decided here, once,
from the seeds' table: validation problems exit 2, run-level infrastructure
problems exit 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ATLANTE_ABOUT",
    "CODES",
    "RUN_LEVEL_CODES",
    "Diagnostic",
    "DiagnosticError",
    "Location",
    "error",
    "exit_code_for",
    "format_diagnostic",
    "sort_diagnostics",
    "warning",
]

Severity = Literal["error", "warning"]

#: What a ``next`` step naming an ``atlante`` command says about it (not part of this tool).
ATLANTE_ABOUT = "Atlante (https://atlante.sh), the harness builder"

#: Every code this tool emits, with a one-line meaning (rendered into docs/diagnostics.md).
CODES: dict[str, str] = {
    # project loading
    "eval-not-configured": "No Atlante configuration, or it has no eval section.",
    "ambiguous-config": "Both atlante.jsonc and atlante.json exist in the project directory.",
    "config-unreadable": "The configuration file cannot be read as UTF-8 text.",
    "malformed-jsonc": "The configuration is not valid JSON (.json) or JSONC (.jsonc).",
    "unsupported-schema": "A document's $schema is not one this tool supports.",
    "invalid-document": "The eval section, hosts or extends do not match the schema.",
    "eval-host-not-materialized": "eval.host is not listed in the document's hosts.",
    "invalid-host-version": "A host version pin (eval.hostVersion, --host-version, "
    "HOST@VERSION) is not an exact version in the host's supported range.",
    # CLI arguments
    "invalid-trials": "--trials is not an integer from 1 to 50.",
    "invalid-option": "A command-line option has an invalid value.",
    "unknown-scenario-filter": "--scenario names a scenario that was not discovered.",
    "invalid-output-path": "An output file option names a path that cannot be written.",
    # scenario discovery
    "invalid-scenario-glob": "eval.scenarios is absolute or climbs out of the root with '..'.",
    "empty-scenario-glob": "eval.scenarios matches no scenario document.",
    "scenario-unreadable": "A scenario document cannot be read (not UTF-8, too large, I/O error).",
    "invalid-json": "A scenario document is not valid JSON (.json) or JSONC (.jsonc).",
    "invalid-eval-scenario": "A scenario document does not match the v0.1 scenario schema.",
    "scenario-extension-check": "A v0.1 scenario document uses a behaviour check, an "
    "atlante-eval extension that needs atlante-eval's own scenario $schema.",
    "duplicate-scenario-name": "Two scenario documents declare the same name.",
    "scenario-name-too-long": "A scenario name is longer than the trial directories allow.",
    "unknown-scenario-agent": "A scenario's task.agent is defined by no native output or host.",
    "invalid-scenario-fixture": "A scenario fixture is missing, not a directory, or unsafe.",
    "pattern-nested-quantifier": "A check's regular expression repeats a repeated group (slow).",
    # pack suites
    "pack-eval-unreadable": "A selected pack's root preset cannot be read or parsed.",
    "invalid-pack-eval": "A selected pack's eval metadata does not match the schema.",
    "invalid-eval-include": "An eval.include entry is not a package or package-preset locator.",
    "eval-include-not-found": "An eval.include entry names no pack selected by the project.",
    "eval-include-no-suite": "An eval.include entry names a pack that ships no eval scenarios.",
    "pack-scenario-not-included": "A discovered pack scenario is not opted in by eval.include.",
    "eval-pack-host-incompatible": "An included pack suite declares a host other than eval.host.",
    "pack-setup-commands": "An included pack scenario runs setup commands before its trials.",
    # native outputs
    "native-outputs-not-verified": "The native outputs of the last build are missing or drifted.",
    # hosts (run level)
    "eval-host-unavailable": "The host executable cannot be run, or its version is unreadable.",
    "eval-host-unsupported-version": "The host's version is outside the supported range.",
    "eval-host-unauthenticated": "The host has no stored credentials.",
    "eval-host-install-failed": "The pinned host version could not be installed into the "
    "managed host cache (offline, registry or npm failure).",
    "eval-host-in-use": "hosts remove: a running atlante-eval process uses that host version.",
    "eval-model-unset": "OpenCode runs without eval.model: the host's default model is used.",
    "eval-model-required": "OpenCode V2 runs without eval.model: it has no default model.",
    "git-unavailable": "git is not on PATH; every sandbox baseline needs it.",
    "eval-isolation-unavailable": "--isolation os was asked for, but bubblewrap or the "
    "namespaces it needs are missing here.",
    "eval-limits-unavailable": "Per-trial resource limits need control groups (cgroup v2 "
    "delegated, or writable v1 hierarchies) that this user cannot create here.",
    # running
    "eval-run-failed": "The run stopped on an unexpected error; a partial report was published.",
    "eval-run-interrupted": "The run was interrupted; finished trials are in a partial report.",
    "eval-report-failed": "The report could not be written.",
    "eval-project-modified": "The project's scenarios, fixtures or native outputs changed mid-run.",
    "eval-run-dir-tampered": "Something else wrote into the run directory; it was moved aside.",
    "eval-journal-failed": "A finished trial could not be journaled (disk full); the run stopped.",
    "eval-resume-busy": "--resume: another run is resuming that run directory, or it is running.",
    "eval-resume-mismatch": "--resume points at a run directory that cannot be resumed.",
    "eval-cleanup-failed": "A trial sandbox or the run root could not be removed; the run went on.",
    "eval-gateway-fallback": "Some trials' figures are the host's own, not the gateway's.",
    "jobs-limited": "Too few open files are allowed for --jobs; fewer jobs run at once.",
    "last-failed": "Which scenarios --last-failed selected, and from which report.",
    "eval-sessions-exceed-budget": "The plan needs more host sessions than maxSessions allows.",
    "report-unreadable": "A report file given to compare, merge or junit cannot be read.",
    "output-failed": "Standard output could not take the output (closed pipe, full disk).",
    "merge-mismatch": "Reports given to merge are not the complete shards of one run.",
    "shard-balance-estimated": "--balance-from times some of the plan's scenarios not at all; "
    "they are estimated.",
    "compare-host-differs": "compare: the two runs used different hosts.",
    "compare-host-version-differs": "compare: the two runs used different host versions.",
    "compare-model-differs": "compare: the two runs used different models.",
    "compare-budget-differs": "compare: the two runs had different budgets (timeouts, tokens).",
    "compare-scenario-changed": "compare: a scenario's document or fixture differs between runs.",
    "compare-partial-report": "compare: a report comes from an interrupted run.",
    "compare-shard-report": "compare: a report is one shard of a run, not the whole run.",
    "compare-adaptive-differs": "compare: HEAD is an adaptive run whose own decisions differ.",
    "compare-infra-differs": "compare: the runs' infra-error rates differ beyond chance.",
    "compare-underpowered": "compare: the trial counts cannot detect a 30-point drop.",
    "regrade-task-changed": "regrade: a scenario's fixture, native outputs, prompt, agent or "
    "setup changed since the run (only its checks may).",
    "regrade-no-final-state": "regrade: the run stored no final state a regrade could rebuild.",
    "regrade-scenario-missing": "regrade: a scenario of the run is not in the project.",
    "regrade-selftest-run": "regrade: the run is a selftest run (run selftest again instead).",
    "adaptive-baseline-mismatch": "An adaptive run's baseline shares no scenario with the plan.",
    "adaptive-scenario-changed": "A scenario's definition differs from the adaptive baseline's.",
    "adaptive-cost-unknown": "--max-cost is set but the host reported no cost.",
    # the history store (docs/history.md)
    "history-invalid-url": "--history or eval.history is not a SQLite path or PostgreSQL URL.",
    "history-unavailable": "The history database cannot be opened, reached or written.",
    "history-schema-newer": "The history database was written by a newer atlante-eval.",
    "history-not-configured": "A command needs a history store and none is configured.",
    "history-not-found": "The history has no such run or scenario.",
    "history-no-baseline": "No baseline of that name is blessed for the run's host and model.",
    "history-ingest-skipped": "A report given to history ingest was left out (a selftest).",
    "history-not-recorded": "The run could not be recorded in the history; the run stands.",
    "gate-quarantined": "--fail-on ignores a quarantined scenario (it is still reported).",
    "gate-unstable": "--fail-on ignores a scenario not stable over --gate-stable-nights runs.",
    "alert-failed": "A regression alert or step summary could not be delivered; the run stands.",
    "adaptive-baseline-underpowered": "An adaptive run's baseline is too small to detect a "
    "30-point drop.",
    "selftest-vacuous": "A scenario passes with an agent that changes nothing.",
    "selftest-solution-failed": "A scenario's reference solution does not pass every check.",
    "selftest-solution-invalid": "A reference solution directory is malformed or unsafe.",
    "selftest-setup-failed": "A selftest trial's sandbox could not be assembled (fixture, setup).",
    "selftest-command-leftovers": "Running a scenario's command checks leaves files its "
    "diff-allowlist forbids: a correct agent that tests its work fails.",
    "selftest-check-error": "A check reached no verdict in a selftest (bad path, missing tool).",
    "selftest-no-solution": "A scenario has no reference solution; only the null agent ran.",
    "selftest-no-counter": "A no-change scenario has no counter-solution to prove its checks.",
    "selftest-counter-not-caught": "A counter-solution (a known cheat) passes every check.",
    "selftest-mutant-not-caught": "A generic mutant a check claims to catch passes every check.",
    "selftest-regrade-differs": "Graded again on its stored files, a selftest trial got other "
    "verdicts: a check depends on more than the sandbox, so regrade cannot be trusted.",
    "selftest-not-regradable": "A scenario's proving selftest trial cannot be rebuilt from its "
    "stored final state (over the cap, a FIFO).",
}

#: Codes that describe a run-level infrastructure failure (exit status 3).
RUN_LEVEL_CODES: frozenset[str] = frozenset(
    {
        "eval-host-unavailable",
        "eval-host-unsupported-version",
        "eval-host-unauthenticated",
        "eval-host-install-failed",
        "eval-host-in-use",
        "git-unavailable",
        "eval-isolation-unavailable",
        "eval-limits-unavailable",
        "eval-run-failed",
        "eval-run-interrupted",
        "eval-report-failed",
        "output-failed",
        "eval-journal-failed",
        "eval-resume-busy",
        "history-unavailable",
        "history-schema-newer",
    }
)


class Location(BaseModel):
    """A 1-based position in a source file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int = Field(ge=1)
    """1-based line number."""
    column: int = Field(ge=1)
    """1-based column number."""


class Diagnostic(BaseModel):
    """One problem found in the user's input or environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Severity
    """``error`` stops the command; ``warning`` is informational."""
    code: str
    """Stable slug, e.g. ``invalid-scenario-fixture`` (see docs/diagnostics.md)."""
    message: str
    """What happened, in one sentence."""
    source: str | None = None
    """Project-relative file (or ``<pkg>@<version>/<file>`` for pack files)."""
    pointer: str | None = None
    """RFC 6901 JSON pointer to the offending value inside ``source``."""
    location: Location | None = None
    """Line and column of the offending value inside ``source``."""
    expected: str | None = None
    """What would have been accepted."""
    next: str | None = None
    """What the user should do next."""
    cause: str | None = None
    """The underlying error, when one exists."""

    def sort_key(self) -> tuple[str, int, int, tuple[tuple[int, int, str], ...], str, str]:
        """Return the key that orders diagnostics in document order.

        By source, then line and column, then the pointer read segment by segment
        (``/checks/2`` before ``/checks/10``), then code and message.
        """
        loc = self.location
        return (
            self.source or "",
            loc.line if loc else 0,
            loc.column if loc else 0,
            _pointer_key(self.pointer or ""),
            self.code,
            self.message,
        )


def _pointer_key(pointer: str) -> tuple[tuple[int, int, str], ...]:
    """A JSON pointer as a sort key: array indices compare as numbers, names as text."""
    return tuple(
        (0, int(part), "") if part.isascii() and part.isdigit() else (1, 0, part)
        for part in pointer.split("/")
    )


def error(code: str, message: str, **fields: object) -> Diagnostic:
    """Build an error diagnostic; ``fields`` are the optional Diagnostic fields."""
    return Diagnostic.model_validate(
        {"severity": "error", "code": code, "message": message, **fields}
    )


def warning(code: str, message: str, **fields: object) -> Diagnostic:
    """Build a warning diagnostic; ``fields`` are the optional Diagnostic fields."""
    return Diagnostic.model_validate(
        {"severity": "warning", "code": code, "message": message, **fields}
    )


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Return diagnostics in their stable, document order (see :meth:`Diagnostic.sort_key`)."""
    return sorted(diagnostics, key=Diagnostic.sort_key)


def exit_code_for(diagnostics: Sequence[Diagnostic]) -> int:
    """Return the exit status for a failure described by ``diagnostics`` (2 or 3)."""
    if any(d.severity == "error" and d.code in RUN_LEVEL_CODES for d in diagnostics):
        return 3
    return 2


class DiagnosticError(Exception):
    """Raised when validation or run preparation fails; carries every diagnostic found.

    Raised by :func:`atlante_eval.load_suite`, :func:`atlante_eval.run_eval` and the
    other entry points before any trial runs (or, for run-level codes, when the
    run cannot continue). ``exit_code`` is 2 for validation problems, 3 for run-level
    infrastructure problems.
    """

    def __init__(self, diagnostics: Iterable[Diagnostic], *, exit_code: int | None = None) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(sort_diagnostics(diagnostics))
        self._exit_code = exit_code
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        summary = first.message if first else "validation failed"
        super().__init__(f"[{first.code if first else 'error'}] {summary}")

    @property
    def exit_code(self) -> int:
        """Exit status the CLI uses for this failure (130 for an interrupted probe)."""
        return self._exit_code if self._exit_code is not None else exit_code_for(self.diagnostics)


_RED = "\x1b[31m"
_YELLOW = "\x1b[33m"
_RESET = "\x1b[0m"


def format_diagnostic(diagnostic: Diagnostic, *, color: bool = False) -> str:
    """Render a diagnostic in the terminal format of the reference CLI.

    ``<severity> [<code>]: <message>`` then optional ``at:``, ``expected:``,
    ``next:`` and ``cause:`` lines.
    """
    severity: str = diagnostic.severity
    if color:
        severity = f"{_RED if severity == 'error' else _YELLOW}{severity}{_RESET}"
    lines = [f"{severity} [{diagnostic.code}]: {diagnostic.message}"]
    if diagnostic.source or diagnostic.pointer:
        where = diagnostic.source or ""
        if diagnostic.source and diagnostic.location:
            where += f":{diagnostic.location.line}:{diagnostic.location.column}"
        if diagnostic.pointer:
            where = f"{where} {diagnostic.pointer}" if where else diagnostic.pointer
        lines.append(f"at: {where}")
    for label, value in (
        ("expected", diagnostic.expected),
        ("next", diagnostic.next),
        ("cause", diagnostic.cause),
    ):
        if value:
            lines.append(f"{label}: {value}")
    return "\n".join(lines)
