"""Behaviour deltas on stand-in runs of both hosts' dialects, through Python and the CLI."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltaskit import DIALECTS, per_trial, run_scenario, session, shell, skill, write
from reports import counts, report, trials
from reports import write as write_report
from typer.testing import CliRunner, Result

from atlante_eval import (
    RunReport,
    TrialSet,
    behaviour_deltas,
    compare_reports,
    compare_trial_sets,
    load_transcript,
)
from atlante_eval.cli import app
from atlante_eval.report import run_files
from atlante_eval.stats.proportions import fisher_exact_two_sided

SKILL = "api-conventions"
CHECKS = [{"type": "file-exists", "path": "out.txt"}, {"type": "skill-used", "skill": SKILL}]
TRIALS = 6


def _base_prompt(dialect: str) -> str:
    return session(dialect, skill(SKILL), shell("ls"), shell("pytest -q"), write("out.txt"))


def _head_prompt(dialect: str) -> str:
    """Trial 0 still loads the skill; every trial runs seven shell commands."""
    shells = [shell("ls")] * 7
    return per_trial(
        dialect,
        {
            (0,): [skill(SKILL), *shells, write("out.txt")],
            range(1, TRIALS): [*shells, write("out.txt")],
        },
    )


@dataclass
class Runs:
    """BASE, a HEAD that stopped loading the skill, and a rerun of BASE, of one dialect."""

    dialect: str
    base: tuple[RunReport, Path]
    head: tuple[RunReport, Path]
    again: tuple[RunReport, Path]


@pytest.fixture(scope="module", params=DIALECTS)
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    dialect: str = request.param
    tmp = tmp_path_factory.mktemp(f"deltas-{dialect}")

    def run(name: str, prompt: str) -> tuple[RunReport, Path]:
        return run_scenario(tmp / name, dialect, prompt, checks=CHECKS, trials=TRIALS)

    base_prompt = _base_prompt(dialect)
    return Runs(
        dialect,
        run("base", base_prompt),
        run("head", _head_prompt(dialect)),
        run("again", base_prompt),
    )


def _invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_dropping_a_skill_and_more_shell_calls_are_the_top_deltas_and_the_cause(
    runs: Runs,
) -> None:
    """The two changed behaviours rank first, in order of significance, and name the cause."""
    bash = "Bash" if runs.dialect == "claude-code" else "bash"
    deltas = behaviour_deltas(runs.base[1], runs.head[1])
    s = deltas.scenarios["s"]
    assert s.verdict == "regressed"
    assert s.usage is not None
    top = [(u.item, u.name) for u in s.usage[:2]]
    assert top == [("tool", bash), ("skill", SKILL)]
    shell_row, skill_row = s.usage[0], s.usage[1]
    assert (shell_row.base_calls, shell_row.head_calls) == (2.0, 7.0)
    assert shell_row.summary == f"tool {bash}: 2.0 → 7.0 calls per trial"
    assert shell_row.p_value == pytest.approx(2 / 924)
    assert (skill_row.base_used, skill_row.head_used) == (6, 1)
    assert skill_row.summary == f"skill {SKILL}: used 6/6 → 1/6"
    assert skill_row.p_value == pytest.approx(fisher_exact_two_sided(6, 6, 1, 6))
    assert all(u.p_value == 1.0 and not u.significant for u in s.usage[2:])
    assert s.probable_cause is not None
    assert s.probable_cause.startswith(f"regressed: {shell_row.summary}; {skill_row.summary}; ")
    assert s.probable_cause.endswith("check 1 skill-used now fails 5/6 (BASE 0/6)")
    [check] = s.checks
    assert (check.index, check.change, check.base_failed, check.head_failed) == (
        1,
        "started-failing",
        0,
        5,
    )


def test_the_typical_paths_diverge_where_the_skill_was_dropped(runs: Runs) -> None:
    """BASE: skill, shell x2, write (6/6); HEAD: shell x7, write (5/6); the skill is removed."""
    paths = behaviour_deltas(runs.base[1], runs.head[1]).scenarios["s"].paths
    assert paths is not None
    assert [(st.kind, st.count) for st in paths.base.steps] == [
        ("skill", 1),
        ("shell", 2),
        ("write", 1),
    ]
    assert [(st.kind, st.count) for st in paths.head.steps] == [("shell", 7), ("write", 1)]
    assert (paths.base.followed, paths.head.followed) == (6, 5)
    assert [row.op for row in paths.alignment] == ["removed", "same", "same"]
    assert paths.first_divergence == 0
    # HEAD's trial 0 loads the skill too: folded, its path is BASE's (repeats are not counted)
    assert (paths.base_following, paths.head_following) == (6, 1)
    assert paths.p_value == pytest.approx(fisher_exact_two_sided(6, 6, 1, 6))
    assert [e.i for e in paths.head.examples] == [1, 2, 3]
    assert paths.head.examples[0].transcript == "trials/s/1/transcript.jsonl"


def test_identical_runs_give_no_significant_delta(runs: Runs) -> None:
    """A rerun of the same behaviour: every usage p-value is 1, the paths are equal."""
    deltas = behaviour_deltas(runs.base[1], runs.again[1])
    s = deltas.scenarios["s"]
    assert s.verdict != "regressed"
    assert s.usage
    assert all(u.p_value == 1.0 and not u.significant for u in s.usage)
    assert s.checks == []
    assert s.paths is not None
    assert s.paths.first_divergence is None
    assert s.probable_cause is None
    turns = next(e for e in s.effort if e.metric == "turns")
    assert turns.difference == 0.0
    assert turns.p_value == 1.0


def test_a_forced_verdict_on_identical_runs_names_no_usage_delta(runs: Runs) -> None:
    """Asked to explain a change that behaviour does not show, the cause says so."""
    base = TrialSet.from_run(runs.base[0], "s", runs.base[1])
    again = TrialSet.from_run(runs.again[0], "s", runs.again[1])
    explained = compare_trial_sets(base, again, verdict="regressed")
    assert explained.probable_cause is not None
    assert "no skill, subagent or tool use differs at p < 0.05" in explained.probable_cause


def test_two_arms_of_one_run_compare_as_trial_sets(runs: Runs) -> None:
    """The trials of one run split in two (as arms are) compare from load_transcript entries."""
    report_, run_dir = runs.head
    all_trials = report_.scenarios["s"].trials
    entries = {t.i: load_transcript(run_dir / str(t.transcript)) for t in all_trials}
    first = TrialSet([t for t in all_trials if t.i == 0], entries)
    rest = TrialSet([t for t in all_trials if t.i != 0], entries)
    deltas = compare_trial_sets(first, rest)
    assert deltas.usage is not None
    skill_row = next(u for u in deltas.usage if u.item == "skill")
    assert (skill_row.base_used, skill_row.base_trials, skill_row.head_used) == (1, 1, 0)
    assert deltas.probable_cause is None  # no verdict given, nothing to explain


def test_reports_without_transcripts_get_checks_and_effort_only(runs: Runs, tmp_path: Path) -> None:
    """A report without its trials/ (like the reference's) still compares checks and effort."""
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(runs.head[1] / "report.json", moved / "report.json")
    s = behaviour_deltas(runs.base[1], moved).scenarios["s"]
    assert s.usage is None
    assert s.paths is None
    assert (s.base.transcripts, s.head.transcripts) == (6, 0)
    assert s.notes == [
        "transcripts absent from HEAD (a reference report, a blessed baseline from the "
        "history, or a report without its run directory's trials/): checks and effort only"
    ]
    assert [c.change for c in s.checks] == ["started-failing"]
    assert {e.metric for e in s.effort} >= {"durationMs", "turns"}
    assert s.probable_cause is not None
    assert "transcripts absent" in s.probable_cause


def test_reference_reports_compare_checks_and_effort(tmp_path: Path) -> None:
    """Two reports with neither activity nor transcripts: duration and tokens, checks, a note."""
    base = write_report(tmp_path / "b", report({"s": trials(counts(5, 0), tokens=100)}))
    head = write_report(tmp_path / "h", report({"s": trials(counts(0, 5), tokens=300)}))
    s = behaviour_deltas(base, head).scenarios["s"]
    assert s.usage is None
    assert "transcripts absent from BASE and HEAD" in s.notes[0]
    assert [e.metric for e in s.effort] == ["tokens", "durationMs"]
    tokens = s.effort[0]
    assert (tokens.base_mean, tokens.head_mean, tokens.difference) == (100.0, 300.0, 200.0)
    assert tokens.relative == pytest.approx(2.0)


def test_a_partly_missing_transcript_is_noted_and_left_out(runs: Runs, tmp_path: Path) -> None:
    """One HEAD transcript removed: usage rests on the other five and a note says so."""
    copy = tmp_path / "head"
    shutil.copytree(runs.head[1], copy)
    (copy / "trials" / "s" / "3" / "transcript.jsonl").unlink()
    s = behaviour_deltas(runs.base[1], copy).scenarios["s"]
    assert s.head.transcripts == 5
    assert s.usage is not None
    assert s.usage[0].head_trials == 5
    assert s.notes == ["HEAD: 5 of 6 graded trials have a transcript; usage and paths use those"]


def test_a_scenario_name_cannot_lead_the_reader_out_of_the_run_directory(
    runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report naming scenario ``../x`` reads nothing outside; without the guard it would."""
    run_dir = tmp_path / "run"
    shutil.copytree(runs.head[1], run_dir)
    planted = run_dir / "x" / "0"  # trials/../x/0: beside trials/, reached only by "../x"
    planted.mkdir(parents=True)
    shutil.copy(run_dir / "trials" / "s" / "0" / "transcript.jsonl", planted / "transcript.jsonl")
    data = json.loads((run_dir / "report.json").read_text())
    data["scenarios"] = {"../x": data["scenarios"]["s"]}
    (run_dir / "report.json").write_text(json.dumps(data))
    outside = TrialSet.from_run(RunReport.model_validate(data), "../x", run_dir)
    assert outside.transcripts == {}
    monkeypatch.setattr(run_files, "single_component", lambda _name: True)
    breached = TrialSet.from_run(RunReport.model_validate(data), "../x", run_dir)
    assert list(breached.transcripts) == [0]


def test_compare_prints_the_why_and_json_carries_the_deltas(runs: Runs, tmp_path: Path) -> None:
    """The CLI's terminal table, --json and --markdown all hold the same behaviour deltas."""
    base_dir, head_dir = runs.base[1], runs.head[1]
    text = _invoke("compare", base_dir, head_dir)
    assert text.exit_code == 0
    assert "why s regressed: BASE 6 graded trials (6 with a transcript), HEAD 6 (6)" in text.stdout
    expected = behaviour_deltas(base_dir, head_dir)
    cause = expected.scenarios["s"].probable_cause
    assert f"probable cause (an association, not proof): {cause}" in text.stdout
    as_json = _invoke("compare", base_dir, head_dir, "--json")
    document = json.loads(as_json.stdout)
    assert document["behaviour"] == json.loads(expected.model_dump_json(by_alias=True))
    assert list(document)[-1] == "behaviour"
    md = tmp_path / "compare.md"
    assert _invoke("compare", base_dir, head_dir, "--markdown", md).exit_code == 0
    markdown = md.read_text()
    assert "#### Why `s` regressed" in markdown
    assert "| **1** ▶ | `skill api-conventions` | `-` |" in markdown


def test_compare_reports_alone_has_a_null_behaviour() -> None:
    """Without transcripts read, the --json key is present and null."""
    result = compare_reports(report({"s": counts(3, 0)}), report({"s": counts(3, 0)}))
    assert json.loads(result.to_json())["behaviour"] is None


def test_show_diff_aligns_the_typical_trials(runs: Runs) -> None:
    """show --diff BASE HEAD s: BASE's trial 0 against HEAD's trial 1, the skill replaced first."""
    base_dir, head_dir = runs.base[1], runs.head[1]
    shown = _invoke("show", "--diff", base_dir, head_dir, "s")
    assert shown.exit_code == 0, shown.stdout
    lines = shown.stdout.splitlines()
    assert "diff s (each side's typical trial)" in lines[0]
    assert "trial 0: pass" in lines[1]
    assert "trial 1: fail" in lines[2]
    assert "first divergence at step 1 (edit distance 5)" in lines[3]
    marked = [line for line in lines if "<- first divergence" in line]
    assert len(marked) == 1
    assert f"skill {SKILL}" in marked[0]
    assert marked[0].lstrip().startswith(">~")
    data = json.loads(_invoke("show", "--diff", base_dir, head_dir, "s:0:0", "--json").stdout)
    assert (data["chosenBy"], data["base"]["i"], data["head"]["i"]) == ("given", 0, 0)
    assert [row["op"] for row in data["rows"]] == [
        "same",
        "same",
        "same",
        *["added"] * 5,
        "same",
    ]
    assert data["firstDivergence"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["s:0:9"], "has no trial 9 of 's'"),
        (["nope"], "has no scenario 'nope'"),
        (["s:a:b"], "--diff wants SCENARIO or SCENARIO:I:J"),
        ([], "--diff needs BASE, HEAD and SCENARIO"),
    ],
    ids=["no-trial", "no-scenario", "bad-indices", "missing"],
)
def test_show_diff_refuses_what_does_not_exist(runs: Runs, args: list[str], message: str) -> None:
    """A wrong scenario or trial is invalid-option, exit 2, never a traceback."""
    result = _invoke("show", "--diff", runs.base[1], runs.head[1], *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "[invalid-option]" in result.stderr


def test_a_third_argument_without_diff_is_refused(runs: Runs) -> None:
    """``show RUN SCENARIO EXTRA`` is an error, not silently ignored."""
    result = _invoke("show", runs.base[1], "s", "extra")
    assert result.exit_code == 2
    assert "a third argument needs --diff" in result.stderr
