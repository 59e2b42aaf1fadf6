"""The ``atlante-eval selftest`` command.

Progress lines go to stderr as trials finish; findings are printed as diagnostics
on stderr; the per-scenario table, the report path and the verdict go to stdout
(or the ``selftest.json`` analysis with ``--json``).
"""

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..choices import DEFAULT_SELFTEST_JOBS
from .app import (
    GATEWAY_METAVAR,
    ISOLATION_METAVAR,
    HostVersionOption,
    OutOption,
    PathArg,
    app,
    guarded,
    positive_int,
    print_diagnostics,
)

if TYPE_CHECKING:
    from ..report import TrialResult
    from ..selftest.core import (
        AgentName,
        AgentOutcome,
        ScenarioSelftest,
        SelftestOutcome,
        SelftestResult,
    )

__all__ = ["render_selftest", "selftest", "selftest_command"]


def _agent_cell(outcome: "AgentOutcome | None", checks: int, missing: str) -> str:
    """``fail (1/4 checks fail)``, or what was and was not exercised when that differs.

    A check the trial ran but does not prove (a behaviour check, when the
    solution carries no transcript) is not counted: the cell then gives the
    verdict of the checks it proves and how many were not selftested, e.g.
    ``pass (3 checks; 2 behaviour checks not selftested)``.
    """
    if outcome is None:
        return missing
    unproven = len(outcome.not_selftested)
    if not unproven:
        if outcome.verdict == "fail":
            return f"fail ({len(outcome.failed_checks)}/{checks} checks fail)"
        if outcome.errored_checks:
            return f"{outcome.verdict} ({len(outcome.errored_checks)}/{checks} checks error)"
        return outcome.verdict
    proven = checks - unproven
    rest = f"{unproven} behaviour check{'s' if unproven != 1 else ''} not selftested"
    if outcome.failed_checks:
        return f"fail ({len(outcome.failed_checks)}/{proven} checks fail; {rest})"
    if outcome.errored_checks:
        return f"error ({len(outcome.errored_checks)}/{proven} checks error; {rest})"
    if outcome.verdict not in ("pass", "fail"):  # the checks did not decide it
        return f"{outcome.verdict} ({rest})"
    return f"pass ({proven} check{'s' if proven != 1 else ''}; {rest})"


def _verdict_cell(judged: "ScenarioSelftest") -> str:
    errors = [
        code.removeprefix("selftest-") for code in judged.findings if code != "selftest-no-solution"
    ]
    if errors:
        return ", ".join(dict.fromkeys(errors))
    if judged.reference_agent is None and not judged.no_change:
        return "ok (no reference solution)"
    if judged.not_selftested:
        return f"ok ({len(judged.not_selftested)} behaviour checks not selftested)"
    return "ok"


def _cheats_cell(judged: "ScenarioSelftest") -> str:
    """``2/3 caught`` over counter-solutions and generic mutants (``-``: none tried)."""
    cheats = [*judged.counters, *judged.mutants]
    if not cheats:
        return "-"
    caught = sum(1 for cheat in cheats if cheat.caught)
    missed = [cheat.label for cheat in cheats if cheat.caught is False]
    cell = f"{caught}/{len(cheats)} caught"
    return f"{cell} (missed: {', '.join(missed)})" if missed else cell


