"""docs/python-api.md: its runnable examples run as written, and run_eval is shown as it is."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import hosts, run_eval
from atlante_eval.run.options import OPTION_FLAGS

DOC = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"


def _examples() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [block for block in blocks if 'if __name__ == "__main__":' in block]


@pytest.mark.parametrize("index", [0, 1], ids=["asyncio", "trio"])
def test_documented_example_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each runnable example evaluates the project in the current directory and exits 0."""
    assert len(_examples()) == 2
    prompt = actions({"write": "x.txt", "content": "done\n"}, {"usage": 10})
    root = make_project(
        tmp_path / "project",
        scenarios=[
            scenario("doc", prompt=prompt, checks=[{"type": "file-exists", "path": "x.txt"}])
        ],
        eval_extra={"budget": {"trials": 2}},
    )
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit) as exited:
        exec(compile(_examples()[index], str(DOC), "exec"), {"__name__": "__main__"})  # noqa: S102
    assert exited.value.code == 0
    output = capsys.readouterr()
    assert "doc" in output.out or "'pass': 2" in output.out
    assert len(list((root / ".atlante" / "eval").iterdir())) == 1


def test_run_eval_is_documented_as_it_is() -> None:
    """The documented signature and argument table of run_eval match the function and its flags."""
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"```python\n(async def run_eval\(.*?\) -> RunReport)\n```", text, re.S)
    assert block is not None
    [documented] = ast.parse(block.group(1) + ": ...").body
    assert isinstance(documented, ast.AsyncFunctionDef)
    arguments = documented.args
    shown = [(a.arg, None) for a in arguments.args] + [
        (a.arg, ast.literal_eval(d) if d is not None else inspect.Parameter.empty)
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    actual = [
        (name, None if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else p.default)
        for name, p in inspect.signature(run_eval).parameters.items()
    ]
    assert shown == actual
    table = text.split("| Argument | CLI flag | Meaning |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (`[^`]+`|—) \|", table, re.M))
    assert set(rows) == set(inspect.signature(run_eval).parameters)
    for field, flag in OPTION_FLAGS.items():
        assert rows[field] == f"`{flag}`", field
