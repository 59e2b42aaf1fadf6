"""Issue 22's stream attacks, performed for real through the engine, each twice.

The agent is the stand-in host's scripted session (:mod:`standin_claude`), read by
Claude Code's own parser and normalizer through the same ``run_session`` as the
built-in hosts. Its ``forge`` actions write into the host's stdout from a child
process through ``/proc/<host pid>/fd/1``, as the issue reproduced with the real
CLI. Each attack runs against the engine as it is (the attack fails) and against a
deliberately weakened engine, the defence patched out (the attack gets through),
which shows the test sees the breach.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from clikit import report_dirs
from factory import EXTENDED_SCENARIO_URI, make_project, scenario
from standin import actions
from standin_claude import (
    CREDENTIAL_VARIABLE,
    ClaudeDialectStandin,
    assistant,
    line,
    result,
    tool_result,
    tool_use,
)
from weakened import framing_without_recovery, stop_counting_after_result, trusting_usage

from atlante_eval import RunReport, TrialResult, run_eval
from atlante_eval.hosts import streams
from atlante_eval.run import engine

HELLO: dict[str, Any] = {"write": "hello.txt", "content": "hello\n"}
HELLO_EXISTS = {"type": "file-exists", "path": "hello.txt"}
#: The opening of a Claude text event, left unterminated: it swallows the next line.
FRAGMENT = '{"type":"assistant","message":{"content":[{"type":"text","text":"'


def _run(tmp_path: Path, doc: dict[str, Any], **budget: Any) -> TrialResult:
    project = make_project(
        tmp_path / "project",
        scenarios=[doc],
        eval_extra={"budget": {"trials": 1, **budget}},
    )
    report: RunReport = anyio.run(
        lambda: run_eval(project, host=ClaudeDialectStandin(), out=tmp_path / "out")
    )
    [trial] = report.scenarios[doc["name"]].trials
    return trial


def _negative_usage_doc() -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        HELLO,
        {"event": assistant("m1", tokens=300)},
        {"event": assistant("m2", tokens=200)},
        {"event": result(500, cost=0.05, turns=2)},
        # The agent's forgeries, after the host's own result.
        {"forge": line({**result(0, cost=-1234.5), "num_turns": -1_000_000})},
        {"forge": line(assistant("forged", tokens=-999_999_999))},
    ]
    return scenario("negative", prompt=actions(*steps), checks=[HELLO_EXISTS])


@pytest.mark.parametrize("weakened", [False, True])
def test_forged_negative_usage_never_lowers_a_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """Forged negative tokens, cost and turns after the host's result change no figure."""
    if weakened:
        trusting_usage(monkeypatch)
    trial = _run(tmp_path, _negative_usage_doc())
    assert trial.activity is not None
    breached = (trial.tokens or 0) < 500 or (trial.cost or 0) < 0 or trial.activity.turns < 0
    if weakened:
        assert breached, (trial.tokens, trial.cost, trial.activity.turns)
        return
    assert not breached
    assert (trial.tokens, trial.cost, trial.activity.turns) == (500, 0.05, 2)
    assert trial.tampered is not None
    assert {e.kind for e in trial.tampered} == {"negative-usage", "after-result"}
    assert trial.verdict == "pass"  # no behaviour check: the sandbox is still graded


def _early_result_doc() -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"event": assistant("m1", tokens=40)},
        {"forge": line(result(50))},  # the early result that switched enforcement off
        {"event": assistant("m2", tokens=60_000)},
        {"event": assistant("m3", tokens=60_000)},
        HELLO,
        {"exit": 0},  # no result of its own: the host ended right after the forgery
    ]
    return scenario("early-result", prompt=actions(*steps), checks=[HELLO_EXISTS])


@pytest.mark.parametrize("weakened", [False, True])
def test_an_early_result_does_not_switch_the_budget_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """After a forged early result, maxTokens still stops the session in flight."""
    if weakened:
        stop_counting_after_result(monkeypatch)
    trial = _run(tmp_path, _early_result_doc(), maxTokens=100_000)
    if weakened:
        assert trial.verdict == "pass", trial.error  # 120,000 tokens spent, never stopped
        assert (trial.tokens or 0) < 100_000
        return
    assert trial.verdict == "budget-exceeded", trial.error
    assert trial.tokens == 120_050  # the forged result's 50 tokens, then the real messages


def _hidden_write_doc(name: str, forged: dict[str, Any]) -> dict[str, Any]:
    write = tool_use("call-w", "Write", {"file_path": "hello.txt", "content": "hello\n"})
    steps: list[dict[str, Any]] = [
        forged,  # the agent's unterminated fragment, just before the host's next line
        {"event": assistant("m1", write, tokens=10)},
        HELLO,
        {"event": tool_result("call-w")},
        {"event": result(10)},
    ]
    checks = [HELLO_EXISTS, {"type": "tool-not-used", "tool": "Write"}]
    return scenario(
        name, prompt=actions(*steps), checks=checks, **{"$schema": EXTENDED_SCENARIO_URI}
    )


