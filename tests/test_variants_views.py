"""Arms in the commands over reports: compare --arms, show SCENARIO@ARM, junit.

See docs/variants.md.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from clikit import console
from factory import make_project, scenario
from junitparser import Failure, JUnitXml, Properties
from standin import StandinHost

from atlante_eval import RunReport, run_eval
from atlante_eval.report import arm_scenarios

#: A check that passes only when the native agent file is in the sandbox.
_NEEDS_AGENT = [{"type": "file-exists", "path": ".opencode/agents/reviewer.md"}]


@pytest.fixture(scope="module")
def arms_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunReport]:
    """One run: a "bare" control (harness none) and a "project" arm, 6 trials, 2 scenarios."""
    root = make_project(
        tmp_path_factory.mktemp("arms") / "p",
        scenarios=[
            scenario("needs-agent", agent="reviewer", checks=_NEEDS_AGENT),
            scenario("plain"),
        ],
        eval_extra={
            "variants": [{"name": "bare", "harness": "none"}, {"name": "project"}],
            "budget": {"trials": 6, "maxSessions": 200},
            "gateway": "off",
        },
    )
    report = anyio.run(lambda: run_eval(root, host=StandinHost()))
    run_dir = next((root / ".atlante" / "eval").glob("*/report.json")).parent
    return run_dir, report


def _text(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stdout.decode()


def test_compare_two_arms_of_one_run(arms_run: tuple[Path, RunReport]) -> None:
    """compare RUN --arms bare,project: the arms' comparison, as the uplift section decides."""
    run_dir, report = arms_run
    done = console(["compare", str(run_dir), "--arms", "bare,project", "--json"])
    assert done.returncode == 0, done.stderr.decode()
    document = json.loads(_text(done))
    row = document["scenarios"]["needs-agent"]
    assert (row["base"]["passed"], row["head"]["passed"]) == (0, 6)
    assert row["verdict"] == "improved"
    assert document["scenarios"]["plain"]["verdict"] in {"unchanged", "inconclusive"}
    assert document["base"]["path"].endswith("report.json@bare")
    assert document["head"]["path"].endswith("report.json@project")
    assert report.uplift is not None
    uplift = report.uplift.arms["project"].scenarios["needs-agent"]
    assert row["difference"] == pytest.approx(uplift.difference)
    back = console(["compare", str(run_dir), "--arms", "project,bare", "--json"])
    assert json.loads(_text(back))["scenarios"]["needs-agent"]["verdict"] == "regressed"
    table = console(["compare", str(run_dir), str(run_dir), "--arms", "bare,project"])
    assert table.returncode == 0
    assert "improved" in _text(table)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--arms", "bare,nope"], "unknown-variant"),
        (["--arms", "bare"], "invalid-option"),
        ([], "invalid-option"),
    ],
)
def test_compare_arms_refusals(
    arms_run: tuple[Path, RunReport], args: list[str], code: str
) -> None:
    """An unknown arm, one arm, or no HEAD without --arms: exit 2 with the code."""
    run_dir, _ = arms_run
    done = console(["compare", str(run_dir), *args])
    assert done.returncode == 2
    assert code in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()


def test_show_a_run_with_arms(arms_run: tuple[Path, RunReport]) -> None:
    """show RUN prints the arms x scenarios table; --json carries it as `arms`."""
    run_dir, _ = arms_run
    done = console(["show", str(run_dir)])
    assert done.returncode == 0, done.stderr.decode()
    lines = _text(done).splitlines()
    row = next(line for line in lines if line.split()[:1] == ["needs-agent"] and "/" in line)
    assert row.split() == ["needs-agent", "0/6", "6/6", "+"]
    assert any("bare (control)" in line for line in lines)
    view = json.loads(_text(console(["show", str(run_dir), "--json"])))
    assert view["arms"]["control"] == "bare"
    cells = {r["scenario"]: r["cells"] for r in view["arms"]["rows"]}
    assert cells["needs-agent"][1] == {
        "arm": "project",
        "passed": 6,
        "graded": 6,
        "verdict": "improved",
        "difference": 1.0,
    }


