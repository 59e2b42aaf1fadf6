"""Terminal text of the managed host cache: install progress lines and ``hosts list``.

Paths and npm's words are shown with their control characters escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._util.terminal import printable
from ..report import HostInstallProgress

if TYPE_CHECKING:
    from ..hosts.cache import CachedHost

__all__ = ["format_size", "hosts_table", "install_line", "short_integrity"]


def format_size(size: int | None) -> str:
    """``412 MB``, ``2.9 kB`` (decimal units, as npm and ``du --si`` print them)."""
    if size is None:
        return "-"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"
    return f"{size} B"


def short_integrity(integrity: str | None) -> str:
    """The first characters of an npm integrity (``sha512-tvSh6bLvEbd97APD…``)."""
    if not integrity:
        return "-"
    return integrity if len(integrity) <= 24 else integrity[:23] + "…"


def install_line(event: HostInstallProgress) -> str:
    """The progress line of one install step."""
    what = f"{event.host} {event.version}"
    if event.stage == "waiting":
        return (
            f"waiting for another atlante-eval process to finish installing {what} "
            f"into {event.directory}"
        )
    if event.stage == "installing":
        why = (
            f"the cached {what} failed its integrity check ({event.reason}): reinstalling it"
            if event.reason
            else f"installing {what} into the managed host cache"
        )
        return printable(f"{why} with `{event.command}` (hundreds of MB: this can take minutes)")
    seconds = (event.elapsed_ms or 0) / 1000
    return (
        f"installed {what} in {seconds:.1f} s: {format_size(event.size_bytes)}, integrity "
        f"{short_integrity(event.integrity)} ({event.directory})"
    )


def hosts_table(entries: Sequence[CachedHost], pinned: tuple[str, str] | None) -> list[str]:
    """``hosts list``'s rows: host, version, size, integrity, state, and the project's pin."""
    header = ("HOST", "VERSION", "SIZE", "INTEGRITY", "STATE")
    rows = [header]
    for entry in entries:
        state = "ok" if entry.ok else f"{entry.state}: {entry.problem}"
        if pinned == (entry.host, entry.version):
            state += " (pinned by the project)"
        rows.append(
            (
                entry.host,
                entry.version,
                format_size(entry.size_bytes),
                short_integrity(entry.integrity),
                state,
            )
        )
    shown = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in shown) for i in range(len(header) - 1)]
    return [
        "  ".join([*(c.ljust(widths[i]) for i, c in enumerate(row[:-1])), row[-1]]) for row in shown
    ]
