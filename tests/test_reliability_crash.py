"""Crash safety: SIGKILL at any moment never leaves a torn report; --resume completes a run."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import cleaned_up, journal_results, kill_marked, report_dirs, start_cli, wait_for
from enginekit import MASKS
from factory import make_project, scenario
from standin import actions

from atlante_eval import DiagnosticError, RunReport
from atlante_eval.report.staging import STAGING_SUFFIX
from atlante_eval.run.journal import read_journal

#: Fields that differ between an uninterrupted run and a resumed one by design.
RESUME_MASKS = [
    *MASKS,
    (re.compile(r'\s*"reused": true,?'), ""),
    (re.compile(r'\s*"resumedFrom": "[^"]*",?'), ""),
    (re.compile(r'"(wallTimeMs)": \d+'), r'"\1": 0'),
]


def _mask(text: str) -> str:
    for pattern, replacement in RESUME_MASKS:
        text = pattern.sub(replacement, text)
    return re.sub(r",(\s*[}\]])", r"\1", text)


def _project(tmp_path: Path) -> Path:
    """Quick passes, slower passes and failures: a run that takes a few seconds."""
    slow = actions({"sleep": 0.6}, {"write": "y.txt", "content": "slow\n"}, {"usage": 7})
    return make_project(
        tmp_path / "project",
        scenarios=[
            scenario(
                "a-quick",
                prompt=actions({"write": "x.txt", "content": "quick\n"}, {"usage": 3}),
                checks=[
                    {"type": "file-contains", "path": "x.txt", "pattern": "quick"},
                    {"type": "diff-allowlist", "allow": ["x.txt"]},
                ],
            ),
            scenario("b-slow", prompt=slow, checks=[{"type": "file-exists", "path": "y.txt"}]),
            scenario("c-fail", checks=[{"type": "file-exists", "path": "missing"}]),
        ],
        eval_extra={"budget": {"trials": 3, "maxSessions": 50}},
    )


def _report(run_dir: Path) -> RunReport:
    return RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def test_sigkill_at_every_stage_never_leaves_a_torn_report(tmp_path: Path) -> None:
    """Killed at each stage of a run, it leaves no report or a whole one, and a readable journal.

    The kill moments are events (so many trials journaled), not times: a loaded
    machine moves them, it cannot skip them.
    """
    project = _project(tmp_path)
    with cleaned_up(start_cli(["run", str(project), "--jobs", "3"], tmp_path, name="full")) as cli:
        assert cli.wait() == 1
    stages = range(0, 10, 2)  # journaled trials before the kill: none yet ... all nine
    for n, journaled in enumerate(stages):
        before = set(report_dirs(project))

        def reached(journaled: int = journaled, before: set[Path] = before) -> bool:
            new = [d for d in report_dirs(project) if d not in before]
            return bool(new) and len(journal_results(new[0])) >= journaled

        run = start_cli(["run", str(project), "--jobs", "3"], tmp_path, name=f"kill-{n}")
        with cleaned_up(run) as cli:
            wait_for(lambda: reached() or cli.process.poll() is not None)
            cli.signal(signal.SIGKILL)
            cli.wait()
    dirs = report_dirs(project)
    assert len(dirs) == 1 + len(stages)
    complete = 0
    for run_dir in dirs:
        report_file = run_dir / "report.json"
        if report_file.exists():
            report = _report(run_dir)
            assert len(report.all_trials()) == 9
            complete += 1
        # Every run directory holds its journal, from the moment it appears.
        assert (run_dir / "journal.jsonl").is_file()
        entries = read_journal(run_dir)
        assert len(entries) == len(journal_results(run_dir))
    assert 1 <= complete <= len(dirs)


def _killed_at_reserve(tmp_path: Path, project: Path, *, weakened: bool) -> Path:
    """Run until the run directory appears, then SIGKILL (the CLI kills itself there)."""
    before = set(report_dirs(project))
    extra = {"ATLANTE_TEST_KILL_AT_RESERVE": "1"}
    if weakened:
        extra["ATLANTE_TEST_UNSEEDED_RESERVE"] = "1"
    name = "weak" if weakened else "killed"
    with cleaned_up(start_cli(["run", str(project)], tmp_path, extra_env=extra, name=name)) as cli:
        assert cli.wait() == -signal.SIGKILL, cli.stderr
    [run_dir] = [d for d in report_dirs(project) if d not in before]
    return run_dir


def test_a_run_killed_as_its_directory_appears_leaves_it_resumable(tmp_path: Path) -> None:
    """The earliest SIGKILL that leaves a run directory leaves one with its journal.

    The CLI kills itself right after the directory is reserved: the directory
    appears with the journal's header in it (it was made under a hidden name and
    renamed into place), so ``--resume`` takes it and runs every trial. Reserved
    empty, as before, the directory is one neither ``--resume`` nor anything else can use.
    """
    project = _project(tmp_path)
    run_dir = _killed_at_reserve(tmp_path, project, weakened=False)
    assert [p.name for p in run_dir.iterdir()] == ["journal.jsonl"]
    header = json.loads((run_dir / "journal.jsonl").read_text().splitlines()[0])
    assert header["runId"] == run_dir.name
    assert read_journal(run_dir) == []
    assert not [p for p in run_dir.parent.iterdir() if p.name.startswith(".")]
    args = ["run", str(project), "--resume", str(run_dir)]
    with cleaned_up(start_cli(args, tmp_path, name="resume")) as cli:
        assert cli.wait() == 1, cli.stderr
    [resumed] = [d for d in report_dirs(project) if d != run_dir]
    report = _report(resumed)
    assert report.meta.resumed_from == str(run_dir)
    assert len(report.all_trials()) == 9
    assert not any(t.reused for t in report.all_trials())

    # The weakened reservation (the directory made empty, the journal later) leaves a
    # directory that holds nothing to resume.
    weak = _killed_at_reserve(tmp_path, project, weakened=True)
    assert list(weak.iterdir()) == []
    with pytest.raises(DiagnosticError, match=r"no journal\.jsonl or report\.json"):
        read_journal(weak)


def test_a_staging_directory_left_by_a_killed_run_is_swept(tmp_path: Path) -> None:
    """A hidden staging directory whose journal no run holds is removed by the next run."""
    project = _project(tmp_path)
    base = project / ".atlante" / "eval"
    stale = base / f".2020-01-01T00-00-00-0000{STAGING_SUFFIX}"
    stale.mkdir(parents=True)
    (stale / "journal.jsonl").write_text('{"journal": 1}\n')
    with cleaned_up(start_cli(["run", str(project)], tmp_path)) as cli:
        assert cli.wait() == 1, cli.stderr
    assert not stale.exists()
    assert len(report_dirs(project)) == 1


_WRITER = r"""
import sys
from pathlib import Path
from atlante_eval.report.publish import atomic_write
directory = Path(sys.argv[1])
data = Path(sys.argv[2]).read_bytes()
print("ready", flush=True)
for n in range(100000):
    atomic_write(directory / f"report-{n}.json", data)
    print(n, flush=True)
