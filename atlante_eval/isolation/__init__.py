"""OS-level isolation of trials (``--isolation os``): bubblewrap namespaces and a filtering proxy.

Modules: :mod:`.preflight` (is the mechanism usable here), :mod:`.bwrap` (the
confined command line), :mod:`.proxy` (the engine-side filtering proxy),
:mod:`.forwarder` (the relay run inside the sandbox) and :mod:`.trial` (one
trial's confinements and what they denied). A run turns its mode into settings
with :func:`atlante_eval.run.isolate.resolve_isolation`. Nothing is imported
here, so loading a project stays cheap.
"""
