"""A trial's final state: the file format ``regrade`` rebuilds a trial's sandbox from.

Each trial that reached grading leaves ``trials/<scenario>/<i>/final-state.json``
in the run directory: what host preparation and setup added to the fixture and
native outputs (``prepared``), what the agent changed since the baseline
(``changes``), every directory of the final tree, the sandbox's own ``.git``
whole, and what the trial was asked (``task``). File contents are named by
SHA-256 and live in the run's store (:mod:`.blobstore`). The report names the
manifest and its digest (:class:`~.models.FinalStateRef`), so a manifest changed
after the run is refused. See docs/regrade.md.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from typing import Literal

from pydantic import ValidationError

from .models import FinalStateRef, OutputModel

__all__ = [
    "FINAL_STATE_FILE",
    "FINAL_STATE_VERSION",
    "MAX_MANIFEST_BYTES",
    "EntryKind",
    "FinalState",
    "ManifestError",
    "Omission",
    "StateEntry",
    "TaskBasis",
    "parse_manifest",
    "prompt_digest",
]

#: Name of a trial's manifest in its run-directory folder.
FINAL_STATE_FILE = "final-state.json"
#: Version of the manifest format.
FINAL_STATE_VERSION: Literal[1] = 1
#: Largest manifest read back.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024

#: What stands at a path: a regular file, a symbolic link, a directory, or nothing.
EntryKind = Literal["file", "symlink", "dir", "deleted"]


class ManifestError(Exception):
    """Raised by :func:`parse_manifest` for a manifest that is damaged or not the reported one."""


class StateEntry(OutputModel):
    """One path of a trial's tree as the trial left it."""

    path: str
    """Path relative to the sandbox root (``/``-separated)."""
    kind: EntryKind
    """What stands there."""
    mode: int | None = None
    """Permission bits of a file or directory (``st_mode & 0o7777``)."""
    blob: str | None = None
    """SHA-256 of a file's content: its name in the run's store."""
    size: int | None = None
    """A file's size in bytes."""
    target: str | None = None
    """A symbolic link's target, as written."""


class Omission(OutputModel):
    """A path whose state was not stored."""

    path: str
    """The path (undecodable bytes shown as U+FFFD)."""
    reason: str
    """Why (over the cap, unreadable, a special file, ...)."""


class TaskBasis(OutputModel):
    """What the trial was asked: ``regrade`` refuses a scenario whose task changed since."""

    fixture: str | None = None
    """SHA-256 over the fixture tree (paths, exec bits, contents)."""
    native: str | None = None
    """The native-output manifest digest (the harness revision)."""
    prompt: str
    """SHA-256 of the prompt."""
    agent: str | None = None
    """``task.agent``."""
    setup: list[str] | None = None
    """``task.setup``."""


class FinalState(OutputModel):
    """One trial's final state (``final-state.json``)."""

    version: Literal[1]
    """Format version."""
    scenario: str
    """Scenario name."""
    trial: int
    """Trial index."""
    task: TaskBasis
    """What the trial was asked."""
    ignored: list[str]
    """The host's runtime-artefact globs ``diff-allowlist`` ignored in this trial."""
    baseline_digest: str
    """Digest of the baseline tree (per path: type, exec bit, blob id or link target)."""
    prepared: list[StateEntry]
    """What host preparation and setup changed in the fixture and native outputs."""
    changes: list[StateEntry]
    """What the agent changed since the baseline (host runtime artefacts included)."""
    modes: list[StateEntry]
    """Files the agent left with the baseline's content but other permission bits."""
    dirs: list[StateEntry]
    """Every directory of the final tree with its mode (the top-level ``.git`` aside)."""
    git: list[StateEntry]
    """The sandbox's top-level ``.git`` at the end, whole (empty: there was none)."""
    complete: bool
    """Everything was stored: the trial can be regraded."""
    omitted: list[Omission]
    """What was not stored (at most 100 listed; ``omittedCount`` counts all)."""
    omitted_count: int
    """How many paths were not stored."""
    cap_bytes: int
    """The most content bytes one trial's state may refer to."""
    bytes: int
    """Content bytes the state refers to."""

    def to_bytes(self) -> builtins.bytes:
        """The manifest file's content (compact JSON, one line)."""
        return (self.model_dump_json(by_alias=True, exclude_none=True) + "\n").encode("utf-8")


def prompt_digest(prompt: str) -> str:
    """SHA-256 of a prompt's UTF-8 text (undecodable parts as they were read)."""
    return hashlib.sha256(prompt.encode("utf-8", errors="surrogateescape")).hexdigest()


def parse_manifest(data: bytes, ref: FinalStateRef) -> FinalState:
    """Parse a manifest, refusing it unless it is the one ``ref`` (the report) names.

    Raises:
        ManifestError: its digest differs from the report's, or it is not a manifest.
    """
    if hashlib.sha256(data).hexdigest() != ref.digest:
        raise ManifestError(f"{ref.path} changed since the run (its digest differs)")
    try:
        return FinalState.model_validate(json.loads(data))
    except (ValueError, ValidationError, RecursionError) as exc:
        raise ManifestError(f"{ref.path} is not a final-state manifest: {exc}") from exc
