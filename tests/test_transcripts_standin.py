"""Transcripts recorded through the engine with the stand-in host (a real subprocess)."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import cleaned_up, report_dirs, start_cli
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import RunReport, load_transcript, run_eval
from atlante_eval.transcript import (
    RAW_FILE,
    ErrorEntry,
    HeaderEntry,
    RawEntry,
    SessionStartEntry,
    TextEntry,
    ToolCallEntry,
    TruncatedEntry,
)
from atlante_eval.transcript.writer import DEFAULT_LIMITS

MIB = 1024 * 1024


def tool_event(call: str, tool: str, arguments: dict[str, Any], output: str) -> dict[str, Any]:
    """An OpenCode ``tool_use`` event the stand-in prints."""
    state = {
        "status": "completed",
        "input": arguments,
        "output": output,
        "time": {"start": 1000, "end": 1007},
    }
    return {"event": {"type": "tool_use", "part": {"tool": tool, "callID": call, "state": state}}}


WRITE = tool_event("c1", "write", {"filePath": "x.txt", "content": "done"}, "Wrote file")
SHELL = tool_event("c2", "bash", {"command": "ls"}, "x.txt")
UNKNOWN = {"event": {"type": "brand-new", "payload": [1, 2, 3]}}


def _report(project: Path) -> tuple[Path, RunReport]:
    [run_dir] = report_dirs(project)
    return run_dir, RunReport.model_validate_json((run_dir / "report.json").read_bytes())


def _raw_lines(trial_dir: Path) -> list[str]:
    with gzip.open(trial_dir / RAW_FILE, "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


@pytest.mark.anyio
async def test_transcript_holds_the_session_and_the_report_points_to_it(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "s",
                prompt=actions(
                    WRITE, SHELL, UNKNOWN, {"write": "x.txt", "content": "d"}, {"usage": 9}
                ),
                checks=[{"type": "file-exists", "path": "x.txt"}],
            )
        ],
        eval_extra={"budget": {"trials": 2}},
    )
    outcome = await run_eval(project, host=StandinHost(), jobs=2)
    run_dir = report_dirs(project)[0]
    scenario_result = outcome.scenarios["s"]
    for index, trial in enumerate(scenario_result.trials):
        assert trial.transcript == f"trials/s/{index}/transcript.jsonl"
        entries = load_transcript(run_dir / trial.transcript)
        header = entries[0]
        assert isinstance(header, HeaderEntry)
        assert (header.host, header.scenario, header.trial) == ("standin", "s", index)
        assert isinstance(entries[1], SessionStartEntry)
        calls = [e for e in entries if isinstance(e, ToolCallEntry)]
        assert [(c.name, c.tool_kind, c.input, c.output, c.duration_ms) for c in calls] == [
            ("write", "write", {"filePath": "x.txt", "content": "done"}, "Wrote file", 7),
            ("bash", "shell", {"command": "ls"}, "x.txt", 7),
        ]
        [raw] = [e for e in entries if isinstance(e, RawEntry)]
        assert raw.event == {"type": "brand-new", "payload": [1, 2, 3]}
        assert [e.text for e in entries if isinstance(e, TextEntry)] == ["done"]
        assert all(b.t >= a.t for a, b in itertools.pairwise(entries))
        assert trial.activity is not None
        assert trial.activity.tool_calls.total == 2
        assert trial.activity.tool_calls.by_kind == {"shell": 1, "write": 1}
        assert trial.activity.tool_calls.by_name == {"bash": 1, "write": 1}
        assert trial.activity.files_written == ["x.txt"]
        raw_lines = _raw_lines(run_dir / "trials" / "s" / str(index))
        assert any('"brand-new"' in line for line in raw_lines)
    assert scenario_result.activity is not None
    assert scenario_result.activity.trials == 2
    assert scenario_result.activity.tool_calls.by_kind == {"shell": 2, "write": 2}


@pytest.mark.anyio
async def test_a_timeout_keeps_the_transcript_up_to_that_moment(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario("slow", prompt=actions(WRITE, {"sleep": 60}), budget={"timeoutMs": 1500})
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    outcome = await run_eval(project, host=StandinHost(), jobs=1)
    [trial] = outcome.scenarios["slow"].trials
    assert trial.verdict == "timeout"
    assert trial.transcript is not None
    entries = load_transcript(report_dirs(project)[0] / trial.transcript)
    assert [e.name for e in entries if isinstance(e, ToolCallEntry)] == ["write"]
    assert trial.activity is not None
    assert trial.activity.tool_calls.total == 1


@pytest.mark.anyio
async def test_an_interruption_keeps_the_transcript_up_to_that_moment(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("stuck", prompt=actions(WRITE, SHELL, {"sleep": 120}))],
        eval_extra={"budget": {"trials": 1, "timeoutMs": 600_000}},
    )
    transcript = project / ".atlante" / "eval"

    def shell_seen() -> bool:
        return any(
            '"name":"bash"' in p.read_text()
            for p in transcript.glob("*/trials/stuck/0/transcript.jsonl")
        )

    async with anyio.create_task_group() as group:

        async def cancel_when_recorded() -> None:
            # The transcript file is the event: cancel once the shell call is on disk.
            while not shell_seen():  # noqa: ASYNC110
                await anyio.sleep(0.02)
            group.cancel_scope.cancel()

        group.start_soon(cancel_when_recorded)
        await run_eval(project, host=StandinHost(), jobs=1)
        pytest.fail("run_eval returned although it was cancelled")
    [path] = transcript.glob("*/trials/stuck/0/transcript.jsonl")
    entries = load_transcript(path)
    assert [e.name for e in entries if isinstance(e, ToolCallEntry)] == ["write", "bash"]
    # The partial report points at it, and summarises what the trial did before the stop.
    _, report = _report(project)
    [trial] = report.scenarios["stuck"].trials
    assert trial.error == "the run was interrupted before this trial finished"
    assert trial.transcript == "trials/stuck/0/transcript.jsonl"
    assert trial.activity is not None
    assert trial.activity.tool_calls.by_name == {"bash": 1, "write": 1}


@pytest.mark.anyio
async def test_resumed_trials_keep_their_transcripts(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("s", prompt=actions(WRITE, {"write": "x.txt", "content": "d"}))],
        eval_extra={"budget": {"trials": 1}},
    )
    first = await run_eval(project, host=StandinHost(), jobs=1, out=tmp_path / "first")
    [first_dir] = (tmp_path / "first").iterdir()
    second = await run_eval(
        project, host=StandinHost(), jobs=1, out=tmp_path / "second", resume=first_dir
    )
    [trial] = second.scenarios["s"].trials
    assert trial.reused is True
    assert trial.transcript == first.scenarios["s"].trials[0].transcript
    assert trial.transcript is not None
    [second_dir] = (tmp_path / "second").iterdir()
    copied = load_transcript(second_dir / trial.transcript)
    assert [e.name for e in copied if isinstance(e, ToolCallEntry)] == ["write"]


def test_secrets_never_reach_any_stored_file(tmp_path: Path) -> None:
    """Credential-like and --pass-env values a host prints are redacted in every file."""
    secret_key, passed = "sk-live-0123456789abcdef", "pass-env-value-98765"
    leak = f"key={secret_key} passed={passed}"
    # The checks compute the secret, so the scenario documents (in the report) do not hold it.
    hidden = f"print(('key=' + {secret_key[::-1]!r}[::-1] + '\\n') * 400)"
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "leaky",
                prompt=actions(
                    {"event": {"type": "text", "part": {"text": leak}}},
                    tool_event("c1", "bash", {"command": f"echo {secret_key}"}, leak),
                    {"event": {"type": "mystery", "value": leak}},
                    {
                        "event": {
                            "type": "error",
                            "error": {"name": "APIError", "data": {"message": leak}},
                        }
                    },
                    {"print": leak},
                    {"stderr": leak},
                    {"exit": 1},
                ),
            ),
            scenario(
                "leaky-check",
                prompt=actions({"usage": 1}),
                checks=[{"type": "command", "run": ["python3", "-c", hidden]}],
            ),
            scenario(
                "leaky-setup",
                setup=[
                    "python3",
                    "-c",
                    "import os; print(os.environ['MY_SERVICE_API_KEY'] * 300); raise SystemExit(2)",
                ],
            ),
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    extra = {"MY_SERVICE_API_KEY": secret_key, "HARNESS_OPTION": passed}
    run = start_cli(
        ["run", str(project), "--pass-env", "HARNESS_OPTION", "--json"], tmp_path, extra_env=extra
    )
    with cleaned_up(run) as cli:
        assert cli.wait(timeout_s=120) == 1, cli.stderr
    run_dir, report = _report(project)
    stored: dict[str, str] = {}
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            stored[str(path.relative_to(run_dir))] = data.decode("utf-8", errors="replace")
    assert "trials/leaky/0/transcript.jsonl" in stored
    assert "trials/leaky/0/raw.jsonl.gz" in stored
    assert "trials/leaky-check/0/check-0.log" in stored
    assert "trials/leaky-setup/0/setup.log" in stored
    for name, text in stored.items():
        assert secret_key not in text, name
        assert passed not in text, name
    assert "[redacted]" in stored["trials/leaky/0/transcript.jsonl"]
    assert "[redacted]" in stored["trials/leaky-check/0/check-0.log"]
    check = report.scenarios["leaky-check"].trials[0].checks
    assert check is not None
    assert check[0].evidence["outputLog"] == "trials/leaky-check/0/check-0.log"
    setup = report.scenarios["leaky-setup"].trials[0]
    assert setup.host_evidence == {"setupLog": "trials/leaky-setup/0/setup.log"}
    leaky = report.scenarios["leaky"].trials[0]
    assert leaky.activity is not None
    assert leaky.activity.first_error is not None
    assert "[redacted]" in leaky.activity.first_error


def test_secrets_would_be_stored_without_redaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The breach the test above guards against is real: with redaction off, the key is stored."""
    from atlante_eval.transcript import writer as transcript_writer

    monkeypatch.setattr(transcript_writer, "MIN_SECRET_LENGTH", 10**6)
    secret_key = "sk-live-0123456789abcdef"
    monkeypatch.setenv("MY_SERVICE_API_KEY", secret_key)
    project = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "leaky", prompt=actions({"event": {"type": "text", "part": {"text": secret_key}}})
            )
        ],
        eval_extra={"budget": {"trials": 1}},
    )
    outcome = anyio.run(lambda: run_eval(project, host=StandinHost(), jobs=1))
    [trial] = outcome.scenarios["leaky"].trials
    assert trial.transcript is not None
    assert secret_key in (report_dirs(project)[0] / trial.transcript).read_text()


