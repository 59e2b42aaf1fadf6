"""Run options: one definition the CLI and run_eval share, checked once before any trial."""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from factory import make_project, scenario
from standin import StandinHost, actions
from typer.testing import CliRunner

from atlante_eval import RunOptions, run_eval
from atlante_eval._util.fielddocs import field_docstrings
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError, error
from atlante_eval.hosts import HostError
from atlante_eval.run import run_options, runner
from atlante_eval.run.options import OPTION_FLAGS
from atlante_eval.run.runner import RunOutcome, execute_run


class PickyHost(StandinHost):
    """A stand-in host that refuses one --pass-env name."""

    def check_pass_env(self, pass_env: Sequence[str]) -> None:
        if "FORBIDDEN" in pass_env:
            raise HostError("--pass-env FORBIDDEN is refused for this host")


def _project(tmp_path: Path) -> Path:
    return make_project(
        tmp_path / "p", scenarios=[scenario("s", prompt=actions({"write": "a", "content": "x"}))]
    )


def test_refused_pass_env_stops_the_run_before_any_trial(tmp_path: Path) -> None:
    """A host's refused --pass-env name is invalid-option (exit 2) and no session starts."""
    root = _project(tmp_path)
    host = PickyHost()
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: execute_run(root, RunOptions(pass_env=("OK", "FORBIDDEN")), host=host))
    assert caught.value.exit_code == 2
    assert [d.code for d in caught.value.diagnostics] == ["invalid-option"]
    assert "FORBIDDEN" in caught.value.diagnostics[0].message
    assert host.sessions == 0
    assert not (root / ".atlante" / "eval").exists()


def test_accepted_pass_env_runs(tmp_path: Path) -> None:
    """Names the host accepts run normally."""
    root = _project(tmp_path)
    host = PickyHost()
    outcome = anyio.run(lambda: execute_run(root, RunOptions(pass_env=("OK",)), host=host))
    assert host.sessions == 3
    assert outcome.report.exit_code() == 0


@pytest.mark.parametrize("raw", ["0/3", "4/3", "a/b", "3", "1/0", "-1/2"])
def test_bad_shard_is_invalid_option(raw: str) -> None:
    """--shard must be I/N with 1 <= I <= N."""
    with pytest.raises(DiagnosticError) as caught:
        run_options(shard=raw)
    assert [d.code for d in caught.value.diagnostics] == ["invalid-option"]


def test_shard_slices_are_round_robin_and_cover_the_plan() -> None:
    """Shards own every position exactly once, balanced to within one trial."""
    shards = [run_options(shard=f"{i}/3").shard for i in (1, 2, 3)]
    owners = [[s.index for s in shards if s is not None and s.owns(p)] for p in range(10)]
    assert all(len(o) == 1 for o in owners)
    sizes = [sum(1 for o in owners if o == [i]) for i in (1, 2, 3)]
    assert max(sizes) - min(sizes) <= 1


def test_a_lone_surrogate_in_a_host_event_cannot_break_the_report(tmp_path: Path) -> None:
    """A host naming its model with a lone surrogate escape still gets a published report."""
    root = make_project(
        tmp_path / "p",
        scenarios=[scenario("s", prompt=actions({"event": {"type": "x", "model": "\ud800"}}))],
    )
    outcome = anyio.run(lambda: execute_run(root, RunOptions(trials=1), host=StandinHost()))
    [trial] = outcome.report.scenarios["s"].trials
    assert trial.model == "\ufffd"
    assert outcome.path.read_text(encoding="utf-8")


# -- one definition: RunOptions, its flags, the run command and run_eval agree ------------

#: Options of ``run`` that are not run options: how the outcome is printed and logged.
#: (``--variants none|all`` is the second spelling of the ``variants`` field.)
_CLI_ONLY = {"--json", "--junit", "--log-format", "--variants"}
#: ``run_eval`` keywords that are not run options.
_NOT_OPTIONS = {"path", "host", "on_event"}


def _run_flags() -> set[str]:
    """The long flag of every option the ``run`` command declares."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return {
        flag
        for param in group.commands["run"].params
        if isinstance(param, typer.core.TyperOption)
        for flag in param.opts
        if flag.startswith("--")
    }


def test_every_run_option_is_a_field_a_flag_a_cli_option_and_a_run_eval_keyword() -> None:
    """RunOptions' fields, their flags, run's options and run_eval's keywords are one list."""
    fields = set(RunOptions.model_fields)
    assert set(OPTION_FLAGS) == fields
    assert set(field_docstrings(RunOptions)) == fields  # each field says what it is
    assert _run_flags() - _CLI_ONLY == set(OPTION_FLAGS.values())
    keywords = inspect.signature(run_eval).parameters
    assert set(keywords) - _NOT_OPTIONS == fields
    assert all(keywords[name].kind is inspect.Parameter.KEYWORD_ONLY for name in fields)


def _refuse(captured: list[RunOptions]) -> Callable[..., Awaitable[RunOutcome]]:
    """A stand-in for execute_run that keeps the options it is given and starts nothing."""

    async def execute(_path: object, options: RunOptions, **_: object) -> RunOutcome:
        captured.append(options)
        raise DiagnosticError([error("eval-run-failed", "stopped by the test")])

    return execute