def _shown(path: str) -> str:
    """A path as ``run``'s summary shows it: relative to the working directory when it can."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def render_selftest(result: "SelftestResult") -> str:
    """The per-scenario table, the report path and the overall verdict."""
    header = ("SCENARIO", "NULL AGENT", "REFERENCE AGENT", "CHEATS", "SELFTEST")
    rows = [header]
    for name, judged in result.scenarios.items():
        missing = "invalid solution" if "selftest-solution-invalid" in judged.findings else "-"
        rows.append(
            (
                name,
                _agent_cell(judged.null_agent, judged.checks, "-"),
                _agent_cell(judged.reference_agent, judged.checks, missing)
                if not judged.no_change
                else "(no change: null agent)",
                _cheats_cell(judged),
                _verdict_cell(judged),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [
        "  ".join([*(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])), row[-1]])
        for row in rows
    ]
    lines.append("")
    lines.append(f"report {_shown(result.report)}")
    total = len(result.scenarios)
    bad = sum(1 for judged in result.scenarios.values() if not judged.ok)
    unproven = sum(
        1
        for judged in result.scenarios.values()
        if judged.ok and judged.reference_agent is None and not judged.no_change
    )
    noun = "scenario" if total == 1 else "scenarios"
    if result.ok:
        tail = f"; {unproven} without a reference solution" if unproven else ""
        lines.append(f"selftest passed: {total} {noun} sound{tail}")
    else:
        lines.append(f"selftest failed: {bad} of {total} {noun} cannot be trusted (see above)")
    return "\n".join(lines)


def _progress(scenario: str, agent: "AgentName", result: "TrialResult") -> None:
    """``fix-median · counter agent (edit-the-test): fail (283ms)``: which cheat, if one."""
    from .._util.terminal import printable
    from ..views.progress import format_duration

    label = (result.host_evidence or {}).get("label")
    which = f" ({label})" if isinstance(label, str) and label else ""
    typer.echo(
        printable(
            f"{scenario} · {agent} agent{which}: {result.verdict} "
            f"({format_duration(result.duration_ms)})"
        ),
        err=True,
    )


@app.command()
def selftest(
    path: PathArg = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            metavar="NAME",
            help="Selftest only this scenario (repeatable; glob patterns allowed).",
            show_default=False,
        ),
    ] = None,
    solutions: Annotated[
        Path | None,
        typer.Option(
            "--solutions",
            metavar="DIR",
            help="Directory with one reference solution per scenario name "
            "(default: solutions/ beside each scenario document).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the selftest analysis as JSON.")
    ] = False,
    out: OutOption = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the trial sandboxes.")] = False,
    jobs: Annotated[
        str | None,
        typer.Option(
            "--jobs",
            "-j",
            metavar="N",
            help=f"Trials run at once (default {DEFAULT_SELFTEST_JOBS}).",
            show_default=False,
        ),
    ] = None,
    isolation: Annotated[
        str | None,
        typer.Option(
            "--isolation",
            metavar=ISOLATION_METAVAR,
            help="Contain setup and command checks: none or os (Linux, bubblewrap). "
            "Default: eval.isolation, else none.",
            show_default=False,
        ),
    ] = None,
    gateway: Annotated[
        str | None,
        typer.Option(
            "--gateway",
            metavar=GATEWAY_METAVAR,
            help="Start the engine's model gateway for the trials (on) or not (off); the "
            "stand-in agents make no model call. Default: eval.gateway, else on.",
            show_default=False,
        ),
    ] = None,
    host_version: HostVersionOption = None,
) -> None:
    """Prove the suite sound without a model, host or credentials.

    Each scenario runs through the real engine twice: with a null agent, which
    changes nothing (some check must fail), and with a reference agent, which
    applies the scenario's known-good solution (every check must pass).

    Exit status: 0 the suite is sound; 1 a scenario is vacuous, its solution fails
    or is invalid, its setup fails or a check reaches no verdict; 2 validation
    failed; 3 the report could not be written.
    """

    def action() -> int:
        return selftest_command(
            path,
            scenarios=tuple(scenario or ()),
            solutions=solutions,
            jobs=positive_int("--jobs", jobs),
            out=out,
            keep=keep,
            isolation=isolation,
            gateway=gateway,
            as_json=as_json,
            host_version=host_version,
        )

    raise typer.Exit(guarded(action))


def selftest_command(
    path: Path | None,
    *,
    scenarios: tuple[str, ...],
    solutions: Path | None,
    jobs: int | None,
    out: Path | None,
    keep: bool,
    isolation: str | None,
    as_json: bool,
    gateway: str | None = None,
    host_version: str | None = None,
) -> int:
    """Selftest with progress lines on stderr, then print the outcome; return the exit status."""
    import anyio

    from ..report import check_output_paths
    from ..selftest.core import run_selftest

    check_output_paths({}, {"--out": out})
    outcome: SelftestOutcome = anyio.run(
        lambda: run_selftest(
            path,
            scenarios=scenarios,
            solutions=solutions,
            jobs=jobs,
            out=out,
            keep=keep,
            on_trial=_progress,
            isolation=isolation,
            gateway=gateway,
            host_version=host_version,
        )
    )
    result = outcome.result
    if as_json:
        sys.stdout.write(result.to_json())
        sys.stdout.flush()
        return result.exit_code
    print_diagnostics(result.diagnostics)
    typer.echo(render_selftest(result))
    if outcome.report.meta.run_root:
        typer.echo(f"sandboxes kept in {outcome.report.meta.run_root}")
    return result.exit_code
