"""``regrade``: a run's trials judged again by the current checks, and no host session started.

Runs go through the real command line (in process) with the stand-in host as the
configured host. The stand-in records each session it starts in a file and each
host it creates in a list, so a regrade that started one would be seen.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import EXTENDED_SCENARIO_URI, make_project, scenario, write_json, write_native
from isolationkit import require_bwrap
from limitskit import HOG, groups_left, processes_with, require_cgroups, token
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, hosts, run_eval
from atlante_eval.cli import app
from atlante_eval.isolation.limits import LimitSettings
from atlante_eval.project.config import EvalConfig, LimitsConfig
from atlante_eval.run import isolate
from atlante_eval.run import regrade as regrade_module
from atlante_eval.trial import process as process_module

CREATED: list[str] = []


class RecordingHost(StandinHost):
    """The stand-in host; every host made (for a run or anything else) is recorded."""

    def __init__(self) -> None:
        super().__init__()
        CREATED.append("host")


@pytest.fixture(autouse=True)
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the configured host the recording stand-in."""
    CREATED.clear()
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", RecordingHost)
    monkeypatch.setattr(process_module, "DEFAULT_GRACE_S", 0.5)
    monkeypatch.setenv("NO_COLOR", "1")


def invoke(*args: str) -> Result:
    """Run ``atlante-eval ARGS`` in process; never a traceback."""
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def runs(project: Path) -> list[Path]:
    return sorted((project / ".atlante" / "eval").glob("*/report.json"))


def report_of(path: Path) -> RunReport:
    return RunReport.model_validate_json(path.read_text())


def _doc(name: str, prompt: str, checks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return scenario(name, prompt=prompt, checks=checks, **extra)


def _project(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    return make_project(
        tmp_path / "p",
        scenarios=list(docs),
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "src/app.py": "print(1)\n"}},
    )


def _rewrite(project: Path, name: str, **changes: Any) -> None:
    """Edit a scenario document in place (its checks, usually)."""
    path = project / "eval" / "scenarios" / f"{name}.eval.json"
    document = json.loads(path.read_text())
    for key, value in changes.items():
        if key in ("prompt", "setup", "agent"):
            document["task"][key] = value
        else:
            document[key] = value
    write_json(path, document)


def _run(project: Path, *extra: str) -> tuple[Path, RunReport]:
    before = set(runs(project))
    result = invoke("run", str(project), "--trials", "2", "-j", "1", "--no-html", *extra)
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    [path] = sorted(set(runs(project)) - before)
    return path.parent, report_of(path)


def _regrade(project: Path, run_dir: Path, *extra: str) -> tuple[Result, Path | None]:
    before = set(runs(project))
    result = invoke("regrade", str(run_dir), "--project", str(project), *extra)
    new = sorted(set(runs(project)) - before)
    return result, new[0].parent if new else None


def test_a_fixed_check_passes_the_trials_without_starting_the_host(tmp_path: Path) -> None:
    """A too strict file-contains fails; fixed in the document, regrade passes the same trials."""
    starts = tmp_path / "starts.log"
    prompt = actions(
        {"append": str(starts), "content": "session\n"},
        {"write": "src/greeting.txt", "content": "Hello, World\n"},
    )
    strict = [{"type": "file-contains", "path": "src/greeting.txt", "pattern": "hello, world"}]
    project = _project(tmp_path, _doc("greet", prompt, strict))
    run_dir, original = _run(project)
    assert [t.verdict for t in original.scenarios["greet"].trials] == ["fail", "fail"]
    assert starts.read_text().count("session") == 2
    assert CREATED == ["host"]
    original_bytes = (run_dir / "report.json").read_bytes()

    fixed = [{"type": "file-contains", "path": "src/greeting.txt", "pattern": "Hello, World"}]
    _rewrite(project, "greet", checks=fixed)
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert new_dir is not None
    assert starts.read_text().count("session") == 2  # no session started
    assert CREATED == ["host"]  # no host created either
    assert (run_dir / "report.json").read_bytes() == original_bytes
    regraded = report_of(new_dir / "report.json")
    assert regraded.meta.regraded_from == original.run_id
    assert regraded.run_id != original.run_id
    for before, after in zip(
        original.scenarios["greet"].trials, regraded.scenarios["greet"].trials, strict=True
    ):
        assert after.verdict == "pass"
        assert after.regrade is not None
        assert (after.regrade.status, after.regrade.previous_verdict) == ("regraded", "fail")
        assert (after.tokens, after.cost, after.duration_ms) == (
            before.tokens,
            before.cost,
            before.duration_ms,
        )
    assert "2 trials changed verdict" in result.stdout
    assert "greet:0  fail -> pass  check 0 (file-contains) fail -> pass" in result.stdout
    assert (new_dir / "report.html").is_file()
    assert "regraded from" in (new_dir / "report.html").read_text()


