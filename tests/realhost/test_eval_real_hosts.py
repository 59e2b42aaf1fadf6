"""atlante-eval drives the real ``claude`` and ``opencode`` CLIs end to end, offline.

For each host, two ``run_eval`` calls run against the scripted mock model server:

* a *main* run at ``jobs=2`` with one trial each of: a stray file (diff-allowlist
  fails), a token budget exceeded mid-run, a timeout caused by model latency, an
  API error, and a destructive command the containment policy denies;
* a *pair* run: two trials of one passing scenario at ``jobs=2`` whose agent dumps
  its environment, to prove the trials shared no HOME or state and that the
  prompt reached the model byte for byte.

The host is found on PATH (as a user's would be) and pointed at the mock the
documented way: Claude Code through ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``
(passed by default), OpenCode through ``eval.model`` ``mock/mock-model``, a stored
``auth.json`` key, and a provider-only ``OPENCODE_CONFIG_CONTENT`` given with
``--pass-env``. Every host process inherits a marker variable; after each run no
process carrying it may be left. The mock is also the hosts' HTTP(S) proxy, so any
traffic to another host would be logged (and refused).
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import CheckDoc, make_project, scenario
from isolationkit import require_bwrap

from atlante_eval import RunReport, TrialResult, regrade_run, run_eval
from atlante_eval.project.native import native_host

from .environment import HOSTS, MARKER_VAR, leftovers, real_host_environment
from .fixtures import require_hosts
from .hosts import PINNED
from .mock_model import (
    Fail,
    MockModelServer,
    Reply,
    RequestRecord,
    RunBash,
    Script,
    Usage,
    WriteFile,
)

pytestmark = pytest.mark.realhost

#: Each host runs both suites without and with OS isolation (docs/isolation.md): under
#: ``os`` the mock is reachable because the session's env names it, and nothing else is.
CASES = [(host, isolation) for host in HOSTS for isolation in ("none", "os")]
PROMPT = (
    "-p --dash first \"double\" 'single' $HOME `tick` ünïcödé ✓\n\tsecond line [script:pair]  \n"
)
#: Scenario budget.timeoutMs for the latency trial: OpenCode needs 3-20 s to start (by load).
SLOW_TIMEOUT_MS = {"claude-code": 5_000, "opencode": 40_000}
MAX_TOKENS = 400_000
BIG = Usage(input_tokens=900_000, output_tokens=5)
CHECK_HELLO = [
    sys.executable,
    "-c",
    "import pathlib,sys; sys.exit(pathlib.Path('hello.txt').read_text() != 'hello\\n')",
]


def scripts() -> list[Script]:
    """Return every script the tests' prompts select."""
    return [
        Script(
            "pair", [WriteFile("hello.txt", "hello\n"), RunBash("env > env.txt"), Reply("done")]
        ),
        Script(
            "stray", [WriteFile("hello.txt", "hello\n"), WriteFile("stray.txt", "x"), Reply("done")]
        ),
        Script("big", [WriteFile("hello.txt", "hello\n", usage=BIG), Reply("done", delay=120)]),
        Script("slow", [Reply("late", delay=120)]),
        Script("err", [Fail(400, "mock says no")]),
        Script("denied", [RunBash("rm -rf sub"), Reply("done")]),
    ]


