"""OS-level isolation of trials (``--isolation os``): bubblewrap namespaces and a filtering proxy.

Modules: :mod:`.endpoints` (allow-list entries), :mod:`.preflight` (is the
mechanism usable here), :mod:`.bwrap` (the confined command line),
:mod:`.proxy` (the engine-side filtering proxy), :mod:`.forwarder` (the relay
run inside the sandbox) and :mod:`.trial` (one trial's confinements and what
they denied). Nothing is imported here, so loading a project stays cheap.
"""
