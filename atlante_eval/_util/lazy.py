"""Package re-exports that load their module on first use.

A package ``__init__`` lists what it re-exports once, by module (``_EXPORTS``),
and answers a missing attribute with :func:`load_export`: ``from ..report import
ProgressEvent`` then imports :mod:`..report.events` alone, not every module the
package re-exports, so the run's launch path imports only what its first session
needs. The ``if TYPE_CHECKING:`` block of each such ``__init__`` repeats the table
for type checkers; ``tests/test_lazy_exports.py`` holds the two equal.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any

__all__ = ["export_homes", "load_export"]


def export_homes(exports: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each exported name → the module (relative to its package) that defines it."""
    return {name: module for module, names in exports.items() for name in names}


def load_export(package: str, homes: Mapping[str, str], name: str) -> Any:
    """Import ``name`` from its module, keep it on the package and return it.

    Raises:
        AttributeError: ``name`` is not one of the package's exports.
    """
    module = homes.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(module, package), name)
    setattr(sys.modules[package], name, value)
    return value