def test_command_checks_run_on_the_agents_files_in_order(tmp_path: Path) -> None:
    """A command check added later reads the agent's files; a file it writes is seen after it."""
    prompt = actions(
        {"write": "out/result.json", "content": '{"answer": 42}'},
        {"run": [sys.executable, "-c", "open('bin.dat', 'wb').write(bytes(range(256)))"]},
    )
    project = _project(tmp_path, _doc("cmd", prompt, [{"type": "file-exists", "path": "nope"}]))
    run_dir, _original = _run(project)
    reader = (
        "import json; assert json.load(open('out/result.json'))['answer'] == 42; "
        "assert open('bin.dat', 'rb').read() == bytes(range(256)); "
        "open('made-by-check.txt', 'w').write('x'); print('checked ok')"
    )
    _rewrite(
        project,
        "cmd",
        checks=[
            {
                "type": "command",
                "run": [sys.executable, "-c", reader],
                "outputMatches": "checked ok",
            },
            {"type": "file-exists", "path": "made-by-check.txt"},
        ],
    )
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert new_dir is not None
    for trial in report_of(new_dir / "report.json").scenarios["cmd"].trials:
        assert [c.verdict for c in trial.checks or []] == ["pass", "pass"], trial.checks


def test_a_command_checks_timeout_holds_in_the_regrade(tmp_path: Path) -> None:
    """A command check that never ends is stopped at its timeoutMs; the next check still runs."""
    prompt = actions({"write": "out.txt", "content": "x"})
    project = _project(tmp_path, _doc("slow", prompt, [{"type": "file-exists", "path": "no"}]))
    run_dir, _original = _run(project)
    _rewrite(
        project,
        "slow",
        checks=[
            {
                "type": "command",
                "run": [sys.executable, "-c", "import time; time.sleep(3600)"],
                "timeoutMs": 300,
            },
            {"type": "file-exists", "path": "out.txt"},
        ],
    )
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert new_dir is not None
    for trial in report_of(new_dir / "report.json").scenarios["slow"].trials:
        hung, exists = trial.checks or []
        assert (hung.verdict, hung.evidence.get("timedOut")) == ("fail", True)
        assert exists.verdict == "pass"
        assert trial.verdict == "fail"


def test_a_loosened_diff_allowlist_is_applied(tmp_path: Path) -> None:
    """Runtime artefacts stay ignored, and a newly allowed path no longer fails."""
    prompt = actions(
        {"write": "out.txt", "content": "x"},
        {"write": "notes.md", "content": "y"},
        {"write": ".standin/runtime/cache.bin", "content": "z"},
        {"delete": "README.md"},
    )
    strict = [{"type": "diff-allowlist", "allow": ["out.txt"]}]
    project = _project(tmp_path, _doc("allow", prompt, strict))
    run_dir, original = _run(project)
    [check, _] = [t.checks[0] for t in original.scenarios["allow"].trials if t.checks]
    assert check.verdict == "fail"
    assert check.evidence["unexpected"] == ["README.md", "notes.md"]
    _rewrite(
        project, "allow", checks=[{"type": "diff-allowlist", "allow": ["out.txt", "notes.md"]}]
    )
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 1
    assert new_dir is not None
    for trial in report_of(new_dir / "report.json").scenarios["allow"].trials:
        [still] = trial.checks or []
        assert still.evidence["unexpected"] == ["README.md"]
    _rewrite(
        project,
        "allow",
        checks=[{"type": "diff-allowlist", "allow": ["out.txt", "notes.md", "README.md"]}],
    )
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 0, result.stdout + result.stderr


