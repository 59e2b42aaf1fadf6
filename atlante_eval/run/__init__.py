"""A run: the runner, the engine that drives trials, the run's lifecycle and journal.

:mod:`.runner` (``run_eval``) takes what :mod:`.prepare` decided before the run
directory (suite, selection, budget, host and isolation, plan, fingerprints,
resume) and runs :mod:`.engine` inside :mod:`.lifecycle` (reserve → meta →
trials → finalize → publish); :mod:`.tracking` records finished trials,
journalling them (:mod:`.journal`) for ``--resume``, and :mod:`.failures` says
what stopped a run. :mod:`.options` is the one run-options model (the CLI and
``run_eval`` both build it) and :mod:`.isolate` the one isolation resolver (``run``
and ``selftest`` both call it); :mod:`.balance` splits ``--shard`` runs;
:mod:`.waves` drives ``--until-decided`` wave by wave, decided by :mod:`.adaptive`
(against BASE) or :mod:`.adaptive_arms` (each arm against the control arm);
:mod:`.grading` is the one grading path, which :mod:`.regrade` (``regrade_run``,
with :mod:`.regrade_basis`, :mod:`.regrade_sides` and :mod:`.regrader`) shares to
judge stored trials again;
:mod:`.record` and :mod:`.recorder` record the published run in the history (in a
process of its own); :mod:`.summary` and :mod:`.limits` are small helpers. Only the
options model is re-exported (loaded on first use): the engine is imported by path.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .options import MAX_RETRY_INFRA as MAX_RETRY_INFRA
    from .options import RunOptions as RunOptions
    from .options import run_options as run_options

__all__ = [
    "MAX_RETRY_INFRA",
    "RunOptions",
    "run_options",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use: the history recorder's process (:mod:`.recorder`) is a module
    # of this package and needs none of the options' models.
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(".options", __name__), name)
    globals()[name] = value
    return value
