"""Catastrophic regular expressions: bounded matching, via the real CLI and a stand-in host."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from clikit import cleaned_up, processes_marked, report_dirs, run_dirs, start_cli, wait_for
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from standin import actions

from atlante_eval import RunReport
from atlante_eval._util.patterns import PATTERN_TIMEOUT_MS, has_nested_quantifier

EVIL = "(a+)+$"
#: 100 KB of ``a`` then ``b``: ``(a+)+$`` backtracks exponentially on it.
ALMOST = "a" * 100_000 + "b"
#: The real limit: the honest pattern must never be at the mercy of a short one.
LIMIT_MS = PATTERN_TIMEOUT_MS
ONE = {"budget": {"trials": 1}}

FILE_ATTACK = scenario(
    "evil-file",
    prompt=actions({"write": "big.txt", "content": ALMOST}),
    checks=[
        {"type": "file-contains", "path": "big.txt", "regex": True, "pattern": EVIL},
        {"type": "file-exists", "path": "big.txt"},
    ],
)
OUTPUT_ATTACK = scenario(
    "evil-output",
    checks=[
        {
            "type": "command",
            "run": [sys.executable, "-c", f"print('a' * {len(ALMOST) - 1} + 'b')"],
            "outputMatches": EVIL,
        }
    ],
)
HONEST = scenario(
    "honest",
    prompt=actions({"write": "x.txt", "content": "ok\n"}),
    checks=[{"type": "file-contains", "path": "x.txt", "regex": True, "pattern": "^o+k$"}],
)


def _report(project: Path) -> RunReport:
    [run_dir] = report_dirs(project)
    return RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def _only_trial(report: RunReport, name: str) -> Any:
    [trial] = report.scenarios[name].trials
    return trial


def test_catastrophic_patterns_fail_their_check_and_the_run_goes_on(tmp_path: Path) -> None:
    """`(a+)+$` on 100 KB of `a…ab`, in a file and in command output, fails only its check."""
    project = make_project(
        tmp_path / "project", scenarios=[FILE_ATTACK, OUTPUT_ATTACK, HONEST], eval_extra=ONE
    )
    with cleaned_up(start_cli(["run", str(project), "--jobs", "3"], tmp_path)) as cli:
        status = cli.wait(timeout_s=120)
    assert status == 1, cli.stderr
    report = _report(project)
    file_trial = _only_trial(report, "evil-file")
    assert file_trial.verdict == "fail"
    contains, exists = file_trial.checks
    assert contains.verdict == "fail"
    assert contains.evidence["cause"] == f"pattern timed out after {LIMIT_MS} ms"
    assert exists.verdict == "pass", "the checks after the timed-out one still run"
    output_trial = _only_trial(report, "evil-output")
    assert output_trial.verdict == "fail"
    [command] = output_trial.checks
    assert command.verdict == "fail"
    assert command.evidence["cause"] == f"pattern timed out after {LIMIT_MS} ms"
    assert _only_trial(report, "honest").verdict == "pass"
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []


def test_validate_warns_about_nested_quantifiers(tmp_path: Path) -> None:
    """`validate` accepts the project but warns, with a code, about both nested quantifiers."""
    project = make_project(
        tmp_path / "project", scenarios=[FILE_ATTACK, OUTPUT_ATTACK, HONEST], eval_extra=ONE
    )
    with cleaned_up(start_cli(["validate", str(project)], tmp_path)) as cli:
        status = cli.wait()
    assert status == 0, cli.stderr
    assert cli.stderr.count("warning [pattern-nested-quantifier]") == 2
    assert "/checks/0/pattern" in cli.stderr
    assert "/checks/0/outputMatches" in cli.stderr
    assert "honest" not in cli.stderr


def test_validate_warns_about_nested_quantifiers_in_behaviour_checks(tmp_path: Path) -> None:
    """The same warning covers a behaviour check's ``inputMatches`` and regex ``pattern``."""
    behaviour = scenario(
        "evil-behaviour",
        checks=[
            {"type": "tool-used", "kind": "shell", "inputMatches": EVIL},
            {"type": "transcript-contains", "pattern": EVIL, "regex": True},
        ],
        **{"$schema": EXTENDED_SCENARIO_URI},
    )
    project = make_project(tmp_path / "project", scenarios=[behaviour, HONEST], eval_extra=ONE)
    with cleaned_up(start_cli(["validate", str(project)], tmp_path)) as cli:
        status = cli.wait()
    assert status == 0, cli.stderr
    assert cli.stderr.count("warning [pattern-nested-quantifier]") == 2
    assert "/checks/0/inputMatches" in cli.stderr
    assert "/checks/1/pattern" in cli.stderr


def test_nested_quantifier_hint_spots_repeated_groups() -> None:
    """The hint flags repeated groups holding + or *, and nothing escaped, classed or bounded."""
    for pattern in ("(a+)+$", "(?:x*y?)*", "([a-z]+)*", "((a+)b)+", "(a{2,})+"):
        assert has_nested_quantifier(pattern), pattern
    for pattern in ("(a|b)+", "a+b+", r"\(a+\)+", "[(a+)]+", "(a{2})+", "^o+k$"):
        assert not has_nested_quantifier(pattern), pattern


def test_sigint_during_a_slow_match_publishes_a_partial_report(tmp_path: Path) -> None:
    """Ctrl-C while a pattern is being matched interrupts the run and publishes a report."""
    project = make_project(tmp_path / "project", scenarios=[FILE_ATTACK], eval_extra=ONE)
    started = tmp_path / "match-started"
    extra = {
        "ATLANTE_TEST_PATTERN_TIMEOUT_MS": str(3_600_000),  # never ends by itself in this test
        "ATLANTE_TEST_MATCH_STARTED": str(started),
    }
    with cleaned_up(start_cli(["run", str(project)], tmp_path, extra_env=extra)) as cli:
        wait_for(started.exists, timeout_s=60)
        cli.signal(signal.SIGINT)
        status = cli.wait(timeout_s=60)
    assert status == 3, cli.stderr
    assert "error [eval-run-interrupted]" in cli.stderr
    report = _report(project)
    assert report.meta.interrupted is True
    trial = _only_trial(report, "evil-file")
    assert trial.verdict == "infra-error"
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []
