"""``validate``, ``list`` and ``schema``: look at a project without running it."""

import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..choices import SCHEMA_KINDS
from .app import HostVersionOption, PathArg, app, choice, guarded, print_diagnostics, print_json

if TYPE_CHECKING:
    from ..diagnostics import Diagnostic
    from ..hosts import Host
    from ..isolation.limits import LimitSettings
    from ..project import Suite
    from ..report import HostSource

__all__ = ["list_scenarios", "schema", "validate"]


#: Seconds a host probe may run before ``validate --probe`` says it is still waiting.
PROBE_NOTICE_S = 3.0


@app.command()
def validate(
    path: PathArg = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result and diagnostics as JSON.")
    ] = False,
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="text or json (--format json is the same as --json).",
            show_default=False,
        ),
    ] = None,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Also probe the host (its version and the credentials it would use), "
            "that OS isolation works here when eval.isolation is os, and that the "
            "per-trial limits (eval.limits, the os defaults) can be enforced; a pinned host "
            "version is installed first when the managed host cache lacks it.",
        ),
    ] = False,
    host_version: HostVersionOption = None,
) -> None:
    """Run every gate the run command runs before a trial, and report the result.

    Exits 0 when the project, its scenarios, pack suites and native outputs are
    valid, 2 otherwise; 3 when git or (with --probe) the host cannot run; 130 when
    interrupted.
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError

        json_output = as_json or choice("--format", output_format, ("text", "json")) == "json"
        try:
            valid = _validated(path, probe=probe, host_version=host_version)
        except DiagnosticError as exc:
            if json_output:
                print_json({"ok": False, "diagnostics": _dumped(exc.diagnostics)})
                return exc.exit_code
            raise
        return _report_valid(valid, json_output=json_output)

    raise typer.Exit(guarded(action))


@dataclass(frozen=True, slots=True)
class _Valid:
    """What ``validate`` found: the suite, the pin, and with ``--probe`` the host and limits."""

    suite: "Suite"
    pin: str | None
    host: "Host | None" = None
    source: "HostSource | None" = None
    limits: "LimitSettings | None" = None


def _validated(path: Path | None, *, probe: bool, host_version: str | None) -> _Valid:
    """Load the suite, check the pin and, with ``probe``, probe isolation, limits and the host.

    The model gates need the host's version.
    """
    import anyio

    from ..diagnostics import DiagnosticError
    from ..project import load_suite, model_diagnostics, pack_setup_warnings
    from ..run.pinning import host_pin, pin_option

    requested = pin_option(host_version)
    suite = load_suite(path)
    config = suite.project.eval
    valid = _Valid(suite, host_pin(requested, config))
    if probe:
        from ..isolation.preflight import preflight_isolation
        from ..run.isolate import resolve_limits_settings

        anyio.run(preflight_isolation, config.isolation)
        limits = anyio.run(resolve_limits_settings, None, config)
        valid = replace(_probed(valid), limits=limits)
    found = model_diagnostics(config.host, config.model, getattr(valid.host, "dialect", None))
    found += pack_setup_warnings(suite)
    if any(d.severity == "error" for d in found):
        raise DiagnosticError([*found, *suite.warnings])
    return replace(valid, suite=replace(suite, warnings=(*suite.warnings, *found)))


def _probed(valid: _Valid) -> _Valid:
    """Probe the host: the pinned managed copy (installed first when missing), else PATH's."""
    import anyio

    from ..hosts import create_host
    from ..run.pinning import RunHost, check_pinned_version

    name = valid.suite.project.eval.host
    if valid.pin is None:
        host = create_host(name)
        anyio.run(_probe_interruptibly, host, name)
        return replace(valid, host=host, source=RunHost(host, None, None).probed_source())
    from ..hosts.managed import pinned_host
    from .hosts import install_progress

    pinned = anyio.run(lambda: pinned_host(name, valid.pin or "", on_progress=install_progress))
    try:
        anyio.run(_probe_interruptibly, pinned.host, name)
    finally:
        pinned.lease.close()
    check_pinned_version(RunHost(pinned.host, valid.pin, pinned.cached.source()))
    return replace(valid, host=pinned.host, source=pinned.cached.source())


async def _probe_interruptibly(host: "Host", name: str) -> None:
    """Probe ``host``; say so while it takes long; Ctrl-C is an interruption (exit 130)."""
    import anyio

    from ..diagnostics import DiagnosticError, error

    interrupted = False

    async def watch(scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                interrupted = True
                scope.cancel()
                return

    async def notice() -> None:
        await anyio.sleep(PROBE_NOTICE_S)
        typer.echo(
            f"waiting for the {name} probe (its --version and credentials); press Ctrl-C to stop",
            err=True,
        )

    failure: DiagnosticError | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watch, group.cancel_scope)
        group.start_soon(notice)
        try:
            await host.probe()
        except DiagnosticError as exc:
            failure = exc
        group.cancel_scope.cancel()
    if interrupted:
        raise DiagnosticError(
            [
                error(
                    "eval-run-interrupted",
                    f"interrupted while probing the {name} host",
                    next="run `atlante-eval validate --probe` again; if the host hangs, "
                    "check that it starts on its own (e.g. `claude --version`)",
                )
            ],
            exit_code=130,
        )
    if failure is not None:
        raise failure


