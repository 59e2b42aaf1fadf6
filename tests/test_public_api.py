"""The public surface of ``atlante_eval`` has one source; every name resolves and is documented."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import atlante_eval
from tools.public_api import ROOT, documented_names, problems

INIT = Path(atlante_eval.__file__)


def _type_checking_imports() -> dict[str, set[str]]:
    """The names the ``if TYPE_CHECKING:`` block of ``__init__.py`` imports, by module."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                assert statement.level == 1
                assert statement.module is not None
                for alias in statement.names:
                    assert alias.asname == alias.name, "re-exported under its own name"
                    found.setdefault(statement.module, set()).add(alias.name)
    return found


def test_all_is_derived_from_the_one_export_table() -> None:
    """``__all__`` is ``__version__`` plus exactly the names of ``_EXPORTS``."""
    exported = {name for names in atlante_eval._EXPORTS.values() for name in names}
    assert set(atlante_eval.__all__) == {"__version__", *exported}
    assert len(atlante_eval.__all__) == len(set(atlante_eval.__all__))


def test_type_checking_imports_mirror_the_export_table() -> None:
    """The imports type checkers see are exactly ``_EXPORTS``, module by module."""
    expected = {module: set(names) for module, names in atlante_eval._EXPORTS.items()}
    assert _type_checking_imports() == expected


def test_every_public_name_resolves_from_its_module() -> None:
    """Each public name loads lazily from the module ``_EXPORTS`` names for it."""
    import importlib

    for module, names in atlante_eval._EXPORTS.items():
        home = importlib.import_module(f"atlante_eval.{module}")
        for name in names:
            assert getattr(atlante_eval, name) is getattr(home, name)


def test_every_public_name_is_documented_and_nothing_else() -> None:
    """docs/python-api.md's table lists exactly ``__all__`` and is current."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert documented_names(text) == list(atlante_eval.__all__)
    assert problems(ROOT) == []


def test_a_stale_or_missing_table_is_reported(tmp_path: Path) -> None:
    """tools.docs_check fails when the table misses a name or is absent."""
    from tools.public_api import BEGIN, END, render_table

    document = tmp_path / "docs" / "python-api.md"
    document.parent.mkdir()
    stale = "\n".join(line for line in render_table().splitlines() if "`run_eval`" not in line)
    document.write_text(f"# API\n\n{BEGIN}\n{stale}\n{END}\n", encoding="utf-8")
    assert problems(tmp_path) == [
        "docs/python-api.md: the table of public names is out of date "
        "(run `python -m tools.public_api`)"
    ]
    document.write_text("# API\n", encoding="utf-8")
    assert [p.split(" (")[0] for p in problems(tmp_path)] == [
        "docs/python-api.md: the table of public names is missing"
    ]


def test_docs_state_what_is_internal() -> None:
    """The docs say explicitly that the other modules are internal."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert "## What is public" in text
    assert "Every other module under `atlante_eval`" in text
    assert "is internal" in text


def test_import_is_light() -> None:
    """Importing the package does not import the engine, pydantic models or anyio."""
    code = (
        "import sys, atlante_eval\n"
        "heavy = [m for m in ('atlante_eval.run.engine', 'anyio', 'pydantic')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
