"""Hostile report files and output paths: bounded readers, refused special files, failing stdout."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from clikit import cleaned_up, console, report_dirs, start_cli
from factory import make_project, scenario, write_json
from standin import actions

from atlante_eval.report import atomic_write
from atlante_eval.report.publish import UnsafeOutputError

GOLDEN = Path(__file__).with_name("golden") / "report.json"
VALID = GOLDEN.read_text(encoding="utf-8")
#: Braces that expand to 2**11 = 2048 patterns, beyond the limit of 1,000.
BRACES = "{a,b}" * 11


def _fifo(directory: Path) -> Path:
    path = directory / "report.json"
    os.mkfifo(path)
    return path


def _dev_zero(directory: Path) -> Path:
    path = directory / "report.json"
    path.symlink_to("/dev/zero")
    return path


def _deep(directory: Path) -> Path:
    path = directory / "report.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    return path


def _huge_number(directory: Path) -> Path:
    document = json.loads(VALID)
    first = next(iter(document["scenarios"].values()))
    first["trials"][0]["durationMs"] = 10**400
    return write_json(directory / "report.json", document)


HOSTILE: dict[str, Callable[[Path], Path]] = {
    "fifo": _fifo,
    "dev-zero": _dev_zero,
    "nested-100000": _deep,
    "duration-10e400": _huge_number,
}


def _assert_refused(result: subprocess.CompletedProcess[bytes], code: str) -> str:
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert f"error [{code}]" in stderr
    assert "unexpected internal error" not in stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["junit", "compare-base", "compare-head", "merge"])
def test_report_readers_refuse_hostile_files(tmp_path: Path, kind: str, command: str) -> None:
    """A FIFO, /dev/zero, 100,000-deep JSON or a 10**400 duration: `report-unreadable`, exit 2."""
    bad = HOSTILE[kind](tmp_path)
    if kind == "duration-10e400":
        assert "1" + "0" * 400 in bad.read_text()
    args = {
        "junit": ["junit", str(bad)],
        "compare-base": ["compare", str(bad), str(GOLDEN)],
        "compare-head": ["compare", str(GOLDEN), str(bad)],
        "merge": ["merge", str(bad), str(GOLDEN)],
    }[command]
    _assert_refused(console(args), "report-unreadable")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_last_failed_skips_hostile_reports(tmp_path: Path, kind: str) -> None:
    """`run --last-failed` passes over a hostile newest report instead of hanging or crashing."""
    project = make_project(tmp_path / "project", eval_extra={"budget": {"trials": 1}})
    newest = project / ".atlante" / "eval" / "2999-01-01T00-00-00-0000"
    newest.mkdir(parents=True)
    HOSTILE[kind](newest)
    with cleaned_up(start_cli(["run", str(project), "--last-failed"], tmp_path)) as cli:
        status = cli.wait(timeout_s=120)
    assert status == 0, cli.stderr
    assert "warning [last-failed]" in cli.stderr
    assert "no earlier run found" in cli.stderr


def test_brace_globs_beyond_the_limit_are_refused(tmp_path: Path) -> None:
    """More than 1,000 brace expansions in --scenario or eval.scenarios: a diagnostic, exit 2."""
    project = make_project(tmp_path / "project")
    with cleaned_up(start_cli(["run", str(project), "--scenario", BRACES], tmp_path)) as cli:
        assert cli.wait(timeout_s=120) == 2, cli.stderr
    assert "error [invalid-option]" in cli.stderr
    assert "more than 1000 patterns" in cli.stderr
    globbed = make_project(tmp_path / "globbed", glob=f"eval/scenarios/{BRACES}*.eval.json")
    stderr = _assert_refused(console(["validate", str(globbed)]), "invalid-scenario-glob")
    assert "more than 1000 patterns" in stderr


def _closed_pipe() -> int:
    """A pipe's write end whose read end is already closed: every write is EPIPE."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    return write_fd


@pytest.mark.parametrize("sink", ["broken-pipe", "dev-full"])
@pytest.mark.parametrize(
    "args",
    [["junit", str(GOLDEN)], ["compare", str(GOLDEN), str(GOLDEN), "--json"], ["list"]],
    ids=["junit", "compare", "list"],
)
def test_unwritable_stdout_is_a_diagnostic(tmp_path: Path, sink: str, args: list[str]) -> None:
    """A closed pipe or a full device on stdout: `output-failed`, exit 3, never a traceback."""
    if args == ["list"]:
        args = ["list", str(make_project(tmp_path / "project"))]
    if sink == "broken-pipe":
        fd = _closed_pipe()
        try:
            result = console(args, stdout=fd)
        finally:
            os.close(fd)
    else:
        with Path("/dev/full").open("wb") as full:
            result = console(args, stdout=full)
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 3, stderr
    assert "error [output-failed]" in stderr
    assert "unexpected internal error" not in stderr
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr


