"""Read trials' final states back from a run directory, and carry them to another run.

A manifest is found by the path the report gives (``finalState.path``), opened
below the run directory without following links, and accepted only when it
hashes to the report's ``finalState.digest``. ``--resume`` and ``regrade`` carry
final states to the new run directory: the manifest is copied and its contents
are linked (or copied) into the new run's store, so the new run can be shown,
regraded and kept on its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from .blobstore import BlobStore
from .final_state import MAX_MANIFEST_BYTES, FinalState, ManifestError, parse_manifest
from .models import FinalStateRef, TrialResult
from .run_files import TRIALS_DIR, RunFiles, TrialFiles

__all__ = ["carry_final_states", "carry_trial_states", "read_final_state", "state_blobs"]


def _manifest_dir(run: RunFiles, ref: FinalStateRef) -> tuple[TrialFiles, str]:
    """The directory holding ``ref``'s manifest (owned) and the manifest's name.

    Raises:
        ManifestError: the path is not ``trials/<scenario>/<i>/<name>`` or cannot be opened.
    """
    parts = ref.path.split("/")
    if len(parts) != 4 or parts[0] != TRIALS_DIR or any(p in ("", ".", "..") for p in parts):
        raise ManifestError(f"the report names no trial folder for the final state: {ref.path}")
    fd = run.open_dir(parts[:-1], create=False)
    if fd is None:
        raise ManifestError(f"{ref.path} is missing from the run directory")
    return TrialFiles(fd, "/".join(parts[:-1])), parts[-1]


def read_final_state(run: RunFiles, ref: FinalStateRef) -> FinalState:
    """The manifest ``ref`` names in the run directory ``run``.

    Raises:
        ManifestError: it is missing, not a regular file, too large, changed since
            the report was written, or not a manifest.
    """
    folder, name = _manifest_dir(run, ref)
    with folder:
        data = folder.read(name, limit=MAX_MANIFEST_BYTES)
    if data is None:
        raise ManifestError(f"{ref.path} is missing, not a regular file, or too large")
    return parse_manifest(data, ref)


def state_blobs(state: FinalState) -> set[str]:
    """Every content digest a final state refers to."""
    entries = (*state.prepared, *state.changes, *state.git)
    return {entry.blob for entry in entries if entry.blob is not None}


def carry_final_states(
    source: RunFiles, target: RunFiles, refs: Iterable[FinalStateRef]
) -> list[FinalStateRef]:
    """Copy the final states ``refs`` name from ``source`` to ``target`` (same paths).

    Returns the references carried whole (a damaged or missing one is left behind:
    the trial then cannot be regraded from the new run).
    """
    carried: list[FinalStateRef] = []
    source_store = BlobStore.open(source, create=False)
    target_store = BlobStore.open(target)
    if source_store is None or target_store is None:
        for store in (source_store, target_store):
            if store is not None:
                store.close()
        return carried
    with source_store, target_store:
        for ref in refs:
            with contextlib.suppress(ManifestError, OSError):
                carried.append(_carry(source, target, ref, source_store, target_store))
    return carried


def _carry(
    source: RunFiles,
    target: RunFiles,
    ref: FinalStateRef,
    source_store: BlobStore,
    target_store: BlobStore,
) -> FinalStateRef:
    folder, name = _manifest_dir(source, ref)
    with folder:
        data = folder.read(name, limit=MAX_MANIFEST_BYTES)
    if data is None:
        raise ManifestError(f"{ref.path} is missing")
    state = parse_manifest(data, ref)
    for digest in sorted(state_blobs(state)):
        source_store.copy_to(target_store, digest)
    parts = ref.path.split("/")
    fd = target.open_dir(parts[:-1])
    if fd is None:
        raise ManifestError(f"cannot create {'/'.join(parts[:-1])} in the new run directory")
    with TrialFiles(fd, "/".join(parts[:-1])) as destination, destination.create(name) as out:
        out.write(data)
    return ref


def carry_trial_states(source: Path, target: RunFiles, trials: Iterable[TrialResult]) -> None:
    """Carry the final states of ``trials`` from the run directory ``source`` to ``target``.

    What cannot be carried is left behind (never an error: the trials still stand).
    """
    refs = [trial.final_state for trial in trials if trial.final_state is not None]
    if not refs:
        return
    try:
        origin = RunFiles.open_existing(source)
    except OSError:
        return
    with contextlib.closing(origin):
        carry_final_states(origin, target, refs)