def test_show_an_arms_scenario_and_trial(arms_run: tuple[Path, RunReport]) -> None:
    """show RUN SCENARIO@ARM lists that arm's trials; SCENARIO@ARM:I shows its own transcript."""
    run_dir, report = arms_run
    listing = json.loads(_text(console(["show", str(run_dir), "needs-agent@project", "--json"])))
    assert listing["arm"] == "project"
    assert [t["verdict"] for t in listing["trials"]] == ["pass"] * 6
    control = json.loads(_text(console(["show", str(run_dir), "needs-agent", "--json"])))
    assert [t["verdict"] for t in control["trials"]] == ["fail"] * 6
    assert control["otherArms"] == ["project"]
    trial = json.loads(_text(console(["show", str(run_dir), "needs-agent@project:2", "--json"])))
    assert trial["scenario"] == "needs-agent@project"
    assert trial["verdict"] == "pass"
    expected = run_dir / "trials" / "needs-agent@project" / "2" / "transcript.jsonl"
    assert trial["transcript"] == str(expected)
    assert expected.is_file()
    bare = json.loads(_text(console(["show", str(run_dir), "needs-agent@bare:2", "--json"])))
    assert bare["verdict"] == "fail"
    assert bare["transcript"] == str(run_dir / "trials" / "needs-agent" / "2" / "transcript.jsonl")
    text = _text(console(["show", str(run_dir), "needs-agent@project"]))
    assert "arm project" in text.splitlines()[0]
    missing = console(["show", str(run_dir), "needs-agent@nope:0"])
    assert missing.returncode == 2
    assert "unknown-variant" in missing.stderr.decode()
    assert report.scenarios["needs-agent"].arms is not None


def test_junit_names_the_arm_of_each_testcase(
    arms_run: tuple[Path, RunReport], tmp_path: Path
) -> None:
    """junit: each arm's trials in the scenario's suite, the arm in the testcase name."""
    run_dir, report = arms_run
    done = console(["junit", str(run_dir), "-o", str(tmp_path / "j.xml")])
    assert done.returncode == 0, done.stderr.decode()
    suites = {s.name: s for s in JUnitXml.fromfile(str(tmp_path / "j.xml"))}
    suite = suites["needs-agent"]
    cases = list(suite)
    names = sorted(c.name for c in cases)
    assert names == sorted(f"trial {i} [{arm}]" for i in range(6) for arm in ("bare", "project"))
    assert (suite.tests, suite.failures) == (12, 6)
    failed = {c.name for c in cases if any(isinstance(r, Failure) for r in c.result)}
    assert failed == {f"trial {i} [bare]" for i in range(6)}
    properties = {p.name: p.value for p in suite.child(Properties)}  # type: ignore[no-untyped-call]  # junitparser has no annotation here
    assert properties["passRate[project]"] == "1.0"
    assert properties["passRate[bare]"] == "0.0"
    assert len(arm_scenarios(report, "project")) == 2


def test_history_follows_each_arm(arms_run: tuple[Path, RunReport], tmp_path: Path) -> None:
    """history ingest stores each arm as its own run with its `arm`; html --history (a
    directory or the store) gives each arm of a scenario its own row across runs."""
    run_dir, _ = arms_run
    root = run_dir.parent.parent.parent
    second = anyio.run(lambda: run_eval(root, host=StandinHost()))
    store = tmp_path / "h.sqlite"
    done = console(["history", "ingest", str(run_dir.parent), "--history", str(store), "--json"])
    assert done.returncode == 0, done.stderr.decode()
    assert [r["trials"] for r in json.loads(_text(done))] == [24, 24]
    listed = console(["history", "list", "--history", str(store), "--arm", "project", "--json"])
    runs = json.loads(_text(listed))
    assert {r["runId"] for r in runs} == {f"{run_dir.name}@project", f"{second.run_id}@project"}
    assert {(r["arm"], r["passed"], r["trials"]) for r in runs} == {("project", 12, 12)}
    bare = json.loads(
        _text(console(["history", "list", "--history", str(store), "--arm", "bare", "--json"]))
    )
    assert {r["runId"] for r in bare} == {run_dir.name, second.run_id}
    assert {(r["passed"], r["trials"]) for r in bare} == {(6, 12)}
    again = console(["history", "ingest", str(run_dir), "--history", str(store), "--json"])
    assert json.loads(_text(again))[0]["status"] == "unchanged"
    for source, page in ((str(run_dir.parent), "dir.html"), (str(store), "store.html")):
        made = console(["html", "--history", source, "-o", str(tmp_path / page)])
        assert made.returncode == 0, made.stderr.decode()
        text = (tmp_path / page).read_text(encoding="utf-8")
        for row in ("needs-agent@bare", "needs-agent@project", "plain@bare", "plain@project"):
            assert f'data-scenario="{row}"' in text, (page, row)
        assert 'data-scenario="needs-agent"' not in text
