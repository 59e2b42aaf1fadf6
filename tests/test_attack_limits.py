"""Process limits and shared state: few descriptors, concurrent resumes, a full disk, escapes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import (
    cleaned_up,
    console,
    isolated_tmpdir,
    processes_marked,
    report_dirs,
    run_dirs,
    start_cli,
    wait_for,
)
from factory import make_project, scenario, write_json
from standin import StandinHost, actions

from atlante_eval import EvalRunError, RunReport, run_eval
from atlante_eval.run import journal as journal_module
from atlante_eval.run.limits import jobs_for_descriptors

#: 64 trials that overlap: each host sleeps a little, so many run at once.
BUSY = actions({"sleep": 0.3}, {"write": "x.txt", "content": "x"})
X_EXISTS = [{"type": "file-exists", "path": "x.txt"}]


def _busy_project(root: Path) -> Path:
    return make_project(
        root,
        scenarios=[scenario(f"s{i:02d}", prompt=BUSY, checks=X_EXISTS) for i in range(16)],
        eval_extra={"budget": {"trials": 4, "maxSessions": 64}},
    )


def _nofile(soft: int, hard: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return apply


def _report(project: Path) -> RunReport:
    [run_dir] = report_dirs(project)
    return RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def test_ulimit_256_with_64_jobs_runs_fewer_jobs_and_says_so(tmp_path: Path) -> None:
    """`ulimit -n 256` (hard) with --jobs 64: every trial graded, fewer jobs, a warning."""
    project = _busy_project(tmp_path / "project")
    args = ["run", str(project), "--jobs", "64"]
    with cleaned_up(start_cli(args, tmp_path, preexec=_nofile(256, 256))) as cli:
        status = cli.wait(timeout_s=300)
    assert status == 0, cli.stderr
    assert "warning [jobs-limited]" in cli.stderr
    report = _report(project)
    assert [t.verdict for t in report.all_trials()] == ["pass"] * 64
    assert report.meta.jobs == jobs_for_descriptors(64, 256) < 64
    assert processes_marked(cli.tmpdir) == []


def test_a_low_soft_limit_is_raised_to_the_hard_limit(tmp_path: Path) -> None:
    """Soft 256 under a hard 8192: the run raises its soft limit and runs all 64 jobs."""
    project = _busy_project(tmp_path / "project")
    args = ["run", str(project), "--jobs", "64"]
    with cleaned_up(start_cli(args, tmp_path, preexec=_nofile(256, 8192))) as cli:
        status = cli.wait(timeout_s=300)
    assert status == 0, cli.stderr
    assert "jobs-limited" not in cli.stderr
    report = _report(project)
    assert report.meta.jobs == 64
    assert [t.verdict for t in report.all_trials()] == ["pass"] * 64


def test_two_resumes_of_one_run_directory_at_once(tmp_path: Path) -> None:
    """While one --resume runs, a second of the same directory is refused (eval-resume-busy)."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("task", prompt=actions({"write": "x.txt"}), checks=X_EXISTS)],
        eval_extra={"budget": {"trials": 2}},
    )
    with cleaned_up(start_cli(["run", str(project)], tmp_path, name="first")) as first:
        assert first.wait(timeout_s=120) == 0, first.stderr
    [earlier] = report_dirs(project)
    ready, go = tmp_path / "ready", tmp_path / "go"
    # A changed prompt changes the fingerprint: the resume reruns both trials.
    held = actions({"write": str(ready)}, {"wait_for": str(go)}, {"write": "x.txt"})
    write_json(
        project / "eval" / "scenarios" / "task.eval.json",
        scenario("task", prompt=held, checks=X_EXISTS),
    )
    resume = ["run", str(project), "--resume", str(earlier)]
    with cleaned_up(start_cli(resume, tmp_path, name="a")) as a:
        wait_for(ready.exists, timeout_s=60)
        with cleaned_up(start_cli(resume, tmp_path, name="b")) as b:
            assert b.wait(timeout_s=60) == 3, b.stderr
        assert "error [eval-resume-busy]" in b.stderr
        [running] = [
            d for d in report_dirs(project) if d != earlier and (d / "journal.jsonl").exists()
        ]
        again = ["run", str(project), "--resume", str(running)]
        with cleaned_up(start_cli(again, tmp_path, name="c")) as c:
            assert c.wait(timeout_s=60) == 3, c.stderr
        assert "error [eval-resume-busy]" in c.stderr, "a run still going on cannot be resumed"
        go.touch()
        assert a.wait(timeout_s=120) == 0, a.stderr
    assert processes_marked(a.tmpdir) == []
    with cleaned_up(start_cli(resume, tmp_path, name="later")) as later:
        assert later.wait(timeout_s=120) == 0, later.stderr


