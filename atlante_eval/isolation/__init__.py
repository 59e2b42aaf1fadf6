"""OS-level isolation of trials (``--isolation os``): bubblewrap namespaces and a filtering proxy.

Modules: :mod:`.preflight` (is the mechanism usable here), :mod:`.bwrap` (the
confined command line), :mod:`.proxy` (the engine-side filtering proxy),
:mod:`.forwarder` (the relay run inside the sandbox), :mod:`.limits` (per-trial
resource limits, with the control groups of :mod:`.cgroups` and
:mod:`.hierarchies` and the tmpfs watch of :mod:`.tmpfs`) and :mod:`.trial` (one
trial's confinements, limits and what they denied). A run turns its mode and
limits into settings with :func:`atlante_eval.run.isolate.resolve_isolation` and
:func:`atlante_eval.run.isolate.resolve_limits_settings`. Nothing is imported
here, so loading a project stays cheap; a run under ``none`` without limits loads
only the settings of :mod:`.limits`, never the machinery.
"""
