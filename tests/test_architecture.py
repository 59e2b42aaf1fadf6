"""The package's shape: the layer contract holds and no module imports itself back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

import atlante_eval

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(atlante_eval.__file__).parent


def _cycles(graph: grimp.ImportGraph, skip: frozenset[str] = frozenset()) -> list[list[str]]:
    """Groups of modules that import each other, directly or not (each group sorted)."""
    modules = sorted(graph.modules - skip)

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for child in graph.find_modules_directly_imported_by(todo.pop()) - skip:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen

    reach = {module: reachable(module) for module in modules}
    groups = {
        tuple(sorted(m for m in reach[module] if module in reach[m]))
        for module in modules
        if module in reach[module]
    }
    return sorted(list(group) for group in groups)


def test_the_layer_contract_holds() -> None:
    """`lint-imports` (the contract in pyproject.toml, as `nox -s lint` runs it) passes."""
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports; exit(lint_imports())"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_no_module_imports_itself_back_type_checking_imports_included() -> None:
    """No import cycle between the package's modules, counting TYPE_CHECKING-only imports."""
    graph = grimp.build_graph("atlante_eval", exclude_type_checking_imports=False)
    # the root package's lazy public API imports from everywhere by design
    assert _cycles(graph, skip=frozenset({"atlante_eval", "atlante_eval.__main__"})) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    """The check above can fail: a two-module cycle is reported."""
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.y", imported="a.z")
    assert _cycles(graph) == [["a.x", "a.y"]]


def test_the_top_level_stays_small() -> None:
    """At most 25 modules sit at the top of the package; the rest live in topic subpackages."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 25, top