#: The same options as ``run`` flags and as ``run_eval`` keywords: together they set
#: every field away from its default (adaptive runs refuse --shard, hence two calls).
_SAME_OPTIONS: list[tuple[list[str], dict[str, Any]]] = [
    (
        shlex.split(
            "--scenario a* --scenario b --trials 2 --jobs 3 --out reports --keep --pass-env "
            "FOO --retry-infra 1 --resume earlier --shard 2/3 --balance duration --balance-from "
            "durations.json --last-failed --no-html --isolation os --gateway off --history "
            "h.sqlite --alert-webhook http://127.0.0.1:9/hook --limit memoryMb=512 "
            "--limit cpus=0.5 --host-version 2.1.332 --variant fast --variant bare "
            "--no-final-state --final-state-cap 64M"
        ),
        {
            "scenarios": ["a*", "b"],
            "trials": 2,
            "jobs": 3,
            "out": "reports",
            "keep": True,
            "pass_env": ["FOO"],
            "retry_infra": 1,
            "resume": "earlier",
            "shard": "2/3",
            "balance": "duration",
            "balance_from": "durations.json",
            "last_failed": True,
            "html": False,
            "isolation": "os",
            "gateway": "off",
            "history": True,
            "history_url": "h.sqlite",
            "alert_webhook": "http://127.0.0.1:9/hook",
            "limits": {"memoryMb": 512, "cpus": 0.5},
            "host_version": "2.1.332",
            "variants": ["fast", "bare"],
            "final_state": False,
            "final_state_cap": 64 * 1024 * 1024,
        },
    ),
    (
        shlex.split(
            "--against base.json --until-decided --min-trials 2 --max-trials 9 --max-cost "
            "1.5 --margin 0.2 --alpha 0.1"
        ),
        {
            "against": "base.json",
            "until_decided": True,
            "min_trials": 2,
            "max_trials": 9,
            "max_cost": 1.5,
            "margin": 0.2,
            "alpha": 0.1,
            "history": True,  # the CLI records by default; run_eval only when asked
        },
    ),
]


def test_the_cli_and_run_eval_build_the_same_options_and_forward_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each flag and each keyword reaches its field: both build the same RunOptions."""
    from_cli: list[RunOptions] = []
    from_api: list[RunOptions] = []
    monkeypatch.chdir(tmp_path)
    changed: set[str] = set()
    for args, keywords in _SAME_OPTIONS:
        monkeypatch.setattr(runner, "execute_run", _refuse(from_cli))
        result = CliRunner().invoke(app, ["run", str(tmp_path), *args], catch_exceptions=False)
        assert result.exit_code == 3, result.output
        assert "stopped by the test" in result.stderr
        monkeypatch.setattr(runner, "execute_run", _refuse(from_api))
        with pytest.raises(DiagnosticError):
            anyio.run(partial(run_eval, tmp_path, **keywords))
        assert from_cli[-1] == from_api[-1] == run_options(**keywords)
        defaults = RunOptions()
        changed |= {
            f for f in RunOptions.model_fields if getattr(from_cli[-1], f) != getattr(defaults, f)
        }
    assert changed == set(RunOptions.model_fields)


@pytest.mark.parametrize(
    ("flag", "text", "keyword", "value"),
    [
        ("--jobs", "0", "jobs", 0),
        ("--trials", "51", "trials", 51),
        ("--retry-infra", "11", "retry_infra", 11),
        ("--shard", "3/2", "shard", "3/2"),
        ("--pass-env", "A=B", "pass_env", ["A=B"]),
        ("--isolation", "vm", "isolation", "vm"),
        ("--gateway", "maybe", "gateway", "maybe"),
        ("--host-version", "^2.1", "host_version", "^2.1"),
        ("--min-trials", "0", "min_trials", 0),
        ("--max-cost", "0", "max_cost", 0),
        ("--margin", "1.5", "margin", 1.5),
        ("--alpha", "1.0", "alpha", 1.0),
        ("--limit", "pids=8", "limits", ["pids=8"]),
        ("--variant", "no/such", "variants", ["no/such"]),
    ],
)
def test_a_bad_value_reads_the_same_from_the_cli_and_run_eval(
    tmp_path: Path, flag: str, text: str, keyword: str, value: Any
) -> None:
    """The flag's text and the keyword's value are refused with the same diagnostics (exit 2)."""
    with pytest.raises(DiagnosticError) as caught:
        anyio.run(lambda: run_eval(tmp_path, **{keyword: value}))
    assert caught.value.exit_code == 2
    result = CliRunner().invoke(app, ["run", str(tmp_path), flag, text], catch_exceptions=False)
    assert result.exit_code == 2
    for diagnostic in caught.value.diagnostics:
        assert flag in diagnostic.message
        assert f"error [{diagnostic.code}]: {diagnostic.message}" in result.stderr
    assert not (tmp_path / ".atlante").exists()