def _tool(call: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    state = {
        "status": "completed",
        "input": arguments,
        "output": "ok",
        "time": {"start": 1, "end": 2},
    }
    return {"event": {"type": "tool_use", "part": {"tool": tool, "callID": call, "state": state}}}


def test_behaviour_checks_are_judged_again_from_the_transcript(tmp_path: Path) -> None:
    """A tool-used check for the wrong command fails; corrected, the transcript passes it."""
    prompt = actions(_tool("b1", "bash", {"command": "python -m pytest -q"}))
    wrong = [{"type": "tool-used", "kind": "shell", "inputMatches": "ruff"}]
    project = _project(
        tmp_path, _doc("habits", prompt, wrong, **{"$schema": EXTENDED_SCENARIO_URI})
    )
    run_dir, original = _run(project)
    assert {t.verdict for t in original.scenarios["habits"].trials} == {"fail"}
    right = [
        {"type": "tool-used", "kind": "shell", "inputMatches": "pytest"},
        {"type": "transcript-contains", "pattern": "done"},
    ]
    _rewrite(project, "habits", checks=right)
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert new_dir is not None
    for trial in report_of(new_dir / "report.json").scenarios["habits"].trials:
        assert [(c.type, c.verdict) for c in trial.checks or []] == [
            ("tool-used", "pass"),
            ("transcript-contains", "pass"),
        ]
        assert trial.regrade is not None
        assert (trial.regrade.status, trial.regrade.previous_verdict) == ("regraded", "fail")
        assert trial.transcript is not None
        assert (new_dir / trial.transcript).is_file()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("fixture", "its fixture's files"),
        ("prompt", "its prompt"),
        ("setup", "its task.setup"),
        ("native", "the native outputs"),
    ],
)
def test_a_changed_task_is_refused(tmp_path: Path, change: str, named: str) -> None:
    """Only checks may change: a new fixture, prompt, setup or build is refused (exit 2)."""
    prompt = actions({"write": "out.txt", "content": "x"})
    project = _project(tmp_path, _doc("task", prompt, [{"type": "file-exists", "path": "nope"}]))
    run_dir, _original = _run(project)
    if change == "fixture":
        (project / "eval" / "fixtures" / "app" / "src" / "app.py").write_text("print(2)\n")
    elif change == "prompt":
        _rewrite(project, "task", prompt=actions({"write": "out.txt", "content": "other"}))
    elif change == "setup":
        _rewrite(project, "task", setup=[sys.executable, "-c", "pass"])
    else:
        write_native(project, agents={"reviewer": "You review code, strictly."})
    _rewrite(project, "task", checks=[{"type": "file-exists", "path": "out.txt"}])
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert new_dir is None
    assert "regrade-task-changed" in result.stderr
    assert named in result.stderr


def test_trials_that_never_reached_grading_keep_their_verdict(tmp_path: Path) -> None:
    """A session that failed is not graded again; a graded trial beside it is."""
    crash = _doc("crash", actions({"exit": 3}), [{"type": "file-exists", "path": "x"}])
    fine = _doc(
        "fine", actions({"write": "x", "content": "1"}), [{"type": "file-absent", "path": "x"}]
    )
    project = _project(tmp_path, crash, fine)
    run_dir, original = _run(project)
    assert {t.verdict for t in original.scenarios["crash"].trials} == {"infra-error"}
    _rewrite(project, "fine", checks=[{"type": "file-exists", "path": "x"}])
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 1
    assert new_dir is not None
    regraded = report_of(new_dir / "report.json")
    for before, after in zip(
        original.scenarios["crash"].trials, regraded.scenarios["crash"].trials, strict=True
    ):
        assert after.verdict == "infra-error"
        assert after.error == before.error
        assert after.regrade is not None
        assert after.regrade.status == "kept"
    assert {t.verdict for t in regraded.scenarios["fine"].trials} == {"pass"}


