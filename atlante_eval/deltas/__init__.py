"""Why did it change? Behaviour deltas between two sets of trials, from reports and transcripts.

:mod:`.trials` is one side (:class:`TrialSet`: trials and their transcripts);
:mod:`.steps` turns a transcript into its action path and :mod:`.align` aligns
two paths; :mod:`.checks`, :mod:`.usage`, :mod:`.paths` and :mod:`.effort`
compute one kind of delta each, and :mod:`.cause` the one-line probable cause;
:mod:`.core` puts them together for two runs or any two sets of trials. The
results are :mod:`atlante_eval.report.behaviour`'s models. See docs/compare.md.
"""

from __future__ import annotations

from .align import align, edit_distance, first_divergence
from .cause import CAUSE_LABEL, effort_summary
from .core import behaviour_deltas, compare_trial_sets, explain_comparison
from .steps import fold, step_key, step_label, trial_steps
from .trials import TrialSet, read_entries

__all__ = [
    "CAUSE_LABEL",
    "TrialSet",
    "align",
    "behaviour_deltas",
    "compare_trial_sets",
    "edit_distance",
    "effort_summary",
    "explain_comparison",
    "first_divergence",
    "fold",
    "read_entries",
    "step_key",
    "step_label",
    "trial_steps",
]