@contextlib.contextmanager
def _small_tmpfs(mountpoint: Path) -> Iterator[Path]:
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mountpoint)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _fill(directory: Path) -> None:
    """Write into ``directory`` until its file system is full."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="No space left") as full:
            _write_forever(fd)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _write_forever(fd: int) -> None:
    """Write zeros to ``fd`` until a write fails."""
    while True:
        os.write(fd, b"\0" * 4096)


def test_a_full_disk_for_the_journal_stops_the_run_and_says_what_of_the_report(
    tmp_path: Path,
) -> None:
    """A journal write hitting ENOSPC stops the run: eval-journal-failed names the report's fate."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    prompt = actions({"write": str(ready)}, {"wait_for": str(go)}, {"write": "x.txt"})
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("task", prompt=prompt, checks=X_EXISTS)],
        # More trials than the journal's last partly used page holds records for.
        eval_extra={"budget": {"trials": 20}},
    )
    with _small_tmpfs(tmp_path / "small") as out:
        args = ["run", str(project), "--out", str(out), "--jobs", "1"]
        with cleaned_up(start_cli(args, tmp_path)) as cli:
            wait_for(ready.exists, timeout_s=60)
            _fill(out)
            go.touch()
            status = cli.wait(timeout_s=120)
        [run_dir] = [p for p in out.iterdir() if p.is_dir()]
        header = json.loads((run_dir / "journal.jsonl").read_text().splitlines()[0])
    assert status == 3, cli.stderr
    assert "error [eval-journal-failed]" in cli.stderr
    assert "No space left on device" in cli.stderr
    assert "the report could not be published either" in cli.stderr
    assert "error [eval-report-failed]" in cli.stderr
    assert "unexpected internal error" not in cli.stderr
    assert "Traceback" not in cli.stderr
    assert header["runId"] == run_dir.name
    assert processes_marked(cli.tmpdir) == []
    assert run_dirs(cli.tmpdir) == []


HOSTILE_AGENT = "rev\x1b]0;pwned\x07\x1b[2Jiewer"


def test_list_and_validate_escape_terminal_sequences(tmp_path: Path) -> None:
    """An agent name or unknown key holding escape sequences is printed escaped, never raw."""
    project = make_project(
        tmp_path / "project", scenarios=[scenario("odd", agent=HOSTILE_AGENT)], native=True
    )
    listed = console(["list", str(project)])
    assert listed.returncode == 0, listed.stderr
    assert b"\x1b" not in listed.stdout
    assert b"\x07" not in listed.stdout
    assert b"rev\\x1b]0;pwned\\x07\\x1b[2Jiewer" in listed.stdout
    document = scenario("odd")
    document["\x1b[31mkey\x1b[0m"] = 1
    write_json(project / "eval" / "scenarios" / "odd.eval.json", document)
    validated = console(["validate", str(project)])
    assert validated.returncode == 2, validated.stderr
    assert b"\x1b" not in validated.stderr
    assert b"\\x1b[31mkey\\x1b[0m" in validated.stderr


@pytest.mark.anyio
async def test_a_journal_on_a_full_device_stops_the_run_with_a_published_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Journal writes that reach /dev/full (ENOSPC) stop the run; the partial report is out."""
    project = make_project(
        tmp_path / "project",
        scenarios=[scenario("task", prompt=actions({"write": "x.txt"}), checks=X_EXISTS)],
        eval_extra={"budget": {"trials": 3}},
    )
    real_append = journal_module.Journal._append

    def append_to_a_full_device(self: journal_module.Journal, record: dict[str, Any]) -> None:
        """After the header, the journal's descriptor is /dev/full: the real write fails."""
        if "result" in record:
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, self._fd)
            os.close(full)
        real_append(self, record)

    monkeypatch.setattr(journal_module.Journal, "_append", append_to_a_full_device)
    with isolated_tmpdir(monkeypatch, tmp_path / "tmp") as tmpdir:
        with pytest.raises(EvalRunError) as caught:
            await run_eval(project, host=StandinHost(), jobs=1)
        assert run_dirs(tmpdir) == []
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "eval-journal-failed"
    assert "No space left on device" in diagnostic.message
    assert (
        f"a partial report with the finished trials was published at {caught.value.report_path}"
        in diagnostic.message
    )
    assert "--resume" in (diagnostic.next or "")
    assert caught.value.exit_code == 3
    report = RunReport.model_validate_json(caught.value.report_path.read_bytes())
    assert report.meta.interrupted is True
    assert report.scenarios["task"].trials[0].verdict == "pass"
