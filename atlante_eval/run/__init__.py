"""A run: the runner, the engine that drives trials, the run's lifecycle and journal.

:mod:`.runner` (``run_eval``) wires a loaded suite, a host and options into
:mod:`.engine` inside :mod:`.lifecycle` (reserve → meta → trials → finalize →
publish), journalling finished trials (:mod:`.journal`) for ``--resume``;
:mod:`.options` is the one run-options model; :mod:`.adaptive` drives
``--until-decided``; :mod:`.summary` and :mod:`.limits` are small helpers. Only
the options model is re-exported: the engine is imported by path.
"""

from __future__ import annotations

from .options import MAX_RETRY_INFRA, RunOptions, run_options

__all__ = [
    "MAX_RETRY_INFRA",
    "RunOptions",
    "run_options",
]
