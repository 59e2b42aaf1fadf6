"""The ``atlante-eval`` command line: thin wiring over the Python API.

Each command parses its options, calls the library, renders the result and
returns an exit code decided by :mod:`atlante_eval.diagnostics` or the report.
No traceback ever reaches the user: problems become diagnostics on stderr.
Commands import the library only when they run, so start-up stays fast.
"""

from importlib import import_module

from .app import app, main

__all__ = ["app", "main"]

#: Command modules, in the order ``--help`` lists their commands; each registers
#: its commands on ``app`` when imported.
COMMAND_MODULES = (
    "project",
    "run",
    "regrade",
    "selftest",
    "reports",
    "show",
    "html",
    "history",
    "quarantine",
    "hosts",
)

for _module in COMMAND_MODULES:
    import_module(f".{_module}", __name__)
