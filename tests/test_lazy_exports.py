"""Packages that re-export on first use: one table, mirrored for type checkers, every name real.

``report``, ``transcript``, ``trial``, ``checks`` and ``project`` list their
re-exports once (``_EXPORTS``) and import a module only when one of its names is
asked for (:mod:`atlante_eval._util.lazy`), so the run's launch path loads only what
its first session needs (``tests/test_launch_path.py``).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

LAZY_PACKAGES = ("report", "transcript", "trial", "checks", "project")


def _package(name: str) -> ModuleType:
    return importlib.import_module(f"atlante_eval.{name}")


def _type_checking_imports(package: ModuleType) -> dict[str, set[str]]:
    """The names the ``if TYPE_CHECKING:`` block of ``package``'s ``__init__`` imports."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text(encoding="utf-8"))
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                assert statement.level == 1
                for alias in statement.names:
                    assert alias.asname == alias.name, "re-exported under its own name"
                    found.setdefault(f".{statement.module}", set()).add(alias.name)
    return found


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_type_checking_imports_mirror_the_export_table(name: str) -> None:
    package = _package(name)
    exports = {module: set(names) for module, names in package._EXPORTS.items()}
    assert _type_checking_imports(package) == exports
    assert package.__all__ == sorted(n for names in exports.values() for n in names)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_export_is_the_object_its_module_defines(name: str) -> None:
    package = _package(name)
    for module, names in package._EXPORTS.items():
        home = importlib.import_module(module, package.__name__)
        for exported in names:
            assert getattr(package, exported) is getattr(home, exported), exported


def test_an_unknown_name_is_an_attribute_error() -> None:
    from atlante_eval import report

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        _ = report.NoSuchName
    assert not hasattr(report, "NoSuchName")


def test_a_name_loads_its_own_module_only() -> None:
    """``from atlante_eval.report import ProgressEvent`` loads ``report.events``, not the
    statistics, the arms or the loading of reports (each a module of its own)."""
    code = (
        "import json, sys\n"
        "from atlante_eval.report import ProgressEvent\n"
        "from atlante_eval.project import parse_trials\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('atlante_eval'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(result.stdout))
    assert {"atlante_eval.report.events", "atlante_eval.project.plan"} <= loaded
    for module in ("report.results", "report.arms", "report.loading", "stats", "checks"):
        assert f"atlante_eval.{module}" not in loaded, module