def test_a_run_whose_every_state_is_over_the_cap_cannot_be_regraded(tmp_path: Path) -> None:
    """Nothing stored whole: regrade says why (exit 2) and publishes nothing."""
    big = actions({"write": "big.txt", "content": "x" * 5000})
    project = _project(tmp_path, _doc("cap", big, [{"type": "file-exists", "path": "nope"}]))
    report = anyio.run(
        lambda: run_eval(project, host=StandinHost(), trials=1, final_state_cap=1000, html=False)
    )
    run_dir = project / ".atlante" / "eval" / report.run_id
    [trial] = report.scenarios["cap"].trials
    assert trial.final_state is not None
    assert not trial.final_state.complete
    _rewrite(project, "cap", checks=[{"type": "file-exists", "path": "big.txt"}])
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2
    assert new_dir is None
    assert "regrade-no-final-state" in result.stderr
    assert "incomplete" in result.stderr


def test_an_incomplete_trial_beside_whole_ones_is_unavailable(tmp_path: Path) -> None:
    """One trial over the cap, one within it: one regraded, one infra-error naming the cap."""
    prompt = actions(
        {"chance": 0.5, "seed": 7, "then": [{"write": "big.txt", "content": "x" * 5000}]},
        {"write": "small.txt", "content": "1"},
    )
    project = _project(tmp_path, _doc("mixed", prompt, [{"type": "file-exists", "path": "no"}]))
    report = anyio.run(
        lambda: run_eval(
            project, host=StandinHost(), trials=4, jobs=1, final_state_cap=4000, html=False
        )
    )
    whole = [t.final_state.complete for t in report.scenarios["mixed"].trials if t.final_state]
    assert sorted(set(whole)) == [False, True], whole
    run_dir = project / ".atlante" / "eval" / report.run_id
    _rewrite(project, "mixed", checks=[{"type": "file-exists", "path": "small.txt"}])
    _result, new_dir = _regrade(project, run_dir)
    assert new_dir is not None
    regraded = report_of(new_dir / "report.json")
    for trial, complete in zip(regraded.scenarios["mixed"].trials, whole, strict=True):
        assert trial.regrade is not None
        if complete:
            assert (trial.verdict, trial.regrade.status) == ("pass", "regraded")
        else:
            assert (trial.verdict, trial.regrade.status) == ("infra-error", "unavailable")
            assert "over the final-state cap" in (trial.regrade.reason or "")
    compared = invoke("compare", str(run_dir), str(new_dir))
    assert "could not be rebuilt" in compared.stdout
    assert "not regraded: its final state was not stored whole" in compared.stdout


