"""selftest: counter-solutions, no-change scenarios, generic mutants and behaviour checks."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
from factory import EXTENDED_SCENARIO_URI, make_project, scenario, write_json, write_text
from typer.testing import CliRunner

from atlante_eval import run_selftest
from atlante_eval.cli import app
from atlante_eval.selftest.core import SelftestOutcome

#: A task with a real test: the agent must fix ``calc.py`` so ``test_calc.py`` passes.
CALC_FIXTURE = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": (
        "import unittest\nfrom calc import add\n\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    ),
}
FIXED = {"calc.py": "def add(a, b):\n    return a + b\n"}
#: Weakening the test instead of fixing the code: the test file is rewritten to pass.
EDIT_THE_TEST = {
    "test_calc.py": (
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        pass\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    ),
}
RUNS_THE_TEST: dict[str, Any] = {"type": "command", "run": ["python3", "test_calc.py"]}


def _project(root: Path, scenarios: list[dict[str, Any]]) -> Path:
    project = make_project(root, scenarios=scenarios)
    for name, text in CALC_FIXTURE.items():
        write_text(project / "eval" / "fixtures" / "app" / name, text)
    return project


def _solutions(root: Path, name: str) -> Path:
    return root / "eval" / "scenarios" / "solutions" / name


def _files(directory: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        write_text(directory / "files" / relative, text)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _transcript(directory: Path, entries: list[dict[str, Any]]) -> None:
    lines = [json.dumps(entry) for entry in entries]
    write_text(directory / "transcript.jsonl", "\n".join(lines) + "\n")


def _selftest(root: Path, tmp_path: Path) -> SelftestOutcome:
    return anyio.run(functools.partial(run_selftest, root, out=tmp_path / "reports"))


def _codes(outcome: SelftestOutcome) -> list[str]:
    return [d.code for d in outcome.result.diagnostics]


def test_a_counter_solution_the_checks_let_through_fails_selftest(tmp_path: Path) -> None:
    """A sound scenario whose checks miss the edit-the-test cheat: exit 1, the finding names it."""
    root = _project(tmp_path / "p", [scenario("fix-add", checks=[RUNS_THE_TEST])])
    solution = _files(_solutions(root, "fix-add"), FIXED)
    _files(solution / "counter" / "edit-the-test", EDIT_THE_TEST)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    assert _codes(outcome) == ["selftest-counter-not-caught"]
    [finding] = outcome.result.diagnostics
    assert '"edit-the-test"' in finding.message
    assert finding.source == "eval/scenarios/solutions/fix-add/counter/edit-the-test"
    judged = outcome.result.scenarios["fix-add"]
    assert judged.reference_agent is not None
    assert judged.reference_agent.verdict == "pass"
    [counter] = judged.counters
    assert (counter.kind, counter.label, counter.caught) == ("counter", "edit-the-test", False)
    # The CLI's table and exit code say the same.
    result = CliRunner().invoke(app, ["selftest", str(root), "--out", str(tmp_path / "cli")])
    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if line.startswith("fix-add"))
    assert "0/1 caught (missed: edit-the-test)" in row
    assert "counter-not-caught" in row


def test_the_same_counter_solution_is_caught_once_the_test_file_is_guarded(
    tmp_path: Path,
) -> None:
    """Add file-unchanged on the test: the cheat fails it, and its mutant is reported caught."""
    guarded: list[dict[str, Any]] = [
        RUNS_THE_TEST,
        {"type": "file-unchanged", "path": "test_calc.py"},
    ]
    root = _project(tmp_path / "p", [scenario("fix-add", checks=guarded)])
    solution = _files(_solutions(root, "fix-add"), FIXED)
    _files(solution / "counter" / "edit-the-test", EDIT_THE_TEST)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    judged = outcome.result.scenarios["fix-add"]
    [counter] = judged.counters
    assert (counter.caught, counter.failed_checks) == (True, [1])
    [mutant] = judged.mutants
    assert (mutant.kind, mutant.label, mutant.caught) == (
        "edit-unchanged",
        "edit-unchanged test_calc.py",
        True,
    )


POLICY_FIXTURE_CHECKS: list[dict[str, Any]] = [
    {"type": "file-unchanged", "path": "calc.py"},
    {"type": "command", "run": ["python3", "-c", "import calc; assert calc.add(1, 1) == 0"]},
]


def test_a_no_change_scenario_with_a_caught_counter_solution_is_sound(tmp_path: Path) -> None:
    """no-change: the null agent is the reference (no vacuity), and the cheat is caught."""
    root = _project(tmp_path / "p", [scenario("keep-policy", checks=POLICY_FIXTURE_CHECKS)])
    solution = _solutions(root, "keep-policy")
    write_text(solution / "no-change", "")
    _files(solution / "counter" / "hardcode-bypass", FIXED)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    assert "selftest-vacuous" not in _codes(outcome)
    judged = outcome.result.scenarios["keep-policy"]
    assert judged.no_change is True
    assert judged.null_agent is not None
    assert judged.null_agent.verdict == "pass"
    assert [(c.label, c.caught) for c in judged.counters] == [("hardcode-bypass", True)]
    assert [(m.label, m.caught) for m in judged.mutants] == [("edit-unchanged calc.py", True)]


def test_a_no_change_scenario_needs_a_counter_solution(tmp_path: Path) -> None:
    """Without a counter-solution nothing proves a no-change scenario: selftest-no-counter."""
    root = _project(tmp_path / "p", [scenario("keep-policy", checks=POLICY_FIXTURE_CHECKS)])
    write_text(_solutions(root, "keep-policy") / "no-change", "")
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    assert _codes(outcome) == ["selftest-no-counter"]


def test_without_no_change_the_same_scenario_is_vacuous(tmp_path: Path) -> None:
    """The breach no-change closes: the same scenario and counter, no marker: vacuous."""
    root = _project(tmp_path / "p", [scenario("keep-policy", checks=POLICY_FIXTURE_CHECKS)])
    _files(_solutions(root, "keep-policy") / "counter" / "hardcode-bypass", FIXED)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    assert "selftest-vacuous" in _codes(outcome)


def test_generic_mutants_report_what_each_scenario_catches(tmp_path: Path) -> None:
    """Stray file, edited file-unchanged and deleted file-exists are tried on every scenario."""
    checks: list[dict[str, Any]] = [
        {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
        {"type": "file-exists", "path": "test_calc.py"},
        {"type": "file-unchanged", "path": "test_calc.py"},
        {"type": "diff-allowlist", "allow": ["calc.py"]},
    ]
    root = _project(tmp_path / "p", [scenario("fix-add", checks=checks)])
    _files(_solutions(root, "fix-add"), FIXED)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    judged = outcome.result.scenarios["fix-add"]
    assert [(m.kind, m.label, m.caught, m.failed_checks) for m in judged.mutants] == [
        ("stray-file", "stray-file atlante-selftest-stray.txt", True, [3]),
        ("delete-exists", "delete-exists test_calc.py", True, [1, 2, 3]),
        ("edit-unchanged", "edit-unchanged test_calc.py", True, [2, 3]),
    ]
    written = json.loads(outcome.result_path.read_text(encoding="utf-8"))
    assert [m["caught"] for m in written["scenarios"]["fix-add"]["mutants"]] == [True] * 3


def test_an_allowlist_of_double_star_still_catches_a_stray_file(tmp_path: Path) -> None:
    """allow entries are exact paths (no globs): "**" allows only a file named "**"."""
    checks: list[dict[str, Any]] = [
        {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
        {"type": "diff-allowlist", "allow": ["**", "calc.py"]},
    ]
    root = _project(tmp_path / "p", [scenario("fix-add", checks=checks)])
    _files(_solutions(root, "fix-add"), FIXED)
    outcome = _selftest(root, tmp_path)
    [stray] = outcome.result.scenarios["fix-add"].mutants
    assert (stray.kind, stray.caught, stray.failed_checks) == ("stray-file", True, [1])


def test_a_file_unchanged_on_a_directory_is_reported_as_not_catching_its_edit(
    tmp_path: Path,
) -> None:
    """file-unchanged hashes regular files only: a directory's new file goes unseen (exit 1)."""
    checks: list[dict[str, Any]] = [
        {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
        {"type": "file-unchanged", "path": "policies"},
    ]
    root = _project(tmp_path / "p", [scenario("fix-add", checks=checks)])
    write_text(root / "eval" / "fixtures" / "app" / "policies" / "rules.txt", "deny\n")
    _files(_solutions(root, "fix-add"), FIXED)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    assert _codes(outcome) == ["selftest-mutant-not-caught"]
    [finding] = outcome.result.diagnostics
    assert "edit-unchanged policies" in finding.message
    assert finding.pointer == "/checks/1"
    [mutant] = outcome.result.scenarios["fix-add"].mutants
    assert (mutant.caught, mutant.failed_checks) == (False, [])


# --- behaviour checks in selftest -----------------------------------------------------

SKILL_CHECKS: list[dict[str, Any]] = [
    {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
    {"type": "skill-used", "skill": "python-tests"},
    {"type": "tool-used", "kind": "shell", "inputMatches": "test_calc"},
]
USED_SKILL: list[dict[str, Any]] = [
    {"kind": "skill", "name": "python-tests"},
    {
        "kind": "tool-call",
        "id": "c1",
        "name": "Bash",
        "toolKind": "shell",
        "input": {"command": "python3 test_calc.py"},
    },
]


def _skill_scenario() -> dict[str, Any]:
    return scenario("use-skill", checks=SKILL_CHECKS, **{"$schema": EXTENDED_SCENARIO_URI})


def test_a_solution_transcript_selftests_behaviour_checks(tmp_path: Path) -> None:
    """The reference's transcript.jsonl passes the behaviour checks; a counter's fails them."""
    root = _project(tmp_path / "p", [_skill_scenario()])
    solution = _files(_solutions(root, "use-skill"), FIXED)
    _transcript(solution, USED_SKILL)
    skipped = _files(solution / "counter" / "skip-the-skill", FIXED)
    _transcript(skipped, USED_SKILL[1:])
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    judged = outcome.result.scenarios["use-skill"]
    assert judged.not_selftested == []
    assert judged.reference_agent is not None
    assert judged.reference_agent.verdict == "pass"
    assert [(c.label, c.caught, c.failed_checks) for c in judged.counters] == [
        ("skip-the-skill", True, [1])
    ]
    assert judged.null_agent is not None
    assert judged.null_agent.failed_checks == [0, 1, 2]  # the null agent really did nothing


def test_without_a_transcript_behaviour_checks_are_not_selftested(tmp_path: Path) -> None:
    """No transcript.jsonl: behaviour checks neither pass nor fail the reference."""
    root = _project(tmp_path / "p", [_skill_scenario()])
    _files(_solutions(root, "use-skill"), FIXED)
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 0, outcome.result.diagnostics
    judged = outcome.result.scenarios["use-skill"]
    assert judged.not_selftested == [1, 2]
    assert judged.reference_agent is not None
    assert judged.reference_agent.failed_checks == []
    result = CliRunner().invoke(app, ["selftest", str(root), "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0
    assert "ok (2 behaviour checks not selftested)" in result.stdout


def test_a_transcript_that_is_not_entries_is_an_invalid_solution(tmp_path: Path) -> None:
    """A line that is no transcript entry makes the solution invalid, with its line number."""
    root = _project(tmp_path / "p", [_skill_scenario()])
    solution = _files(_solutions(root, "use-skill"), FIXED)
    write_text(solution / "transcript.jsonl", json.dumps({"kind": "skill"}) + "\n")
    outcome = _selftest(root, tmp_path)
    assert outcome.exit_code == 1
    [finding] = [d for d in outcome.result.diagnostics if d.code == "selftest-solution-invalid"]
    assert "transcript.jsonl line 1 is not a transcript entry" in finding.message


def test_a_no_change_marker_with_files_is_an_invalid_solution(tmp_path: Path) -> None:
    """no-change and files/ contradict each other."""
    root = _project(tmp_path / "p", [scenario("keep-policy", checks=POLICY_FIXTURE_CHECKS)])
    solution = _files(_solutions(root, "keep-policy"), FIXED)
    write_text(solution / "no-change", "")
    write_json(solution / "delete.json", [])
    outcome = _selftest(root, tmp_path)
    assert "selftest-solution-invalid" in _codes(outcome)
    assert outcome.exit_code == 1


# --- the tutorial's examples, on a copy of the quickstart -------------------------------

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def _quickstart_copy(tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "my-project"
    shutil.copytree(QUICKSTART, root, ignore=shutil.ignore_patterns("eval", ".atlante"))
    shutil.copytree(QUICKSTART / "eval" / "fixtures", root / "eval" / "fixtures")
    shutil.copytree(
        QUICKSTART / ".atlante", root / ".atlante", ignore=shutil.ignore_patterns("eval")
    )
    return root


def test_the_tutorial_no_change_scenario_and_its_counter_solution(tmp_path: Path) -> None:
    """docs/writing-scenarios.md step 6: vacuous without no-change, sound with it."""
    root = _quickstart_copy(tmp_path)
    scenarios = root / "eval" / "scenarios"
    document = scenario(
        "keep-empty-check",
        fixture="eval/fixtures/stats-lib",
        agent="maintainer",
        prompt="A dashboard crashes because mean([]) raises. Make it return 0.",
        checks=[
            {"type": "file-unchanged", "path": "stats/core.py"},
            {"type": "command", "run": ["python3", "-m", "unittest", "tests.test_core.MeanTest"]},
        ],
    )
    write_json(scenarios / "keep-empty-check.eval.json", document)
    core = (root / "eval" / "fixtures" / "stats-lib" / "stats" / "core.py").read_text()
    bypass = core.replace(
        '        raise ValueError("mean() of an empty list")', "        return 0.0"
    )
    assert bypass != core
    counter = scenarios / "solutions" / "keep-empty-check" / "counter" / "return-zero"
    write_text(counter / "files" / "stats" / "core.py", bypass)
    assert "selftest-vacuous" in _codes(_selftest(root, tmp_path / "before"))
    write_text(scenarios / "solutions" / "keep-empty-check" / "no-change", "")
    outcome = _selftest(root, tmp_path / "after")
    assert outcome.exit_code == 0, outcome.result.diagnostics
    judged = outcome.result.scenarios["keep-empty-check"]
    assert [(c.label, c.caught, c.failed_checks) for c in judged.counters] == [
        ("return-zero", True, [0, 1])
    ]


def test_the_tutorial_hardcoded_answer_is_let_through_until_a_second_assertion(
    tmp_path: Path,
) -> None:
    """docs/writing-scenarios.md step 5: one assertion lets `return 1.25` through; two do not."""
    root = _quickstart_copy(tmp_path)
    scenarios = root / "eval" / "scenarios"
    core = (root / "eval" / "fixtures" / "stats-lib" / "stats" / "core.py").read_text()
    init = (root / "eval" / "fixtures" / "stats-lib" / "stats" / "__init__.py").read_text()
    real = core + (
        "\n\ndef variance(values: list[float]) -> float:\n"
        "    centre = mean(values)\n"
        "    return sum((v - centre) ** 2 for v in values) / len(values)\n"
    )
    fake = core + "\n\ndef variance(values: list[float]) -> float:\n    return 1.25\n"
    exported = init.replace(
        "from .core import mean, median", "from .core import mean, median, variance"
    )
    assert exported != init
    solution = scenarios / "solutions" / "add-variance"
    for directory, text in ((solution, real), (solution / "counter" / "hardcode-answer", fake)):
        write_text(directory / "files" / "stats" / "core.py", text)
        write_text(directory / "files" / "stats" / "__init__.py", exported)
    one = "from stats import variance; assert variance([1, 2, 3, 4]) == 1.25"
    for assertion, caught in ((one, False), (one + "; assert variance([2, 4]) == 1.0", True)):
        document = scenario(
            "add-variance",
            fixture="eval/fixtures/stats-lib",
            checks=[{"type": "command", "run": ["python3", "-c", assertion]}],
        )
        write_json(scenarios / "add-variance.eval.json", document)
        outcome = _selftest(root, tmp_path / str(caught))
        [counter] = outcome.result.scenarios["add-variance"].counters
        assert counter.caught is caught
        assert ("selftest-counter-not-caught" in _codes(outcome)) is not caught


def test_a_mutant_that_cannot_be_applied_is_reported_without_a_verdict(tmp_path: Path) -> None:
    """A file-unchanged path that setup made a symlink is never written through.

    The check itself errors on the link (selftest-check-error); the mutant is
    reported without a verdict, never as caught or let through.
    """
    checks: list[dict[str, Any]] = [
        {"type": "file-contains", "path": "calc.py", "pattern": "a + b"},
        {"type": "file-unchanged", "path": "link"},
    ]
    document = scenario("fix-add", checks=checks, setup=["ln", "-s", "/etc/hostname", "link"])
    root = _project(tmp_path / "p", [document])
    _files(_solutions(root, "fix-add"), FIXED)
    outcome = _selftest(root, tmp_path)
    assert set(_codes(outcome)) == {"selftest-check-error"}
    [mutant] = outcome.result.scenarios["fix-add"].mutants
    assert (mutant.label, mutant.caught, mutant.verdict) == (
        "edit-unchanged link",
        None,
        "infra-error",
    )
    assert mutant.error is not None
    assert "symbolic link" in mutant.error
