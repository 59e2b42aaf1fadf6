"""``validate``, ``list`` and ``schema``: look at a project without running it."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from ..choices import SCHEMA_KINDS
from .app import PathArg, app, guarded, print_diagnostics, print_json

__all__ = ["list_scenarios", "schema", "validate"]


@app.command()
def validate(
    path: PathArg = None,
    output_format: Annotated[
        Literal["text", "json"],
        typer.Option("--format", help="Output format for the result and diagnostics."),
    ] = "text",
    probe: Annotated[
        bool,
        typer.Option("--probe", help="Also probe the host: its version and stored credentials."),
    ] = False,
) -> None:
    """Run every gate the run command runs before a trial, and report the result.

    Exits 0 when the project, its scenarios, pack suites and native outputs are
    valid, 2 otherwise; with --probe, 3 when the host cannot run.
    """

    def action() -> int:
        import anyio

        from ..diagnostics import DiagnosticError
        from ..hosts import create_host
        from ..suite import load_suite

        host_version: str | None = None
        try:
            suite = load_suite(path)
            if probe:
                host = create_host(suite.project.eval.host)
                anyio.run(host.probe)
                host_version = host.version or "unknown"
        except DiagnosticError as exc:
            if output_format == "json":
                print_json(
                    {
                        "ok": False,
                        "diagnostics": [
                            d.model_dump(mode="json", exclude_none=True) for d in exc.diagnostics
                        ],
                    }
                )
                return exc.exit_code
            raise
        if output_format == "json":
            print_json(
                {
                    "ok": True,
                    "host": suite.project.eval.host,
                    "scenarios": [s.name for s in suite.scenarios],
                    "diagnostics": [
                        d.model_dump(mode="json", exclude_none=True) for d in suite.warnings
                    ],
                    **({"hostVersion": host_version} if probe else {}),
                }
            )
            return 0
        print_diagnostics(suite.warnings)
        count = len(suite.scenarios)
        files = len(suite.native.files) if suite.native else 0
        typer.echo(
            f"ok: {count} scenario{'s' if count != 1 else ''} valid for "
            f"{suite.project.eval.host}; {files} native output file{'s' if files != 1 else ''} "
            "verified"
        )
        if probe:
            typer.echo(
                f"ok: host {suite.project.eval.host} {host_version} is installed and signed in"
            )
        return 0

    raise typer.Exit(guarded(action))


@app.command(name="list")
def list_scenarios(
    path: PathArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the discovered scenarios: name, source, origin, agent and checks."""

    def action() -> int:
        from ..suite import load_suite

        suite = load_suite(path, verify_native=False)
        included = {s.name for s in suite.scenarios}
        rows = [
            {
                "name": s.name,
                "source": s.source,
                "origin": s.origin.label,
                "agent": s.document.task.agent,
                "checks": [c.type for c in s.document.checks],
                "included": s.name in included,
                "description": s.document.description,
            }
            for s in suite.discovered
        ]
        if as_json:
            print_json(rows)
            return 0
        print_diagnostics(suite.warnings)
        if not rows:
            typer.echo("no scenarios")
            return 0
        header = ("NAME", "SOURCE", "ORIGIN", "AGENT", "CHECKS")
        table = [header] + [
            (
                str(r["name"]) + ("" if r["included"] else " (not included)"),
                str(r["source"]),
                str(r["origin"]),
                str(r["agent"] or "-"),
                ", ".join(r["checks"]),  # type: ignore[arg-type]
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
        for row in table:
            cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
            typer.echo("  ".join([*cells, row[-1]]))
        return 0

    raise typer.Exit(guarded(action))


@app.command()
def schema(
    kind: Annotated[str, typer.Argument(help=f"One of: {', '.join(SCHEMA_KINDS)}.")],
) -> None:
    """Print the JSON Schema of a file format (scenario, config or report)."""

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..schemas import json_schema

        if kind not in SCHEMA_KINDS:
            raise DiagnosticError(
                [
                    error(
                        "invalid-option",
                        f"unknown schema {kind!r}",
                        expected=", ".join(SCHEMA_KINDS),
                        next="run `atlante-eval schema scenario` (or config, report)",
                    )
                ]
            )
        print_json(json_schema(kind))
        return 0

    raise typer.Exit(guarded(action))