def test_regrade_under_os_isolation_confines_the_command_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command check added later cannot write outside the sandbox when the run was confined.

    Regraded without the confinement (the defence removed), the same check writes
    there: the test sees the breach.
    """
    require_bwrap()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "breach.txt"
    prompt = actions({"write": "out.txt", "content": "x"})
    project = _project(tmp_path, _doc("jail", prompt, [{"type": "file-exists", "path": "out.txt"}]))
    run_dir, original = _run(project, "--isolation", "os")
    assert original.meta.isolation == "os"
    escape = f"open({str(target)!r}, 'w').write('escaped')"
    _rewrite(
        project,
        "jail",
        checks=[
            {"type": "file-exists", "path": "out.txt"},
            {"type": "command", "run": [sys.executable, "-c", escape]},
        ],
    )
    result, new_dir = _regrade(project, run_dir)
    assert new_dir is not None, result.stdout + result.stderr
    regraded = report_of(new_dir / "report.json")
    assert regraded.meta.isolation == "os"
    assert not target.exists()
    for trial in regraded.scenarios["jail"].trials:
        assert [c.verdict for c in trial.checks or []] == ["pass", "fail"]

    async def no_isolation(_mode: str) -> None:
        return None

    monkeypatch.setattr(regrade_module, "preflight_isolation", no_isolation)
    result, new_dir = _regrade(project, run_dir)
    assert target.read_text() == "escaped"


def test_regrade_holds_the_command_checks_to_the_projects_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command check added later that reaches for 1 GiB meets ``memoryMb: 256``.

    Regraded with the project's limits taken away (the defence removed), the same
    check gets all it asked for: the test sees the breach.
    """
    require_cgroups()
    marker = token()
    project = make_project(
        tmp_path / "p",
        scenarios=[
            _doc(
                "hog",
                actions({"write": "a.txt", "content": "x"}),
                [{"type": "file-exists", "path": "a.txt"}],
            )
        ],
        fixtures={"eval/fixtures/app": {"README.md": "hello\n", "hog.py": HOG}},
        eval_extra={"limits": {"memoryMb": 256}},
    )
    run_dir, original = _run(project)
    assert {t.verdict for t in original.scenarios["hog"].trials} == {"pass"}
    hog = [sys.executable, "hog.py", "memory", "1024", marker, "--no-wait"]
    _rewrite(project, "hog", checks=[{"type": "command", "run": hog}])
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert new_dir is not None
    regraded = report_of(new_dir / "report.json")
    assert regraded.meta.limits is not None
    assert regraded.meta.limits.memory_mb == 256
    for trial in regraded.scenarios["hog"].trials:
        assert trial.verdict == "fail", trial
        assert (trial.error or "").startswith("memory limit 256 MB reached (checks)"), trial.error
        assert [(r.phase, r.limit, r.value) for r in trial.limits_reached or []] == [
            ("check", "memory", 256)
        ]
    assert processes_with(marker) == []
    assert groups_left() == []

    async def unlimited(requested: object, project_eval: EvalConfig) -> LimitSettings:
        no_limits = project_eval.model_copy(update={"limits": LimitsConfig()})
        return await isolate.resolve_limits_settings(requested, no_limits)

    monkeypatch.setattr("atlante_eval.run.regrade.resolve_limits_settings", unlimited)
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert new_dir is not None
    for trial in report_of(new_dir / "report.json").scenarios["hog"].trials:
        [check] = trial.checks or []
        assert '"done": 1024' in check.evidence["output"]
        assert trial.limits_reached is None


def test_compare_original_and_regraded_shows_changed_trials(tmp_path: Path) -> None:
    """compare names each trial whose verdict changed and the checks that moved it."""
    prompt = actions({"write": "a.txt", "content": "alpha"})
    project = _project(tmp_path, _doc("cmp", prompt, [{"type": "file-exists", "path": "b.txt"}]))
    run_dir, _ = _run(project)
    _rewrite(
        project,
        "cmp",
        checks=[
            {"type": "file-exists", "path": "a.txt"},
            {"type": "file-contains", "path": "a.txt", "pattern": "alpha"},
        ],
    )
    _result, new_dir = _regrade(project, run_dir)
    assert new_dir is not None
    text = invoke("compare", str(run_dir), str(new_dir))
    assert text.exit_code == 0
    assert "2 trials changed verdict" in text.stdout
    assert (
        "cmp:1  fail -> pass  check 0 (file-exists) fail -> pass; check 1 (file-contains) new: pass"
        in text.stdout
    )
    assert "compare-scenario-changed" not in text.stderr
    document = json.loads(invoke("compare", str(run_dir), str(new_dir), "--json").stdout)
    assert document["regrade"]["regraded"] == 2
    assert [
        (c["scenario"], c["i"], c["before"], c["after"]) for c in document["regrade"]["changed"]
    ] == [
        ("cmp", 0, "fail", "pass"),
        ("cmp", 1, "fail", "pass"),
    ]
    markdown = invoke("compare", str(run_dir), str(new_dir), "--markdown", "-").stdout
    assert "| `cmp:0` | fail | pass |" in markdown
    plain = json.loads(invoke("compare", str(run_dir), str(run_dir), "--json").stdout)
    assert "regrade" not in plain
    page = tmp_path / "compare.html"
    assert invoke("compare", str(run_dir), str(new_dir), "--html", str(page)).exit_code == 0
    html = page.read_text()
    assert '<section id="regrade">' in html
    assert 'data-trial="cmp:1"' in html