def scenarios(host: str) -> list[dict[str, Any]]:
    """Return the main run's scenarios."""
    hello: list[CheckDoc] = [
        {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
        {"type": "diff-allowlist", "allow": ["hello.txt"]},
    ]
    return [
        scenario("stray", prompt="Write hello.txt. [script:stray]", checks=hello),
        scenario("big", prompt="Write hello.txt. [script:big]", checks=hello),
        scenario(
            "delayed",
            prompt="Answer slowly. [script:slow]",
            checks=hello,
            budget={"timeoutMs": SLOW_TIMEOUT_MS[host]},
        ),
        scenario("err", prompt="Fail. [script:err]", checks=hello),
        scenario(
            "denied",
            prompt="Delete sub. [script:denied]",
            checks=[
                {"type": "file-unchanged", "path": "sub/keep.txt"},
                {"type": "diff-allowlist", "allow": ["README.md"]},
            ],
        ),
    ]


def pair_scenario() -> dict[str, Any]:
    """Return the passing scenario whose two trials run at once."""
    return scenario(
        "pair",
        prompt=PROMPT,
        checks=[
            {"type": "command", "run": CHECK_HELLO},
            {"type": "file-contains", "path": "hello.txt", "pattern": "hello"},
            {"type": "file-exists", "path": "env.txt"},
            {"type": "file-unchanged", "path": "README.md"},
            {"type": "diff-allowlist", "allow": ["hello.txt", "env.txt"]},
        ],
    )


@dataclass
class HostRun:
    """One host's two runs and what the mock saw."""

    host: str
    main: RunReport
    pair: RunReport
    requests: list[RequestRecord]
    main_leftovers: list[int]
    pair_leftovers: list[int]
    pair_envs: list[dict[str, str]]
    pair_sandboxes: list[Path]
    mock: MockModelServer
    marker: str
    isolation: str = "none"
    main_project: Path | None = None
    main_out: Path | None = None

    def trial(self, name: str) -> TrialResult:
        """Return the single trial of main-run scenario ``name``."""
        [trial] = self.main.scenarios[name].trials
        return trial

    def requests_for(self, script: str) -> list[RequestRecord]:
        """Return the main model calls answered by ``script``."""
        return [r for r in self.requests if r.script == script]


def _run(
    project: Path, out: Path, pass_env: list[str], *, isolation: str, keep: bool = False
) -> RunReport:
    return anyio.run(
        lambda: run_eval(
            project, jobs=2, out=out, pass_env=pass_env, keep=keep, isolation=isolation
        )
    )


def _env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, sep, value = line.partition("=")
        if sep and name.replace("_", "").isalnum():
            env[name] = value
    return env


@pytest.fixture(scope="module", params=CASES, ids=[f"{h}-{i}" for h, i in CASES])
def host_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostRun]:
    """Run both suites on one real host against a fresh mock; yield what happened."""
    host, isolation = request.param
    bin_dir = require_hosts()
    if isolation == "os":
        require_bwrap()
    tmp = tmp_path_factory.mktemp(f"{host}-{isolation}")
    marker = uuid.uuid4().hex
    model = "mock-model" if host == "claude-code" else "mock/mock-model"
    fixtures = {"eval/fixtures/app": {"README.md": "hi\n", "sub/keep.txt": "keep\n"}}
    budget: dict[str, Any] = {"trials": 1, "maxTokens": MAX_TOKENS}
    config: dict[str, Any] = {"model": model, "budget": budget, "hostVersion": PINNED[host]}
    with (
        MockModelServer(scripts()) as mock,
        real_host_environment(host, mock, tmp, bin_dir=bin_dir, marker=marker) as pass_env,
    ):
        main_project = make_project(
            tmp / "main", host=host, scenarios=scenarios(host), fixtures=fixtures, eval_extra=config
        )
        main = _run(main_project, tmp / "main-out", pass_env, isolation=isolation)
        main_leftovers = leftovers(marker)
        pair_project = make_project(
            tmp / "pair",
            host=host,
            scenarios=[pair_scenario()],
            fixtures=fixtures,
            eval_extra={**config, "budget": {**config["budget"], "trials": 2}},
        )
        pair = _run(pair_project, tmp / "pair-out", pass_env, isolation=isolation, keep=True)
        pair_leftovers = leftovers(marker)
        sandboxes = [
            Path(t.sandbox) / "project" for t in pair.scenarios["pair"].trials if t.sandbox
        ]
        envs = [_env_file(s / "env.txt") for s in sandboxes if (s / "env.txt").exists()]
        try:
            yield HostRun(
                host=host,
                main=main,
                pair=pair,
                requests=mock.requests,
                main_leftovers=main_leftovers,
                pair_leftovers=pair_leftovers,
                pair_envs=envs,
                pair_sandboxes=sandboxes,
                mock=mock,
                marker=marker,
                isolation=isolation,
                main_project=main_project,
                main_out=tmp / "main-out",
            )
        finally:
            if pair.meta.run_root:
                shutil.rmtree(pair.meta.run_root, ignore_errors=True)