def _dumped(diagnostics: "Sequence[Diagnostic]") -> list[dict[str, object]]:
    return [d.model_dump(mode="json", exclude_none=True) for d in diagnostics]


def _report_valid(valid: _Valid, *, json_output: bool) -> int:
    suite, host, limits = valid.suite, valid.host, valid.limits
    name = suite.project.eval.host
    record = limits.record() if limits is not None else None
    if json_output:
        print_json(
            {
                "ok": True,
                "host": name,
                "scenarios": [s.name for s in suite.scenarios],
                "diagnostics": _dumped(suite.warnings),
                **({"hostPin": valid.pin} if valid.pin is not None else {}),
                **(
                    {
                        "hostVersion": host.version or "unknown",
                        "credentials": getattr(host, "credentials_checked", None),
                        "hostSource": valid.source.model_dump(
                            mode="json", by_alias=True, exclude_none=True
                        )
                        if valid.source is not None
                        else None,
                    }
                    if host is not None
                    else {}
                ),
                **(
                    {"limits": record.model_dump(mode="json", by_alias=True, exclude_none=True)}
                    if record is not None
                    else {}
                ),
            }
        )
        return 0
    print_diagnostics(suite.warnings)
    count = len(suite.scenarios)
    files = len(suite.native.files) if suite.native else 0
    typer.echo(
        f"ok: {count} scenario{'s' if count != 1 else ''} valid for "
        f"{name}; {files} native output file{'s' if files != 1 else ''} verified"
    )
    if valid.pin is not None and host is None:
        typer.echo(
            f"ok: host {name} is pinned at {valid.pin} (run from the managed host cache; "
            "--probe installs and checks it)"
        )
    if host is not None:
        checked = getattr(host, "credentials_checked", None) or "credentials were found"
        where = " (the pinned managed copy)" if valid.pin is not None else ""
        typer.echo(f"ok: host {name} {host.version or 'unknown'}{where} is installed; {checked}")
    if limits is not None:
        typer.echo(f"ok: {limits.describe()}")
    return 0


@app.command(name="list")
def list_scenarios(
    path: PathArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the discovered scenarios: name, source, origin, agent and checks.

    An invalid scenario document does not hide the valid ones: they are listed, the
    problems printed as diagnostics, and the exit status is 2.
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError
        from ..project.listing import discover_all

        try:
            listing = discover_all(path)
        except DiagnosticError as exc:  # the project itself cannot be read: no scenarios
            if not as_json:
                raise
            print_json({"ok": False, "scenarios": [], "diagnostics": _dumped(exc.diagnostics)})
            return exc.exit_code
        rows: list[dict[str, Any]] = [
            {
                "name": s.name,
                "source": s.source,
                "origin": s.origin.label,
                "agent": s.document.task.agent,
                "checks": [c.type for c in s.document.checks],
                "included": listing.included(s),
                "description": s.document.description,
            }
            for s in listing.scenarios
        ]
        status = 0 if listing.ok else 2
        if as_json:
            if listing.ok:
                print_json(rows)
            else:
                print_json(
                    {"ok": False, "scenarios": rows, "diagnostics": _dumped(listing.diagnostics)}
                )
            return status
        print_diagnostics(listing.diagnostics)
        _print_rows(rows)
        return status

    raise typer.Exit(guarded(action))


def _print_rows(rows: list[dict[str, Any]]) -> None:
    """The scenario table (``no scenarios`` when there is none)."""
    from .._util.terminal import printable

    if not rows:
        typer.echo("no scenarios")
        return
    header = ("NAME", "SOURCE", "ORIGIN", "AGENT", "CHECKS")
    table = [header] + [
        (
            str(r["name"]) + ("" if r["included"] else " (not included)"),
            str(r["source"]),
            str(r["origin"]),
            str(r["agent"] or "-"),
            ", ".join(r["checks"]),
        )
        for r in rows
    ]
    shown = [[printable(cell) for cell in row] for row in table]  # names are untrusted
    widths = [max(len(row[i]) for row in shown) for i in range(len(header) - 1)]
    for row in shown:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        typer.echo("  ".join([*cells, row[-1]]))


@app.command()
def schema(
    kind: Annotated[
        str, typer.Argument(metavar="KIND", help=f"One of: {', '.join(SCHEMA_KINDS)}.")
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print JSON (the default and only format).", show_default=False
        ),
    ] = True,
    extended: Annotated[
        bool,
        typer.Option(
            "--extended",
            help="With scenario: atlante-eval's own scenario schema (v0.1 plus behaviour checks).",
            show_default=False,
        ),
    ] = False,
) -> None:
    """Print the JSON Schema of a file format (scenario, config, report or transcript)."""

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..project.schemas import json_schema

        if kind not in SCHEMA_KINDS:
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        f"unknown schema {kind!r}",
                        expected=", ".join(SCHEMA_KINDS),
                        next="run `atlante-eval schema scenario` "
                        f"(or {', '.join(k for k in SCHEMA_KINDS if k != 'scenario')})",
                    )
                ]
            )
        if extended and kind != "scenario":
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        f"--extended applies to the scenario schema only, not {kind!r}",
                        next="run `atlante-eval schema scenario --extended`",
                    )
                ]
            )
        print_json(json_schema(kind, extended=extended))
        return 0

    raise typer.Exit(guarded(action))