def test_show_files_displays_the_stored_final_files(tmp_path: Path) -> None:
    """show RUN SCENARIO:I --files lists contents, binaries, deletions and links."""
    prompt = actions(
        {"write": "notes/todo.md", "content": "- [x] done\n"},
        {"run": [sys.executable, "-c", "open('blob.bin', 'wb').write(bytes(range(256)))"]},
        {"delete": "README.md"},
        {"symlink": "latest", "target": "notes/todo.md"},
        {"chmod": "src/app.py", "mode": 0o600},
    )
    project = _project(tmp_path, _doc("files", prompt, [{"type": "file-exists", "path": "x"}]))
    run_dir, _ = _run(project)
    shown = invoke("show", str(run_dir), "files:1", "--files")
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "deleted  README.md" in lines
    assert "written  blob.bin  mode 0644, 256 bytes, binary" in lines
    assert "symlink  latest  -> notes/todo.md" in lines
    assert "mode     src/app.py  mode 0600" in lines
    assert "  │ - [x] done" in lines
    document = json.loads(invoke("show", str(run_dir), "files:0", "--files", "--json").stdout)
    by_path = {f["path"]: f for f in document["files"]}
    assert by_path["notes/todo.md"]["content"] == "- [x] done\n"
    assert by_path["blob.bin"]["binary"] is True
    assert document["complete"] is True
    refused = invoke("show", str(run_dir), "files", "--files")
    assert refused.exit_code == 2
    assert "--files shows one trial's files" in refused.stderr


def test_a_regraded_run_can_be_regraded_again(tmp_path: Path) -> None:
    """The regraded run carries the final states: iterating on a check twice works."""
    prompt = actions({"write": "v.txt", "content": "3"})
    project = _project(
        tmp_path,
        _doc("again", prompt, [{"type": "file-contains", "path": "v.txt", "pattern": "1"}]),
    )
    run_dir, original = _run(project)
    _rewrite(project, "again", checks=[{"type": "file-contains", "path": "v.txt", "pattern": "2"}])
    _result, second = _regrade(project, run_dir)
    assert second is not None
    _rewrite(project, "again", checks=[{"type": "file-contains", "path": "v.txt", "pattern": "3"}])
    result, third = _regrade(project, second)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert third is not None
    regraded = report_of(third / "report.json")
    assert regraded.meta.regraded_from == report_of(second / "report.json").run_id
    assert all(t.final_state is not None for t in regraded.scenarios["again"].trials)
    assert original.run_id != regraded.run_id


def test_a_resumed_run_keeps_the_final_states_of_reused_trials(tmp_path: Path) -> None:
    """--resume reuses trials and carries their final states: the resumed run regrades."""
    prompt = actions({"write": "r.txt", "content": "ok"})
    project = _project(tmp_path, _doc("resume", prompt, [{"type": "file-exists", "path": "r.txt"}]))
    run_dir, _ = _run(project)
    resumed_dir, resumed = _run(project, "--resume", str(run_dir))
    assert all(t.reused for t in resumed.scenarios["resume"].trials)
    _rewrite(
        project, "resume", checks=[{"type": "file-contains", "path": "r.txt", "pattern": "ok"}]
    )
    result, _new_dir = _regrade(project, resumed_dir)
    assert result.exit_code == 0, result.stdout + result.stderr


def test_a_run_without_final_states_cannot_be_regraded(tmp_path: Path) -> None:
    """--no-final-state: regrade says so (exit 2) and publishes nothing."""
    project = _project(tmp_path, _doc("none", actions(), [{"type": "file-exists", "path": "x"}]))
    run_dir, _ = _run(project, "--no-final-state")
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2
    assert new_dir is None
    assert "regrade-no-final-state" in result.stderr
    assert "--no-final-state" in result.stderr


