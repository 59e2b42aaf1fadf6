"""The documentation check: every diagnostic code documented, every relative link alive."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import write_text

from atlante_eval.diagnostics import CODES
from tools.docs_check import ROOT, anchors, check_docs, links, main


def _docs(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        write_text(tmp_path / name, text)
    return tmp_path


def test_repository_docs_are_current() -> None:
    """docs/diagnostics.md documents every code in CODES and no doc link is broken."""
    assert check_docs(ROOT) == []


def test_every_code_has_its_own_heading() -> None:
    """Each code has a ``#### `code` `` section in docs/diagnostics.md."""
    text = (ROOT / "docs" / "diagnostics.md").read_text(encoding="utf-8")
    missing = [code for code in CODES if f"#### `{code}`\n" not in text]
    assert missing == []


def test_missing_code_is_reported(tmp_path: Path) -> None:
    """A code absent from docs/diagnostics.md is one problem naming the code."""
    root = _docs(tmp_path, {"docs/diagnostics.md": "# D\n\n`known-code` is here.\n"})
    assert check_docs(root, codes=["known-code", "new-code"]) == [
        "docs/diagnostics.md: code `new-code` is not documented"
    ]


def test_missing_diagnostics_page_is_reported(tmp_path: Path) -> None:
    """Without docs/diagnostics.md the check fails."""
    (tmp_path / "docs").mkdir()
    assert check_docs(tmp_path, codes=["x"]) == ["docs/diagnostics.md is missing"]


def test_broken_relative_links_are_reported(tmp_path: Path) -> None:
    """Relative links to missing files or headings fail, in docs/*.md and README.md."""
    root = _docs(
        tmp_path,
        {
            "docs/diagnostics.md": "# Diagnostics\n\n## Some heading\n",
            "docs/guide.md": (
                "See [ok](diagnostics.md), [anchor](diagnostics.md#some-heading),\n"
                "[gone](missing.md), [bad anchor](diagnostics.md#nope) and [self](#guide).\n"
                "[ref]: ./also-missing.md\n\n# Guide\n"
            ),
            "README.md": "[docs](docs/guide.md) and [broken](docs/none.md)\n",
        },
    )
    assert check_docs(root, codes=[]) == [
        "docs/guide.md: link 'missing.md' points at a missing file",
        "docs/guide.md: link 'diagnostics.md#nope' points at a missing heading",
        "docs/guide.md: link './also-missing.md' points at a missing file",
        "README.md: link 'docs/none.md' points at a missing file",
    ]


def test_external_links_code_and_absolute_paths(tmp_path: Path) -> None:
    """URLs and links inside code are not checked; absolute paths are refused."""
    root = _docs(
        tmp_path,
        {
            "docs/diagnostics.md": "# D\n",
            "docs/a.md": (
                "[web](https://example.test/x.md) [mail](mailto:a@b.test)\n"
                "`[not](a-link.md)`\n\n```md\n[also not](missing.md)\n```\n"
                "[abs](/etc/passwd)\n"
            ),
        },
    )
    assert check_docs(root, codes=[]) == [
        "docs/a.md: link '/etc/passwd' is absolute; use a relative path"
    ]


def test_links_and_anchors_parsing() -> None:
    """Links are found inline and by reference; anchors follow GitHub's heading slugs."""
    text = '[a](x.md "title") ![img](i.png)\n[r]: <y.md>\n'
    assert sorted(links(text)) == ["i.png", "x.md", "y.md"]
    headings = "# Discovery: the `scenarios` glob\n## A & B\n## A & B\n```\n# not\n```\n"
    assert anchors(headings) == {"discovery-the-scenarios-glob", "a--b", "a--b-1"}


def test_main_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """main() exits 1 with one line per problem on stderr, 0 with an ok line otherwise."""
    root = _docs(tmp_path, {"docs/diagnostics.md": "[x](nowhere.md)\n"})
    assert main([str(root)]) == 1
    captured = capsys.readouterr()
    assert "docs/diagnostics.md: link 'nowhere.md' points at a missing file" in captured.err
    assert main([str(ROOT)]) == 0
    assert capsys.readouterr().out.startswith("docs_check: ok")


def test_a_documented_signature_that_drifted_is_reported() -> None:
    """A python block holding a public function's def must list its parameters and defaults."""
    import inspect

    from atlante_eval import run_selftest
    from tools.public_api import signature_problems

    stale = "```python\nasync def run_selftest(\n    path: str | None = None,\n) -> X\n```\n"
    names = ", ".join(inspect.signature(run_selftest).parameters)
    assert "isolation" in names
    assert signature_problems(stale) == [
        "docs/python-api.md: the signature of run_selftest differs from the code "
        f"(its parameters: {names})"
    ]
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert signature_problems(text) == []
    wrong_default = text.replace("    keep: bool = False,\n", "    keep: bool = True,\n", 1)
    assert wrong_default != text
    assert len(signature_problems(wrong_default)) == 1
