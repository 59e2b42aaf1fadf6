"""``hosts install|list|remove|path``: the managed host cache of pinned host versions.

Each command is a thin layer over :mod:`atlante_eval.hosts.managed` (docs/hosts.md).
"""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .app import HelpCommand, app, guarded, print_json

if TYPE_CHECKING:
    from ..hosts.cache import CachedHost
    from ..report import HostInstallProgress

__all__ = [
    "entry_json",
    "hosts_app",
    "install",
    "install_progress",
    "list_cached",
    "path",
    "remove",
]

hosts_app = typer.Typer(
    name="hosts",
    help="Pinned host CLI versions in the managed host cache (see docs/hosts.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
app.add_typer(hosts_app)

PinArg = Annotated[
    str,
    typer.Argument(
        metavar="HOST@VERSION",
        help="A built-in host and an exact version, e.g. claude-code@2.1.332.",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def entry_json(entry: "CachedHost") -> dict[str, Any]:
    """One cached version as ``--json`` prints it."""
    record = entry.record
    return {
        "host": entry.host,
        "version": entry.version,
        "state": entry.state,
        "problem": entry.problem,
        "directory": str(entry.directory),
        "executable": str(entry.executable),
        "package": record.package if record else None,
        "integrity": entry.integrity,
        "sizeBytes": entry.size_bytes,
        "installedAt": record.installed_at if record else None,
    }


def install_progress(event: "HostInstallProgress") -> None:
    """Print an install step on stderr."""
    from ..views.hosts_render import install_line

    typer.echo(install_line(event), err=True)


def _split(text: str) -> tuple[str, str]:
    from ..hosts.cache import parse_pin

    pin = parse_pin(text)
    return pin.host, pin.version


@hosts_app.command(cls=HelpCommand)
def install(
    pins: Annotated[
        list[str],
        typer.Argument(
            metavar="HOST@VERSION...",
            help="Host versions to install, e.g. claude-code@2.1.332 opencode@1.18.33.",
            show_default=False,
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Install host versions into the managed host cache (a copy already there is checked).

    npm installs each from the registry it is configured for. Exit status: 0
    installed (or already there and intact); 2 a bad HOST@VERSION; 3 npm failed
    (eval-host-install-failed).
    """

    def action() -> int:
        from functools import partial

        import anyio

        from ..hosts.managed import install_host
        from ..views.hosts_render import format_size, short_integrity

        wanted = [_split(text) for text in pins]
        done: list[dict[str, Any]] = []
        for host, version in wanted:
            entry, installed = anyio.run(
                partial(install_host, host, version, on_progress=install_progress)
            )
            done.append({**entry_json(entry), "installed": installed})
            if not as_json:
                how = "installed" if installed else "already installed, integrity checked"
                typer.echo(
                    f"{host} {version}: {how} ({format_size(entry.size_bytes)}, "
                    f"{short_integrity(entry.integrity)}): {entry.executable}"
                )
        if as_json:
            print_json(done)
        return 0

    raise typer.Exit(guarded(action))


@hosts_app.command(name="list", cls=HelpCommand)
def list_cached(
    project: Annotated[
        Path | None,
        typer.Argument(
            metavar="PROJECT",
            help="Show the version this project pins (default: the current directory's, "
            "if it is a project).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the cached host versions: size, integrity, whether intact, and the project's pin.

    Every cached file is re-hashed, as a run does before it uses a version.
    """

    def action() -> int:
        from ..hosts.cache import host_cache_root
        from ..hosts.managed import list_hosts
        from ..views.hosts_render import hosts_table

        pinned = _project_pin(project)
        entries = list_hosts()
        if as_json:
            print_json(
                {
                    "cache": str(host_cache_root()),
                    "pinned": {"host": pinned[0], "version": pinned[1]} if pinned else None,
                    "hosts": [
                        {**entry_json(e), "pinned": pinned == (e.host, e.version)} for e in entries
                    ],
                }
            )
            return 0
        typer.echo(f"managed host cache: {host_cache_root()}")
        for line in hosts_table(entries, pinned) if entries else ["no host versions cached"]:
            typer.echo(line)
        if pinned and not any((e.host, e.version) == pinned and e.ok for e in entries):
            typer.echo(
                f"the project pins {pinned[0]} {pinned[1]}, which is not installed intact: "
                f"run `atlante-eval hosts install {pinned[0]}@{pinned[1]}` (or a run installs it)"
            )
        return 0

    raise typer.Exit(guarded(action))


def _project_pin(project: Path | None) -> tuple[str, str] | None:
    """The (host, version) the project pins; the current directory only if it is a project."""
    from ..diagnostics import DiagnosticError
    from ..project.config import load_project

    try:
        loaded = load_project(project)
    except DiagnosticError:
        if project is not None:
            raise
        return None
    version = loaded.eval.host_version
    return (loaded.eval.host, version) if version else None


@hosts_app.command(cls=HelpCommand)
def remove(pin: PinArg, as_json: JsonOption = False) -> None:
    """Remove a host version from the managed host cache.

    Exit status: 0 removed (or not there); 2 a bad HOST@VERSION; 3 a running
    atlante-eval process uses it (eval-host-in-use).
    """

    def action() -> int:
        from ..hosts.managed import cached_host, remove_host

        host, version = _split(pin)
        directory = cached_host(host, version).directory
        removed = remove_host(host, version)
        if as_json:
            print_json(
                {"host": host, "version": version, "removed": removed, "directory": str(directory)}
            )
        elif removed:
            typer.echo(f"removed {host} {version} ({directory})")
        else:
            typer.echo(f"{host} {version} is not installed ({directory}): nothing removed")
        return 0

    raise typer.Exit(guarded(action))


@hosts_app.command(cls=HelpCommand)
def path(pin: PinArg, as_json: JsonOption = False) -> None:
    """Print the executable of a cached host version, after checking its integrity.

    Exit status: 0 printed; 2 a bad HOST@VERSION; 3 not installed, or it failed
    its integrity check (eval-host-unavailable).
    """

    def action() -> int:
        from ..diagnostics import DiagnosticError, error
        from ..hosts.managed import cached_host

        host, version = _split(pin)
        entry = cached_host(host, version)
        if not entry.ok:
            why = "is not installed" if entry.state == "missing" else "failed its integrity check"
            raise DiagnosticError(
                [
                    error(
                        "eval-host-unavailable",
                        f"{host} {version} {why} in the managed host cache",
                        source=str(entry.directory),
                        cause=entry.problem,
                        next=f"run `atlante-eval hosts install {host}@{version}`",
                    )
                ]
            )
        if as_json:
            print_json(entry_json(entry))
        else:
            typer.echo(str(entry.executable))
        return 0

    raise typer.Exit(guarded(action))