def test_a_scenario_gone_from_the_project_is_named(tmp_path: Path) -> None:
    """A scenario of the run the project no longer has: exit 2, unless --scenario picks others."""
    keep = _doc(
        "keep", actions({"write": "k", "content": "1"}), [{"type": "file-exists", "path": "k"}]
    )
    gone = _doc("gone", actions(), [{"type": "file-exists", "path": "x"}])
    project = _project(tmp_path, keep, gone)
    run_dir, _ = _run(project)
    (project / "eval" / "scenarios" / "gone.eval.json").unlink()
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2
    assert new_dir is None
    assert "regrade-scenario-missing" in result.stderr
    assert "gone" in result.stderr
    result, _new_dir = _regrade(project, run_dir, "--scenario", "keep", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert list(json.loads(result.stdout)["scenarios"]) == ["keep"]


def _armed(tmp_path: Path) -> Path:
    """A scenario whose first check needs the harness's agent file, with a too strict
    second check; arms: the bare host (control) and the project's harness."""
    prompt = actions({"write": "a.txt", "content": "done\n"})
    checks = [
        {"type": "file-exists", "path": ".opencode/agents/reviewer.md"},
        {"type": "file-contains", "path": "a.txt", "pattern": "DONE"},
    ]
    return make_project(
        tmp_path / "p",
        scenarios=[_doc("armed", prompt, checks, agent="reviewer")],
        eval_extra={
            "variants": [{"name": "bare", "harness": "none", "control": True}, {"name": "full"}],
            "gateway": "off",
        },
    )


def _armed_run(project: Path) -> tuple[Path, RunReport]:
    report = anyio.run(lambda: run_eval(project, host=StandinHost(), trials=2, html=False))
    assert [a.name for a in report.meta.variants or []] == ["bare", "full"]
    return project / ".atlante" / "eval" / report.run_id, report


def test_a_run_with_arms_is_regraded_arm_by_arm(tmp_path: Path) -> None:
    """Each arm's trials are rebuilt with that arm's harness: with the strict check fixed,
    the harness arm passes and the bare one still fails, and the uplift follows."""
    project = _armed(tmp_path)
    run_dir, original = _armed_run(project)
    assert [t.verdict for t in original.scenarios["armed"].trials] == ["fail", "fail"]
    full = original.scenarios["armed"].arms
    assert full is not None
    assert [t.verdict for t in full["full"].trials] == ["fail", "fail"]
    _rewrite(
        project,
        "armed",
        checks=[
            {"type": "file-exists", "path": ".opencode/agents/reviewer.md"},
            {"type": "file-contains", "path": "a.txt", "pattern": "done"},
        ],
    )
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert new_dir is not None
    regraded = report_of(new_dir / "report.json")
    assert regraded.meta.variants == original.meta.variants
    bare = regraded.scenarios["armed"]
    # The bare arm's rebuilt sandbox has no agent file: its first check still fails.
    assert [t.verdict for t in bare.trials] == ["fail", "fail"]
    assert all(t.checks is not None and t.checks[0].verdict == "fail" for t in bare.trials)
    assert bare.arms is not None
    assert [t.verdict for t in bare.arms["full"].trials] == ["pass", "pass"]
    assert all(
        t.regrade is not None and t.regrade.status == "regraded" for t in bare.arms["full"].trials
    )
    assert regraded.uplift is not None
    assert regraded.uplift.arms["full"].scenarios["armed"].arm_passed == 2
    assert "armed@full:0  fail -> pass" in result.stdout
    # each arm's trial files went with it
    assert (new_dir / "trials" / "armed@full" / "0").is_dir()


def test_an_arm_whose_build_changed_or_is_gone_is_refused(tmp_path: Path) -> None:
    """A path arm rebuilt since the run, or an arm no longer configured: regrade-task-changed."""
    project = _armed(tmp_path)
    run_dir, _original = _armed_run(project)
    config = project / "atlante.jsonc"
    document = json.loads(config.read_text())
    document["eval"]["variants"] = [{"name": "bare", "harness": "none", "control": True}]
    write_json(config, document)
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert new_dir is None
    assert "regrade-task-changed" in result.stderr
    assert 'arm "full"' in result.stderr
    assert "no longer in eval.variants" in " ".join(result.stderr.split())
    # The arm is back but now installs no harness: its trials were built with one.
    document["eval"]["variants"] = [
        {"name": "bare", "harness": "none", "control": True},
        {"name": "full", "harness": "none"},
    ]
    write_json(config, document)
    result, new_dir = _regrade(project, run_dir)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert new_dir is None
    assert "another build" in " ".join(result.stderr.split())


def test_an_edited_manifest_makes_its_trial_unavailable(tmp_path: Path) -> None:
    """A manifest changed after the run is not trusted: that trial is not regraded."""
    prompt = actions({"write": "m.txt", "content": "1"})
    project = _project(tmp_path, _doc("edit", prompt, [{"type": "file-exists", "path": "x"}]))
    run_dir, _ = _run(project)
    manifest = run_dir / "trials" / "edit" / "0" / "final-state.json"
    manifest.write_text(manifest.read_text().replace('"m.txt"', '"forged.txt"'))
    _rewrite(project, "edit", checks=[{"type": "file-exists", "path": "m.txt"}])
    _result, new_dir = _regrade(project, run_dir)
    assert new_dir is not None
    first, second = report_of(new_dir / "report.json").scenarios["edit"].trials
    assert first.verdict == "infra-error"
    assert first.regrade is not None
    assert "changed since the run" in (first.regrade.reason or "")
    assert second.verdict == "pass"
    assert (run_dir / "report.json").exists()


def test_regraded_shards_merge(tmp_path: Path) -> None:
    """Each shard's run directory is regraded; the regraded shards merge into one report."""
    prompt = actions({"write": "s.txt", "content": "shard"})
    project = _project(tmp_path, _doc("sharded", prompt, [{"type": "file-exists", "path": "x"}]))
    dirs = [_run(project, "--shard", f"{i}/2")[0] for i in (1, 2)]
    _rewrite(project, "sharded", checks=[{"type": "file-exists", "path": "s.txt"}])
    regraded = []
    for shard_dir in dirs:
        result, new_dir = _regrade(project, shard_dir)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert new_dir is not None
        regraded.append(str(new_dir))
    merged = invoke("merge", *regraded, "--json")
    assert merged.exit_code == 0, merged.stderr
    document = json.loads(merged.stdout)
    assert [t["verdict"] for t in document["scenarios"]["sharded"]["trials"]] == ["pass", "pass"]


def test_a_tampered_transcript_is_not_trusted_by_the_regrade_either(tmp_path: Path) -> None:
    """A trial whose host stream was tampered with: its behaviour checks give error again."""
    prompt = actions(_tool("b1", "bash", {"command": "python -m pytest -q"}))
    check = [{"type": "tool-used", "kind": "shell", "inputMatches": "pytest"}]
    project = _project(tmp_path, _doc("trust", prompt, check, **{"$schema": EXTENDED_SCENARIO_URI}))
    run_dir, original = _run(project)
    assert {t.verdict for t in original.scenarios["trust"].trials} == {"pass"}
    # the run saw (here: is told of) an event forged into the host's stream in trial 0
    document = json.loads((run_dir / "report.json").read_text())
    evidence = {"kind": "after-result", "detail": "an event after the final result"}
    document["scenarios"]["trust"]["trials"][0]["tampered"] = [evidence]
    (run_dir / "report.json").write_text(json.dumps(document))
    result, new_dir = _regrade(project, run_dir)
    assert new_dir is not None, result.stderr
    first, second = report_of(new_dir / "report.json").scenarios["trust"].trials
    assert first.verdict == "infra-error"
    [judged] = first.checks or []
    assert judged.verdict == "error"
    assert "cannot be trusted" in judged.evidence["cause"]
    assert second.verdict == "pass"