@pytest.mark.parametrize(
    "forged",
    [
        pytest.param({"forge": FRAGMENT}, id="fragment"),
        pytest.param({"forge": FRAGMENT, "pad": 17 << 20}, id="over-long"),
    ],
)
@pytest.mark.parametrize("weakened", [False, True])
def test_a_glued_fragment_cannot_hide_a_forbidden_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool, forged: dict[str, Any]
) -> None:
    """The host's Write line behind a forged fragment is recovered; the trial never passes."""
    if weakened:
        framing_without_recovery(monkeypatch)
    trial = _run(tmp_path, _hidden_write_doc("hidden-write", forged))
    if weakened:
        assert trial.verdict == "pass", trial.checks  # the Write disappeared
        return
    assert trial.verdict == "infra-error", trial.checks
    assert trial.tampered is not None
    assert [e.kind for e in trial.tampered] == ["glued-line"]
    assert trial.activity is not None
    assert trial.activity.tool_calls.by_name == {"Write": 1}  # recovered into the transcript
    [_, behaviour] = trial.checks or []
    assert behaviour.verdict == "error"
    assert "cannot be trusted: glued-line" in behaviour.evidence["cause"]


def _after_result_doc() -> dict[str, Any]:
    skill = tool_use("call-s", "Skill", {"skill": "release-notes"})
    steps: list[dict[str, Any]] = [
        HELLO,
        {"event": assistant("m1", tokens=10)},
        {"event": result(10)},
        {"forge": line(assistant("forged", skill))},  # after the session's final result
    ]
    checks = [HELLO_EXISTS, {"type": "skill-used", "skill": "release-notes"}]
    return scenario(
        "after-result", prompt=actions(*steps), checks=checks, **{"$schema": EXTENDED_SCENARIO_URI}
    )


@pytest.mark.parametrize("weakened", [False, True])
def test_events_after_the_final_result_are_tampering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """A skill call forged after the host's result makes the trial an infra-error, not a pass."""
    if weakened:
        monkeypatch.setattr(streams.ClaudeStream, "finish", lambda _self: None)
    trial = _run(tmp_path, _after_result_doc())
    if weakened:
        assert trial.verdict == "pass", trial.checks  # the forged skill call counted
        return
    assert trial.verdict == "infra-error"
    assert [e.kind for e in trial.tampered or []] == ["after-result"]
    assert "1 event(s) after the session's final result (assistant)" in (
        (trial.tampered or [])[0].detail
    )


def _leaky_docs(key: str) -> list[dict[str, Any]]:
    """Each path from the agent's data into the report, with the session's credential."""
    cat = {"type": "command", "run": ["/bin/sh", "-c", "cat leak.txt; exit 1"]}
    failing: list[dict[str, Any]] = [
        {"env_dump": "leak.txt"},
        {"stderr": f"boom {key}"},
        {"exit": 3},
    ]
    denial = {"tool_name": "Bash", "tool_input": {"command": f"echo {key}"}}
    forged = assistant("m1", tool_use(key, key, {"leak": key}))
    return [
        scenario("diff", prompt=actions({"env_dump": "leak.txt"}), checks=[HELLO_EXISTS]),
        scenario("filename", prompt=actions({"write": f"{key}.txt"}), checks=[HELLO_EXISTS]),
        scenario("check", prompt=actions({"env_dump": "leak.txt"}), checks=[cat]),
        scenario("error", prompt=actions(*failing), checks=[HELLO_EXISTS]),
        scenario(
            "evidence",
            prompt=actions(
                {"event": forged}, {"event": {**result(1), "permission_denials": [denial]}}
            ),
            checks=[HELLO_EXISTS],
        ),
    ]


def _report_texts(out: Path) -> str:
    """Everything the run wrote that a user reads: report, HTML, journal, transcripts."""
    texts = []
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix in (".json", ".html", ".jsonl", ".log", ".xml"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


@pytest.mark.parametrize("weakened", [False, True])
def test_the_credential_is_redacted_from_every_report_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weakened: bool
) -> None:
    """An agent that writes its environment into files never gets the key into the report."""
    key = "sk-ant-api03-" + "Q7" * 20
    monkeypatch.setenv(CREDENTIAL_VARIABLE, key)
    if weakened:
        identity: Callable[[TrialResult, Any], TrialResult] = lambda result, _redact: result  # noqa: E731
        monkeypatch.setattr(engine, "redact_trial", identity)
    project = make_project(
        tmp_path / "project",
        scenarios=_leaky_docs(key),
        eval_extra={"budget": {"trials": 1}},
    )
    report = anyio.run(lambda: run_eval(project, host=ClaudeDialectStandin()))
    [run_dir] = report_dirs(project)
    text = _report_texts(run_dir)
    trials = {name: s.trials[0] for name, s in report.scenarios.items()}
    leaked = {name for name, trial in trials.items() if key in trial.model_dump_json()}
    if weakened:
        assert {"diff", "filename"} <= leaked
        assert key in text
        return
    assert leaked == set()
    assert key not in text
    assert "[redacted]" in (trials["diff"].diff or "")
    assert "[redacted].txt" in (trials["filename"].changed_files or [])
    assert "boom [redacted]" in (trials["error"].error or "")
