"""The runnable examples in docs/python-api.md run as written (stand-in host)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import hosts

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
