"""One trial's sandbox: assembly, child processes, the git baseline and the tree state.

:mod:`.sandbox` assembles and removes a trial's directories; :mod:`.process` runs
a child process with a bounded, ordered shutdown (its pipes in :mod:`.pipes`, the
live process groups in :mod:`.groups`, the fresh session keyring each confined
child starts in in :mod:`.keyring`); :mod:`.gitops` takes the
baseline and collects what changed; :mod:`.treestate` is the baseline snapshot
kept outside the agent's reach; :mod:`.finalstate` records a trial's final state
and :mod:`.rebuild` rebuilds its sandbox from it (``regrade``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._util.lazy import export_homes, load_export

#: Every re-exported name, by the module that defines it (loaded on first use).
_EXPORTS: dict[str, tuple[str, ...]] = {
    ".gitops": ("Changes", "GitError", "collect_changes", "make_skeleton"),
    ".process": (
        "ProcessResult",
        "SpawnPlan",
        "SpawnWrapper",
        "confined_spawns",
        "kill_all_process_groups",
        "run_process",
    ),
    ".sandbox": (
        "Sandbox",
        "SandboxError",
        "TrialDirs",
        "create_run_root",
        "file_digest",
        "remove_tree",
        "trial_dirs",
        "trial_sandbox",
    ),
}

if TYPE_CHECKING:
    from .gitops import Changes as Changes
    from .gitops import GitError as GitError
    from .gitops import collect_changes as collect_changes
    from .gitops import make_skeleton as make_skeleton
    from .process import ProcessResult as ProcessResult
    from .process import SpawnPlan as SpawnPlan
    from .process import SpawnWrapper as SpawnWrapper
    from .process import confined_spawns as confined_spawns
    from .process import kill_all_process_groups as kill_all_process_groups
    from .process import run_process as run_process
    from .sandbox import Sandbox as Sandbox
    from .sandbox import SandboxError as SandboxError
    from .sandbox import TrialDirs as TrialDirs
    from .sandbox import create_run_root as create_run_root
    from .sandbox import file_digest as file_digest
    from .sandbox import remove_tree as remove_tree
    from .sandbox import trial_dirs as trial_dirs
    from .sandbox import trial_sandbox as trial_sandbox

_HOMES = export_homes(_EXPORTS)

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    return load_export(__name__, _HOMES, name)