def _peak_rss_kib(tmp_path: Path, project: Path, name: str) -> int:
    rss = tmp_path / f"{name}.rss"
    run = start_cli(
        ["run", str(project)], tmp_path, name=name, extra_env={"ATLANTE_TEST_RSS_FILE": str(rss)}
    )
    with cleaned_up(run) as cli:
        assert cli.wait(timeout_s=600) == 0, cli.stderr
    return int(rss.read_text())


def test_a_200_mib_stream_keeps_memory_and_files_bounded(tmp_path: Path) -> None:
    checks = [{"type": "file-exists", "path": "x.txt"}]
    write = {"write": "x.txt", "content": "d"}
    flooding = make_project(
        tmp_path / "flooding",
        scenarios=[
            scenario(
                "flood",
                prompt=actions({"flood": 200 * MIB, "json": True}, write, {"usage": 5}),
                checks=checks,
            )
        ],
        eval_extra={"budget": {"trials": 1, "timeoutMs": 600_000}},
    )
    quiet = make_project(
        tmp_path / "quiet",
        scenarios=[scenario("flood", prompt=actions(write, {"usage": 5}), checks=checks)],
        eval_extra={"budget": {"trials": 1}},
    )
    baseline_kib = _peak_rss_kib(tmp_path, quiet, "quiet")
    flooded_kib = _peak_rss_kib(tmp_path, flooding, "flooding")
    run_dir, report = _report(flooding)
    [trial] = report.scenarios["flood"].trials
    assert trial.verdict == "pass"
    trial_dir = run_dir / "trials" / "flood" / "0"
    transcript = trial_dir / "transcript.jsonl"
    limits = DEFAULT_LIMITS
    assert transcript.stat().st_size <= limits.max_bytes + limits.reserve * (
        limits.text_chars + 1024
    )
    entries = load_transcript(transcript)
    assert len(entries) <= limits.max_entries + limits.reserve + 1
    marker = entries[-1]
    assert isinstance(marker, TruncatedEntry)
    assert marker.unit == "entries"
    assert marker.dropped > 100_000
    raw = _raw_lines(trial_dir)
    assert sum(len(line) + 1 for line in raw[:-1]) <= limits.raw_bytes
    assert json.loads(raw[-1])["atlante"] == "truncated"
    assert json.loads(raw[-1])["dropped"] > 150 * MIB
    # The activity still counts past the cap: the text entries are counted, the usage too.
    assert trial.activity is not None
    assert flooded_kib < baseline_kib + 64 * 1024, (baseline_kib, flooded_kib)


def test_a_failing_host_leaves_its_error_in_the_transcript(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "p",
        scenarios=[scenario("boom", prompt=actions({"stderr": "boom"}, {"exit": 3}))],
        eval_extra={"budget": {"trials": 1}},
    )
    outcome = anyio.run(lambda: run_eval(project, host=StandinHost(), jobs=1))
    [trial] = outcome.scenarios["boom"].trials
    assert trial.verdict == "infra-error"
    assert trial.transcript is not None
    entries = load_transcript(report_dirs(project)[0] / trial.transcript)
    [error] = [e for e in entries if isinstance(e, ErrorEntry)]
    assert "boom" in error.message
    assert trial.activity is not None
    assert trial.activity.first_error is not None
