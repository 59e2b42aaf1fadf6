"""Why a command check failed, as a person reads it: the cause line and ``show``'s tail.

A run's command checks print what real test runners print (pytest run for real
in the sandbox; a Python traceback; the recorded output of jest, vitest, bun
test, node's test runner and go test replayed). The cause names the line a
person would pick and the runner it recognised; ``show RUN SCENARIO:I`` prints
the *end* of a long output and the ``check-N.log`` that holds all of it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from clikit import cleaned_up, console, report_dirs, start_cli
from factory import make_project, scenario
from test_cli_show import golden, mask

from atlante_eval.checks.output_cause import output_cause

SAMPLES = Path(__file__).with_name("data") / "runner-output"

#: A pytest suite whose failing test prints 60 lines first: the assertion comes last.
TEST_FILE = """\
def test_passes():
    assert True


def test_median_of_two():
    for n in range(60):
        print(f"checking sample {n:02d}: " + "." * 30)
    assert sorted([2, 1])[len([2, 1]) // 2] == 1.5
"""
#: A script that fails with a traceback after a screenful of output.
SCRIPT = (
    "for n in range(40): print('step', n)\n"
    "raise AssertionError('median([1, 2]) should be 1.5, got 2')\n"
)


def _replay(sample: str) -> list[str]:
    """A command printing a recorded runner output and failing, as the runner would."""
    code = "import sys; sys.stdout.write(open(sys.argv[1]).read()); sys.exit(1)"
    return [sys.executable, "-c", code, sample]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run whose every scenario fails one command check; its directory and its stderr."""
    tmp_path = tmp_path_factory.mktemp("check-output")
    fixture = {
        "tests/test_median.py": TEST_FILE,
        "tests/__init__.py": "",
        **{p.name: p.read_text() for p in SAMPLES.glob("*.txt")},
    }
    runs = {
        "pytest-real": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        "python-script": [sys.executable, "-c", SCRIPT],
        **{f"replay-{p.stem}": _replay(p.name) for p in sorted(SAMPLES.glob("*.txt"))},
    }
    project = make_project(
        tmp_path / "project",
        fixtures={"eval/fixtures/app": fixture},
        scenarios=[
            scenario(name, checks=[{"type": "command", "run": command}])
            for name, command in runs.items()
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    with cleaned_up(start_cli(["run", str(project), "--jobs", "2"], tmp_path)) as cli:
        assert cli.wait(timeout_s=180) == 1, cli.stderr
        stderr = cli.stderr
    [run_dir] = report_dirs(project)
    return run_dir, stderr


def test_the_cause_is_the_line_a_person_reads_and_names_the_runner(run: tuple[Path, str]) -> None:
    """Each failing trial's cause: the assertion or error line, and which runner said it."""
    _run_dir, stderr = run
    causes = sorted(
        line.split(" — ", 1)[1]
        for line in stderr.splitlines()
        if "trial 0: fail" in line and " — " in line
    )
    golden("check-output-causes.txt", "\n".join(causes) + "\n")
    joined = "\n".join(causes)
    assert "pytest: assert 2 == 1.5 · tests/test_median.py::test_median_of_two" in joined
    assert "python: AssertionError: median([1, 2]) should be 1.5, got 2" in joined
    for runner in ("jest: ", "vitest: ", "bun test: ", "node --test: ", "go test: ", "unittest: "):
        assert f"expected 0: {runner}" in joined
    assert "Traceback (most recent call last)" not in joined


def test_show_prints_the_tail_of_long_output_and_the_full_log(run: tuple[Path, str]) -> None:
    """show RUN SCENARIO:I: the output's last lines, how many came before, and check-0.log."""
    run_dir, _stderr = run
    result = console(["show", str(run_dir), "pytest-real:0"])
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    shown = text.split("\ntranscript (")[0]  # the transcript's timings vary
    golden("show-check-output.txt", mask(re.sub(r" in [\d.]+s", " in <t>", shown)))
    assert "FAILED tests/test_median.py::test_median_of_two - assert 2 == 1.5" in text
    assert "checking sample 00" not in text  # the head is left out, the end is shown
    log = run_dir / "trials" / "pytest-real" / "0" / "check-0.log"
    assert f"full output: {log}" in text
    assert "checking sample 00" in log.read_text()
    [check] = json.loads((run_dir / "report.json").read_text())["scenarios"]["pytest-real"][
        "trials"
    ][0]["checks"]
    assert check["evidence"]["outputLog"] == "trials/pytest-real/0/check-0.log"


@pytest.mark.parametrize(
    ("sample", "line", "source", "test", "more"),
    [
        ("pytest", "assert 1.0 == 1.25", "pytest", "tests/test_core.py::test_variance", 2),
        (
            "unittest",
            "AssertionError: 1.0 != 1.25",
            "unittest",
            "tests.test_core.T.test_variance",
            0,
        ),
        (
            "jest",
            "expect(received).toBe(expected) // Object.is equality — Expected: 3, Received: 4",
            "jest",
            "sum \u203a adds two numbers",
            1,
        ),
        (
            "vitest",
            "AssertionError: expected 4 to be 3 // Object.is equality",
            "vitest",
            "t/sum.vitest.test.js > sum > adds two numbers",
            0,
        ),
        (
            "bun",
            "expect(received).toBe(expected) — Expected: 3, Received: 4",
            "bun test",
            "sum > adds two numbers",
            0,
        ),
        (
            "node",
            "Expected values to be strictly equal: 4 !== 3",
            "node --test",
            "adds two numbers",
            0,
        ),
        (
            "node-spec",
            "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal: 4 !== 3",
            "node --test",
            "adds two numbers",
            0,
        ),
        ("go", "sum_test.go:8: Sum(1, 2) = 4, want 3", "go test", "TestSum", 1),
        ("go-v", "sum_test.go:8: Sum(1, 2) = 4, want 3", "go test", "TestSum", 0),
    ],
)
def test_each_runner_is_recognised(
    sample: str, line: str, source: str, test: str, more: int
) -> None:
    """The recorded output of each runner yields its failure line, the test and the count."""
    found = output_cause((SAMPLES / f"{sample}.txt").read_text())
    assert found is not None
    assert (found.line, found.source, found.test, found.more) == (line, source, test, more)


@pytest.mark.parametrize(
    ("output", "line", "source"),
    [
        (
            "Traceback (most recent call last):\n  File x\nImportError: no variance\n",
            "ImportError: no variance",
            "python",
        ),
        (
            "compiling\nsrc/a.c:3: error: expected ';'\n1 error generated\nmake: done\n",
            "src/a.c:3: error: expected ';'",
            "error line",
        ),
        ("F.\n\n", "F.", "output"),
        ("..\nF.\n", "F.", "last line"),
        ("FAILED (failures=1)\n", "FAILED (failures=1)", "error line"),
        ("\n2 failed\n1 passed", "2 failed", "error line"),
        ("", None, None),
    ],
)
def test_without_a_runner_the_last_error_or_last_line(
    output: str, line: str | None, source: str | None
) -> None:
    """No runner's shape: the last line naming an error, else the last non-blank line."""
    found = output_cause(output)
    assert (found.line if found else None, found.source if found else None) == (line, source)
