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

from .gitops import Changes, GitError, collect_changes, make_skeleton
from .process import (
    ProcessResult,
    SpawnPlan,
    SpawnWrapper,
    confined_spawns,
    kill_all_process_groups,
    run_process,
)
from .sandbox import (
    Sandbox,
    SandboxError,
    TrialDirs,
    create_run_root,
    file_digest,
    remove_tree,
    trial_dirs,
    trial_sandbox,
)

__all__ = [
    "Changes",
    "GitError",
    "ProcessResult",
    "Sandbox",
    "SandboxError",
    "SpawnPlan",
    "SpawnWrapper",
    "TrialDirs",
    "collect_changes",
    "confined_spawns",
    "create_run_root",
    "file_digest",
    "kill_all_process_groups",
    "make_skeleton",
    "remove_tree",
    "run_process",
    "trial_dirs",
    "trial_sandbox",
]