"""


def test_atomic_write_killed_mid_write_never_exposes_partial_content(tmp_path: Path) -> None:
    """SIGKILL while atomic_write writes 4 MB reports: every visible report is whole.

    The writer announces each finished write; it is killed after a random number of
    them (an event), while the next one is in progress.
    """
    payload = json.dumps({"trials": ["x" * 1000] * 4000}).encode()
    source = tmp_path / "payload.json"
    source.write_bytes(payload)
    rng = random.Random(7)  # noqa: S311 - seeded: reproducible kill moments
    for n in range(6):
        directory = tmp_path / f"out-{n}"
        directory.mkdir()
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(directory), str(source)],
            stdout=subprocess.PIPE,
        )
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline() == b"ready\n"
            # Kill after a random number of whole writes, mid-way through the next one.
            for _ in range(rng.randint(1, 5)):
                writer.stdout.readline()
        finally:
            writer.kill()
            writer.wait()
            if writer.stdout is not None:
                writer.stdout.close()
        reports = list(directory.glob("report-*.json"))
        assert reports
        for report in reports:
            assert report.read_bytes() == payload


def _masked(run_dir: Path) -> str:
    return _mask(_report(run_dir).to_json())


def test_resume_after_sigkill_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    """SIGKILL mid-run, then --resume RUN_DIR: the report equals an uninterrupted run's."""
    project = _project(tmp_path)
    with cleaned_up(start_cli(["run", str(project), "--jobs", "2"], tmp_path, name="ref")) as cli:
        assert cli.wait() == 1
    [reference] = report_dirs(project)

    with cleaned_up(start_cli(["run", str(project), "--jobs", "2"], tmp_path, name="crash")) as cli:
        crashed = wait_for(lambda: [d for d in report_dirs(project) if d != reference])[0]
        wait_for(lambda: len(journal_results(crashed)) >= 4)
        cli.signal(signal.SIGKILL)
        cli.wait()
        kill_marked(cli.tmpdir)
    assert not (crashed / "report.json").exists()
    journaled = len(journal_results(crashed))
    assert 4 <= journaled < 9

    # A torn last line (as a crash mid-append would leave) is ignored on resume.
    journal = crashed / "journal.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    assert len(read_journal(crashed)) == journaled - 1

    args = ["run", str(project), "--jobs", "2", "--resume", str(crashed)]
    with cleaned_up(start_cli(args, tmp_path, name="resume")) as cli:
        assert cli.wait() == 1, cli.stderr
    [resumed] = [d for d in report_dirs(project) if d not in (reference, crashed)]
    report = _report(resumed)
    assert report.meta.resumed_from == str(crashed)
    assert sum(1 for t in report.all_trials() if t.reused) == journaled - 1
    assert _masked(resumed) == _masked(reference)


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff{not json\n", b'{"scenario": "a-quick"}\n'])
def test_resume_ignores_damaged_journal_lines(tmp_path: Path, garbage: bytes) -> None:
    """Binary junk, empty or incomplete records in a journal are skipped, never fatal."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "journal.jsonl").write_bytes(b'{"journal": 1}\n' + garbage + b'{"result": ')
    assert read_journal(run_dir) == []