def test_passing_trials_write_the_file_and_pass_every_check(host_run: HostRun) -> None:
    """Both pair trials pass all five checks, with the mock's usage and the model recorded."""
    trials = host_run.pair.scenarios["pair"].trials
    assert [t.verdict for t in trials] == ["pass", "pass"], [t.error for t in trials]
    for trial in trials:
        assert trial.checks is not None
        assert [c.verdict for c in trial.checks] == ["pass"] * 5
        assert trial.changed_files is not None
        changed = set(trial.changed_files)
        if host_run.host == "opencode":  # its own runtime file, ignored by diff-allowlist
            assert ".opencode/.gitignore" in changed
            changed.discard(".opencode/.gitignore")
        assert changed == {"env.txt", "hello.txt"}
        assert trial.tokens == 3 * (100 + 10)
        assert trial.budget_unmonitored is None
        assert trial.host_evidence is None
    assert host_run.pair.meta.host == host_run.host
    assert host_run.pair.meta.host_version == PINNED[host_run.host]
    source = host_run.pair.meta.host_source  # the pinned managed copy, not PATH's
    known = native_host(host_run.host)
    assert source is not None
    assert known is not None
    assert (source.kind, source.package) == ("managed", f"{known.package}@{PINNED[host_run.host]}")
    assert source.integrity is not None
    assert source.integrity.startswith("sha512-")
    # Through the gateway (on by default): the model is the one the mock said it served,
    # the figures are the gateway's, and the host counted the same.
    assert all(t.model == "mock-model" for t in trials)
    assert all(t.usage is not None and t.usage.source == "gateway" for t in trials)
    assert all(t.usage is not None and t.usage.host_tokens == t.tokens for t in trials)
    if host_run.host == "claude-code":
        assert all(t.cost for t in trials)


def test_the_prompt_reaches_the_model_byte_for_byte(host_run: HostRun) -> None:
    """The scenario prompt (leading dash, quotes, newline, unicode) arrives unchanged."""
    calls = host_run.requests_for("pair")
    assert len(calls) == 2 * 3
    for call in calls:
        assert call.user_texts[-1] == PROMPT
    if host_run.host == "opencode":
        assert all(call.user_texts == (PROMPT,) for call in calls)


def test_concurrent_trials_share_no_home_or_state(host_run: HostRun) -> None:
    """Each trial's HOME, XDG, temp and config dirs live in its own state directory."""
    assert len(host_run.pair_envs) == 2
    names = [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
    ]
    if host_run.host == "claude-code":
        names += ["CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR"]
    for env, sandbox in zip(host_run.pair_envs, host_run.pair_sandboxes, strict=True):
        state = sandbox.parent / "state"
        for name in names:
            assert Path(env[name]).is_relative_to(state), (name, env[name])
        assert env[MARKER_VAR] == host_run.marker
        assert "SECRET_MARKER" not in env
    first, second = host_run.pair_envs
    assert all(first[name] != second[name] for name in names)


def test_no_traffic_leaves_and_only_models_are_called(host_run: HostRun) -> None:
    """The proxy trap saw nothing: every request was a model call on the host's API path."""
    path = "/v1/messages" if host_run.host == "claude-code" else "/v1/chat/completions"
    assert host_run.requests
    for record in host_run.requests:
        assert (record.method, record.path) == ("POST", path), record
        assert record.kind in ("main", "side"), record
        assert record.model == "mock-model"


def test_no_model_call_beyond_the_task(host_run: HostRun) -> None:
    """No title call (issue 17); the only other call is OpenCode compacting the 900k-token trial.

    The ``big`` trial reports 900k tokens against a 128k context, so OpenCode's
    automatic compaction (part of how its agent works, kept on) may summarise it.
    """
    assert host_run.requests
    assert not [r for r in host_run.requests if "Generate a title" in r.prompt]
    for record in host_run.requests:
        if record.kind != "main":
            assert host_run.host == "opencode", record
            assert "[script:big]" in record.prompt, record
            assert "compact" in json.dumps(record.body), record
    pair = host_run.pair.scenarios["pair"].trials
    assert len(host_run.requests_for("pair")) == 3 * len(pair)


def test_stray_file_fails_the_diff_allowlist(host_run: HostRun) -> None:
    """An out-of-scope file makes diff-allowlist fail with it as the unexpected path."""
    trial = host_run.trial("stray")
    assert trial.verdict == "fail", trial.error
    assert trial.checks is not None
    assert trial.checks[0].verdict == "pass"
    assert trial.checks[1].verdict == "fail"
    assert trial.checks[1].evidence["unexpected"] == ["stray.txt"]


