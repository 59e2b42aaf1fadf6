"""The command outputs the README and the tutorial show are what following them prints.

Each test follows a document with the installed ``atlante-eval`` console script
and compares the masked output with ``tests/golden/docs/<name>.txt``
(``ATLANTE_UPDATE_GOLDEN=1`` rewrites the goldens; ``python -m tools.docs_outputs``
then rewrites the documents' blocks). ``tools.docs_check`` compares the
documents' marked blocks with those goldens, so a change of output that the
docs do not follow fails one or the other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from factory import write_text
from test_newcomer import CONSOLE

from tools.docs_outputs import GOLDEN_DIR, marked_blocks, output_problems, update_docs

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "examples" / "quickstart"
#: The run id and durations the documents show.
DOC_RUN_ID = "2026-11-30T10-32-11-a3f2"
FIXTURE = "eval/fixtures/stats-lib"
#: A selftest progress line (``add-variance · null agent: pass (0ms)``).
PROGRESS = re.compile(r"^\S+ · .+: \S+ \(\d")
ONE_ASSERTION = "from stats import variance; assert variance([1, 2, 3, 4]) == 1.25"
VARIANCE = '''

def variance(values: list[float]) -> float:
    """Return the population variance of ``values`` (which must not be empty)."""
    if not values:
        raise ValueError("variance() of an empty list")
    centre = mean(values)
    return sum((v - centre) ** 2 for v in values) / len(values)
'''


def mask(text: str, sandbox_root: str = "") -> str:
    """The documents' run id and durations; a sandbox path as ``...``."""
    text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-[0-9a-f]{4}", DOC_RUN_ID, text)
    text = re.sub(r"\(\d+(\.\d+)?m?s\)", "(0ms)", text)
    return re.sub(r"/\S*?/project/", ".../project/", text)


