"""atlante-eval: evaluate coding-agent harnesses with deterministic checks."""

from ._version import __version__
from .diagnostics import Diagnostic, DiagnosticError
from .suite import Suite, load_suite

__all__ = ["Diagnostic", "DiagnosticError", "Suite", "__version__", "load_suite"]
