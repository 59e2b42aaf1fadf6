"""Cause lines, the summary and the maxSessions warning, through the real CLI process."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from clikit import cleaned_up, report_dirs, start_cli
from factory import make_project, scenario
from standin import actions

GOLDEN = Path(__file__).with_name("golden")
#: Prints a line with an ANSI colour escape and a terminal-title escape, then fails.
ANSI_COMMAND = [
    sys.executable,
    "-c",
    "print('\\x1b[31mboom\\x1b[0m \\x1b]0;owned\\x07'); raise SystemExit(1)",
]
WRITE_X = actions({"write": "x.txt", "content": "done\n"}, {"usage": 120, "cost": 0.01})


def causes_project(root: Path) -> Path:
    """Five scenarios, each ending in another non-pass, two trials each, maxSessions 8.

    Plan order is alpha, beta, delta, gamma, zeta: zeta's trials are positions 8
    and 9, so maxSessions 8 skips both.
    """
    return make_project(
        root,
        scenarios=[
            scenario(
                "alpha",
                prompt=WRITE_X,
                checks=[
                    {"type": "file-exists", "path": "x.txt"},
                    {"type": "file-contains", "path": "x.txt", "pattern": "nope"},
                    {"type": "command", "run": ANSI_COMMAND},
                ],
            ),
            scenario(
                "beta",
                prompt=actions({"stderr": "\x1b[2Jinvalid API key\nsecond line"}, {"exit": 3}),
            ),
            scenario("delta", prompt=actions({"usage": 412_031}, {"sleep": 30})),
            scenario("gamma", prompt=actions({"sleep": 30}), budget={"timeoutMs": 1000}),
            scenario("zeta", prompt=WRITE_X),
        ],
        eval_extra={"budget": {"trials": 2, "maxSessions": 8, "maxTokens": 400_000}},
    )


def mask(text: str) -> str:
    """Mask run ids, durations and temporary paths."""
    text = re.sub(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-[0-9a-f]{4}", "<run-id>", text)
    text = re.sub(r"\b\d+(\.\d)?(ms|s)\b", "<t>", text)
    return re.sub(r"\S*/\.atlante/eval/", "<base>/", text)


def run_cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """Run ``atlante-eval run`` (stand-in host) to completion."""
    with cleaned_up(start_cli(["run", *args], tmp_path, name=f"run{len(args)}")) as run:
        code = run.wait(timeout_s=120)
        return code, run.stdout, run.stderr


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str, Path]:
    """One ``--jobs 1`` run of the causes project."""
    tmp_path = tmp_path_factory.mktemp("causes")
    root = causes_project(tmp_path / "project")
    code, out, err = run_cli(tmp_path, str(root), "--jobs", "1")
    return code, out, err, root


@pytest.mark.timeout(180)
def test_every_non_pass_line_names_its_cause_with_one_job(
    sequential: tuple[int, str, str, Path],
) -> None:
    """--jobs 1: the reference's lines, each non-pass followed by its cause; escapes escaped."""
    code, _, err, _ = sequential
    assert code == 1
    assert "\x1b" not in err
    assert "\x07" not in err
    assert mask(err).splitlines() == (GOLDEN / "run-causes.txt").read_text().splitlines()


@pytest.mark.timeout(180)
def test_summary_lists_failing_checks_and_ungraded_scenarios(
    sequential: tuple[int, str, str, Path],
) -> None:
    """The summary counts failing checks per scenario and says 'not run'/'no graded trials'."""
    _, out, _, _ = sequential
    assert "\x1b" not in out
    assert mask(out).splitlines() == (GOLDEN / "run-summary.txt").read_text().splitlines()


@pytest.mark.timeout(180)
def test_parallel_lines_carry_the_scenario_and_the_cause(tmp_path: Path) -> None:
    """With --jobs 4 every trial line is prefixed by its scenario and still names the cause."""
    root = causes_project(tmp_path / "project")
    code, _, err = run_cli(tmp_path, str(root), "--jobs", "4")
    assert code == 1
    lines = mask(err).splitlines()
    expected = [
        "alpha trial 1: fail (<t> · $0.0100 · 120 tokens) — "
        'check 1 file-contains: x.txt does not contain "nope"; '
        "check 2 command: exit 1, expected 0: \\x1b[31mboom\\x1b[0m \\x1b]0;owned\\x07",
        "beta trial 0: infra-error (<t>) — standin run exited 3: \\x1b[2Jinvalid API key",
        "delta trial 1: budget-exceeded (<t> · $0.0000 · 412031 tokens) — "
        "budget-exceeded: 412,031 tokens > maxTokens 400,000",
        "gamma trial 0: timeout (<t>) — timeout after 1000 ms",
        "zeta trial 1: skipped-budget (<t>) — maxSessions 8 reached: the trial did not start",
    ]
    for line in expected:
        assert line in lines
    assert not any(line.startswith("==") for line in lines)


@pytest.mark.timeout(120)
def test_no_budget_warning_when_every_trial_fits(tmp_path: Path) -> None:
    """The maxSessions warning appears only when trials will really be skipped."""
    root = make_project(
        tmp_path / "project",
        scenarios=[
            scenario("zeta", prompt=WRITE_X, checks=[{"type": "file-exists", "path": "x.txt"}])
        ],
        eval_extra={"budget": {"trials": 2, "maxSessions": 2}},
    )
    code, out, err = run_cli(tmp_path, str(root))
    assert code == 0, err
    assert "eval-sessions-exceed-budget" not in err
    assert "zeta: pass 100%" in out
    assert len(report_dirs(root)) == 1
