"""``show RUN SCENARIO:I --files``: the files a trial left, from its stored final state.

The view lists what the agent changed since the baseline (added and modified
files with their contents, deletions, symbolic links, permission changes) and
what was not stored. Everything comes from the run directory (the manifest the
report names, contents from the run's store, each verified against its name);
all of it is untrusted text, so the renderer makes it printable. A text file's
content is shown up to :data:`SHOWN_BYTES`; binary files are described.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console
from rich.text import Text

from .._util.terminal import printable
from ..checks import ignore_matcher
from ..report import OutputModel, RunFiles, RunReport
from ..report.blobstore import BlobError, BlobStore
from ..report.final_state import FinalState, ManifestError, Omission, StateEntry
from ..report.state_files import read_final_state

__all__ = ["SHOWN_BYTES", "FileView", "FilesView", "files_view", "render_files"]

#: Most bytes of one file's content shown.
SHOWN_BYTES = 64 * 1024
#: Largest file whose content is read for showing (a larger one is described).
_READ_LIMIT = 8 * 1024 * 1024


class FileView(OutputModel):
    """One path the agent changed."""

    path: str
    """Path relative to the sandbox root."""
    change: str
    """``written`` (added or modified), ``deleted``, ``symlink`` or ``mode`` (permissions only)."""
    mode: str | None = None
    """Permission bits in octal (``0644``)."""
    size: int | None = None
    """Size in bytes."""
    target: str | None = None
    """A symbolic link's target."""
    binary: bool | None = None
    """The content is not UTF-8 text."""
    content: str | None = None
    """The text (up to 64 KiB), when it is text and could be read."""
    truncated: bool = False
    """Only the first 64 KiB are in ``content``."""
    runtime: bool = False
    """A host runtime artefact (``diff-allowlist`` ignores it)."""
    problem: str | None = None
    """Why the content could not be read."""


class FilesView(OutputModel):
    """A trial's stored final files: ``show RUN SCENARIO:I --files``."""

    run_id: str
    """The run id."""
    scenario: str
    """Scenario name."""
    i: int
    """Trial index."""
    manifest: str | None
    """The final-state manifest, relative to the run directory."""
    complete: bool
    """Everything was stored (the trial can be regraded)."""
    files: list[FileView]
    """The changed paths, sorted."""
    omitted: list[Omission]
    """What was not stored."""
    note: str | None
    """Why no files can be shown, when none can."""


def _mode(value: int | None) -> str | None:
    return None if value is None else f"{value:04o}"


def _file(entry: StateEntry, store: BlobStore | None, runtime: bool) -> FileView:
    view = FileView(
        path=entry.path,
        change="written" if entry.kind == "file" else entry.kind,
        mode=_mode(entry.mode),
        size=entry.size,
        target=entry.target,
        runtime=runtime,
    )
    if entry.kind != "file" or entry.blob is None or entry.size is None:
        return view
    if store is None or entry.size > _READ_LIMIT:
        reason = "the run's store is missing" if store is None else "too large to show"
        return view.model_copy(update={"problem": reason})
    try:
        data = store.read(entry.blob, size=entry.size)
    except BlobError as exc:
        return view.model_copy(update={"problem": str(exc)})
    try:
        text = data[:SHOWN_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < SHOWN_BYTES - 4 or b"\0" in data[:SHOWN_BYTES]:
            return view.model_copy(update={"binary": True})
        text = data[: exc.start].decode("utf-8")
    if "\0" in text:
        return view.model_copy(update={"binary": True})
    return view.model_copy(
        update={"binary": False, "content": text, "truncated": len(data) > SHOWN_BYTES}
    )


def _views(state: FinalState, store: BlobStore | None) -> list[FileView]:
    runtime = ignore_matcher(state.ignored)
    files = [_file(entry, store, runtime(entry.path)) for entry in state.changes]
    files += [
        FileView(path=e.path, change="mode", mode=_mode(e.mode), runtime=runtime(e.path))
        for e in state.modes
    ]
    return sorted(files, key=lambda view: view.path)


def files_view(report: RunReport, path: Path, name: str, index: int) -> FilesView:
    """The final files of trial ``index`` of scenario ``name`` in the report at ``path``."""
    trial = next(t for t in report.scenarios[name].trials if t.i == index)
    empty = FilesView(
        run_id=report.run_id,
        scenario=name,
        i=index,
        manifest=None,
        complete=False,
        files=[],
        omitted=[],
        note=None,
    )
    ref = trial.final_state
    if ref is None:
        why = (
            "the trial never reached grading"
            if trial.checks is None
            else "no final state was stored (the run used --no-final-state or an "
            "earlier atlante-eval)"
        )
        return empty.model_copy(update={"note": why})
    try:
        run = RunFiles.open_existing(path.parent)
    except OSError as exc:
        return empty.model_copy(update={"note": f"the run directory cannot be opened: {exc}"})
    with contextlib.closing(run):
        try:
            state = read_final_state(run, ref)
        except ManifestError as exc:
            return empty.model_copy(update={"manifest": ref.path, "note": str(exc)})
        store = BlobStore.open(run, create=False)
        with store if store is not None else contextlib.nullcontext():
            files = _views(state, store)
    return empty.model_copy(
        update={
            "manifest": ref.path,
            "complete": state.complete,
            "files": files,
            "omitted": state.omitted,
        }
    )


_CHANGE_STYLE = {"written": "green", "deleted": "red", "symlink": "cyan", "mode": "yellow"}


def _heading(file: FileView) -> Text:
    line = Text(f"{file.change:<8} ", style=_CHANGE_STYLE.get(file.change, "default"))
    line.append(printable(file.path), style="bold")
    details = []
    if file.target is not None:
        details.append(f"-> {printable(file.target)}")
    if file.mode is not None:
        details.append(f"mode {file.mode}")
    if file.size is not None:
        details.append(f"{file.size} bytes")
    if file.binary:
        details.append("binary")
    if file.runtime:
        details.append("host runtime artefact")
    if details:
        line.append("  " + ", ".join(details), style="bright_black")
    return line


def render_files(view: FilesView, console: Console) -> None:
    """Draw the trial's stored final files."""
    console.print(Text(f"{printable(view.scenario)}:{view.i} final files (run {view.run_id})"))
    if view.note is not None:
        console.print(Text(printable(view.note), style="yellow"))
        return
    if not view.complete:
        console.print(
            Text("the final state is incomplete: this trial cannot be regraded", style="yellow")
        )
    if not view.files:
        console.print(Text("the agent changed no file"))
    for file in view.files:
        console.print(_heading(file))
        if file.problem is not None:
            console.print(Text(f"  ({printable(file.problem)})", style="yellow"))
        elif file.content is not None:
            for line in file.content.splitlines():
                console.print(Text("  │ " + printable(line)))
            if file.truncated:
                console.print(Text("  … (only the first 64 KiB shown)", style="bright_black"))
    for omission in view.omitted:
        console.print(
            Text(
                f"not stored: {printable(omission.path)}: {printable(omission.reason)}",
                style="yellow",
            )
        )