def golden(name: str, text: str) -> None:
    """Compare ``text`` with the golden ``name`` (``ATLANTE_UPDATE_GOLDEN=1`` rewrites it)."""
    path = REPO / GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("ATLANTE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def console(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed console script (a check's output may quote a Python traceback)."""
    return subprocess.run(
        [str(CONSOLE), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def selftest(project: Path, *args: str) -> tuple[int, str]:
    """``$ atlante-eval selftest . ARGS`` in ``project``: the status, and what a terminal shows."""
    result = console("selftest", ".", *args, cwd=project)
    assert "Traceback" not in result.stderr.split("\ncause: ")[0]
    command = " ".join(("$ atlante-eval selftest .", *args))
    return result.returncode, mask(f"{command}\n{_in_order(result.stderr)}{result.stdout}")


def _in_order(stderr: str) -> str:
    """Selftest's progress lines sorted (its agents run in parallel), the rest in place."""
    lines = stderr.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if PROGRESS.match(line)]
    for i, line in zip(at, sorted(lines[i] for i in at), strict=True):
        lines[i] = line
    return "".join(lines)


def _scenario(checks: list[dict[str, object]]) -> dict[str, object]:
    """docs/writing-scenarios.md step 2's add-variance, with ``checks``."""
    return {
        "$schema": "https://atlante.sh/schema/v0.1/eval-scenario.json",
        "version": "0.1",
        "name": "add-variance",
        "description": "Add a population variance function and export it from the package.",
        "task": {
            "fixture": FIXTURE,
            "agent": "maintainer",
            "prompt": "Add variance(values) to stats/core.py: the population variance of a "
            "non-empty list of numbers (raise ValueError for an empty list), and export it "
            "from the stats package.",
        },
        "checks": checks,
    }


def _write_scenario(project: Path, checks: list[dict[str, object]]) -> None:
    document = json.dumps(_scenario(checks), indent=2) + "\n"
    write_text(project / "eval" / "scenarios" / "add-variance.eval.json", document)


def _command(assertion: str) -> dict[str, object]:
    return {"type": "command", "run": ["python3", "-c", assertion]}


def test_following_the_tutorial_prints_what_it_shows(tmp_path: Path) -> None:
    """docs/writing-scenarios.md steps 0-5, run for real: each marked output, and the claims."""
    project = tmp_path / "my-project"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns("eval"))
    shutil.copytree(QUICKSTART / "eval", project / "eval")
    shutil.rmtree(project / ".atlante" / "eval", ignore_errors=True)
    # Step 2: a vacuous check.
    _write_scenario(project, [{"type": "file-exists", "path": "stats/core.py"}])
    status, shown = selftest(project, "--scenario", "add-variance")
    assert status == 1
    golden("tutorial-step-2", shown)
    _write_scenario(project, [_command(ONE_ASSERTION)])
    # Step 3: a reference solution that forgets the export, then one that does not.
    solution = project / "eval" / "scenarios" / "solutions" / "add-variance"
    core = (project / FIXTURE / "stats" / "core.py").read_text(encoding="utf-8")
    write_text(solution / "files" / "stats" / "core.py", core + VARIANCE)
    status, shown = selftest(project, "--scenario", "add-variance")
    assert status == 1
    golden("tutorial-step-3-unexported", shown)
    init = (project / FIXTURE / "stats" / "__init__.py").read_text(encoding="utf-8")
    exported = init.replace(
        "from .core import mean, median", "from .core import mean, median, variance"
    )
    assert exported != init
    write_text(solution / "files" / "stats" / "__init__.py", exported)
    status, shown = selftest(project, "--scenario", "add-variance")
    assert status == 0
    golden("tutorial-step-3", shown)
    # Step 4: the guards, in their final form; then every scenario of the project is ok.
    guards: list[dict[str, object]] = [
        {"type": "file-unchanged", "path": path}
        for path in ("tests/test_core.py", "stats/legacy.py", "README.md")
    ]
    _write_scenario(project, [_command(ONE_ASSERTION), *guards])
    status, shown = selftest(project)
    assert status == 0, shown
    rows = shown.split("SELFTEST\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(rows) == 5, shown  # "five scenarios, all `ok`"
    assert all(row.endswith("  ok") for row in rows), shown
    # Step 5: a counter-solution the single assertion lets through, then caught.
    counter = solution / "counter" / "hardcode-answer" / "files" / "stats"
    shutil.copytree(solution / "files" / "stats", counter)
    faked = (counter / "core.py").read_text(encoding="utf-8")
    body = faked.split('        raise ValueError("variance() of an empty list")\n', 1)
    (counter / "core.py").write_text(
        body[0].rsplit("    if not values:\n", 1)[0] + "    return 1.25\n", encoding="utf-8"
    )
    status, shown = selftest(project, "--scenario", "add-variance")
    assert status == 1
    golden("tutorial-step-5-let-through", shown)
    two = ONE_ASSERTION + "; assert variance([2, 4]) == 1.0"
    _write_scenario(project, [_command(two), *guards])
    status, shown = selftest(project, "--scenario", "add-variance")
    assert status == 0, shown
    golden("tutorial-step-5", shown)


def test_the_readme_selftest_of_the_quickstart_prints_what_it_shows(tmp_path: Path) -> None:
    """README, "Prove a suite without a model": `atlante-eval selftest examples/quickstart`."""
    copy = tmp_path / "examples" / "quickstart"
    shutil.copytree(QUICKSTART, copy)
    shutil.rmtree(copy / ".atlante" / "eval", ignore_errors=True)
    result = console("selftest", "examples/quickstart", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    golden("readme-quickstart-selftest", mask(result.stdout))


def test_the_output_check_catches_drift_and_unchecked_tables(tmp_path: Path) -> None:
    """tools.docs_outputs: a block unlike its golden, an unmarked table, an orphan golden."""
    table = (
        "SCENARIO  NULL AGENT  REFERENCE AGENT  CHEATS  SELFTEST\nfix  fail  pass  2/2 caught  ok\n"
    )
    write_text(tmp_path / GOLDEN_DIR / "step.txt", table.replace("2/2", "4/4"))
    write_text(tmp_path / GOLDEN_DIR / "orphan.txt", "x\n")
    write_text(tmp_path / "README.md", f"# R\n\n<!-- output: step -->\n```text\n{table}```\n")
    write_text(tmp_path / "docs" / "tutorial.md", f"# T\n\n    {table.splitlines()[0]}\n")
    assert output_problems(tmp_path) == [
        "README.md: output block 'step': differs from step.txt "
        "(run `python -m tools.docs_outputs`)",
        "docs/tutorial.md:3: a selftest table no test checks (mark its fenced block "
        "`<!-- output: NAME -->` and produce the golden in a test)",
        "tests/golden/docs/orphan.txt: shown in no document",
    ]
    assert update_docs(tmp_path) == [tmp_path / "README.md"]
    [block] = marked_blocks((tmp_path / "README.md").read_text(encoding="utf-8"))
    assert "4/4 caught" in block.body
    shortened = f"# R\n\n<!-- output: step shortened -->\n```text\n{table.splitlines()[1]}\n```\n"
    write_text(tmp_path / "README.md", shortened)
    assert output_problems(tmp_path)[0] == (
        "README.md: output block 'step': its lines are not the golden's, in order (step.txt)"
    )