def test_non_utf8_paths_are_read_and_reported(tmp_path: Path) -> None:
    """A report under a non-UTF-8 directory converts and compares; the path shows as \\xNN."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/run-\xff"))
    odd.mkdir()
    shutil.copy(GOLDEN, odd / "report.json")
    junit = console(["junit", str(odd)])
    assert junit.returncode == 0, junit.stderr
    assert junit.stdout.startswith(b"<?xml")
    compared = console(["compare", str(odd), str(GOLDEN), "--json"])
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["base"]["path"].endswith("run-\\xff/report.json")
    missing = console(["junit", str(odd / "absent")])
    assert "run-\\xff/absent" in _assert_refused(missing, "report-unreadable")


def test_a_run_in_a_non_utf8_project_publishes_and_resumes(tmp_path: Path) -> None:
    """A project whose path is not UTF-8 runs, publishes its report and can be resumed."""
    project = make_project(
        Path(os.fsdecode(bytes(tmp_path) + b"/proj-\xfe")),
        scenarios=[scenario("basic", prompt=actions({"write": "README.md", "content": "x"}))],
        eval_extra={"budget": {"trials": 1}},
    )
    with cleaned_up(start_cli(["run", str(project), "--keep"], tmp_path)) as cli:
        assert cli.wait(timeout_s=120) == 0, cli.stderr
    [run_dir] = report_dirs(project)
    args = ["run", str(project), "--resume", str(run_dir)]
    with cleaned_up(start_cli(args, tmp_path, name="resume")) as again:
        assert again.wait(timeout_s=120) == 0, again.stderr
    assert "unexpected internal error" not in again.stderr


def _special_targets(tmp_path: Path) -> list[Path]:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    return [fifo, Path("/dev/full")]


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


@pytest.mark.parametrize("command", ["junit-o", "compare-markdown", "merge-o"])
def test_output_paths_never_replace_special_files(tmp_path: Path, command: str) -> None:
    """`junit -o`, `compare --markdown` and `merge -o` refuse a FIFO or /dev/full; both survive."""
    document = json.loads(VALID)
    document["meta"].update(shard="1/1", planDigest="a" * 64)
    shard = write_json(tmp_path / "shard.json", document)
    for target in _special_targets(tmp_path):
        before = _kind(target)
        args = {
            "junit-o": ["junit", str(GOLDEN), "-o", str(target)],
            "compare-markdown": ["compare", str(GOLDEN), str(GOLDEN), "--markdown", str(target)],
            "merge-o": ["merge", str(shard), "-o", str(target)],
        }[command]
        _assert_refused(console(args), "invalid-output-path")
        assert _kind(target) == before
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_junit_dash_means_stdout(tmp_path: Path) -> None:
    """`junit -o -` prints the XML instead of writing a file named '-'."""
    result = console(["junit", str(GOLDEN), "-o", "-"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"<?xml")
    assert not (tmp_path / "-").exists()


def test_run_junit_never_replaces_a_device(tmp_path: Path) -> None:
    """`run --junit /dev/full` is refused before any trial runs, and /dev/full survives."""
    project = make_project(tmp_path / "project", eval_extra={"budget": {"trials": 1}})
    with cleaned_up(start_cli(["run", str(project), "--junit", "/dev/full"], tmp_path)) as cli:
        status = cli.wait(timeout_s=120)
    assert status == 2, cli.stderr
    assert "error [invalid-output-path]" in cli.stderr
    assert "character device" in cli.stderr
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    assert report_dirs(project) == []


@pytest.mark.parametrize("replace", [True, False])
def test_the_write_itself_refuses_special_files(tmp_path: Path, replace: bool) -> None:
    """Past the up-front check, atomic_write still refuses a FIFO, a symlink and /dev/full."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "target")
    for target in (fifo, link, Path("/dev/full")):
        before = _kind(target)
        with pytest.raises(UnsafeOutputError):
            atomic_write(target, b"x", replace=replace)
        assert _kind(target) == before
    assert not (tmp_path / "target").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "out.fifo"]