def test_token_budget_aborts_mid_run(host_run: HostRun) -> None:
    """900k tokens in the first model call: budget-exceeded before the delayed second call."""
    trial = host_run.trial("big")
    assert trial.verdict == "budget-exceeded", trial.error
    assert trial.error == f"trial exceeded {MAX_TOKENS} tokens"
    assert trial.tokens is not None
    assert trial.tokens > MAX_TOKENS
    assert [r.step for r in host_run.requests_for("big")] in ([0], [0, 1])


def test_model_latency_times_out(host_run: HostRun) -> None:
    """A model that answers after two minutes hits the scenario timeout; the call was made."""
    trial = host_run.trial("delayed")
    timeout = SLOW_TIMEOUT_MS[host_run.host]
    assert trial.verdict == "timeout", trial.error
    assert trial.error == f"trial exceeded {timeout}ms"
    assert trial.duration_ms >= timeout  # it ran until the timeout, not one answer further
    assert host_run.requests_for("slow")


def test_api_error_is_an_infra_error_with_the_status(host_run: HostRun) -> None:
    """An HTTP 400 from the model becomes an infra-error naming the status and message."""
    trial = host_run.trial("err")
    assert trial.verdict == "infra-error"
    assert trial.error is not None
    assert "bad request: status 400" in trial.error
    assert "mock says no" in trial.error
    prefix = (
        "claude run exited 1: claude run failed"
        if host_run.host == "claude-code"
        else "opencode run exited 1: APIError"
    )
    assert trial.error.startswith(prefix)


def test_destructive_command_is_denied_by_the_policy(host_run: HostRun) -> None:
    """`rm -rf sub` is denied by the generated policy; Claude's denial is recorded."""
    trial = host_run.trial("denied")
    assert trial.verdict == "pass", (trial.error, trial.checks)
    if host_run.host == "claude-code":
        assert trial.host_evidence is not None
        [denial] = trial.host_evidence["permissionDenials"]
        assert denial["tool"] == "Bash"
        assert "rm -rf sub" in denial["input"]


def test_isolation_is_recorded_and_nothing_was_denied(host_run: HostRun) -> None:
    """Under os the report says so, and no trial tried a destination other than the mock."""
    reports = (host_run.main, host_run.pair)
    expected = "os" if host_run.isolation == "os" else None
    assert [r.meta.isolation for r in reports] == [expected, expected]
    for report in reports:
        for trial in report.all_trials():
            assert trial.denied is None, (trial.i, trial.denied)


def test_no_process_is_left_behind(host_run: HostRun) -> None:
    """No process carrying the run's marker survives either run (budget and timeout included)."""
    assert host_run.main_leftovers == []
    assert host_run.pair_leftovers == []


def test_regrade_reproduces_every_verdict_without_a_model_call(
    host_run: HostRun, tmp_path: Path
) -> None:
    """The main run regraded with unchanged checks: the same verdicts, and no model call.

    The real host's sandbox (its configuration, its runtime files, the agent's
    work) is rebuilt from the stored final states alone (docs/regrade.md).
    """
    assert host_run.main_project is not None
    assert host_run.main_out is not None
    run_dir = host_run.main_out / host_run.main.run_id
    calls = len(host_run.mock.requests)
    outcome = anyio.run(
        lambda: regrade_run(run_dir, project=host_run.main_project, out=tmp_path, html=False)
    )
    assert len(host_run.mock.requests) == calls
    assert outcome.report.meta.regraded_from == host_run.main.run_id
    assert outcome.report.meta.isolation == host_run.main.meta.isolation
    for name, result in host_run.main.scenarios.items():
        regraded = outcome.report.scenarios[name].trials
        for before, after in zip(result.trials, regraded, strict=True):
            assert after.regrade is not None
            assert after.regrade.status == ("kept" if before.checks is None else "regraded")
            assert after.verdict == before.verdict, (name, after.error)
            assert [c.verdict for c in after.checks or []] == [
                c.verdict for c in before.checks or []
            ]
            # the session's metered facts are the run's, and their record is carried over
            assert (after.tokens, after.cost, after.usage) == (
                before.tokens,
                before.cost,
                before.usage,
            )
            assert after.model_calls == before.model_calls
            if after.model_calls is not None:
                assert (outcome.path.parent / after.model_calls).is_file()
    assert outcome.report.meta.gateway == host_run.main.meta.gateway
