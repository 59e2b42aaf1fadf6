"""How limits are asked for and resolved: eval.limits, run --limit, run_eval(limits=), defaults.

Bad values read the same from the configuration (``invalid-document``, exit 2,
at the value's position) and from the command line (``invalid-option``, exit 2),
before any trial; ``--limit`` overrides ``eval.limits`` key by key; ``os``
isolation brings its defaults and ``none`` none; a reached limit leads the
trial's cause wherever a cause is shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from factory import make_project
from standin import StandinHost
from typer.testing import CliRunner

from atlante_eval import DiagnosticError, run_eval
from atlante_eval.cli import app
from atlante_eval.isolation.limits import OS_DEFAULTS, ResourceLimits, resolve_limits, with_limits
from atlante_eval.project.config import LimitsConfig
from atlante_eval.report import CheckResult, LimitReached, TrialResult
from atlante_eval.run import run_options
from atlante_eval.views.causes import trial_cause


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stderr if result.stderr_bytes else result.stdout


def test_bad_eval_limits_are_invalid_document_at_their_position(tmp_path: Path) -> None:
    """Each bad key or value is one diagnostic with its pointer and the accepted range."""
    project = make_project(
        tmp_path / "p",
        eval_extra={"limits": {"memoryMb": 8, "pids": "lots", "cpus": "1", "disk": 3}},
    )
    code, out = _invoke("validate", str(project), "--json")
    assert code == 2
    found = {d["pointer"]: d["message"] for d in json.loads(out)["diagnostics"]}
    assert found == {
        "/eval/limits/memoryMb": '"memoryMb" must be an integer from 16 to 16,777,216 or '
        '"unlimited" (got 8)',
        "/eval/limits/pids": '"pids" must be an integer from 16 to 4,194,304 or "unlimited" '
        '(got "lots")',
        "/eval/limits/cpus": '"cpus" must be a number from 0.01 to 1,024 or "unlimited" (got "1")',
        "/eval/limits/disk": 'unrecognized property "disk"',
    }


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("pids=8", '--limit pids must be an integer from 16 to 4,194,304 or "unlimited" (got 8)'),
        ("disk=3", "--limit: unknown limit 'disk'"),
        ("pids", "--limit takes KEY=VALUE, got 'pids'"),
        ("memoryMb=1.5", "--limit memoryMb must be an integer from 16 to 16,777,216"),
        ("cpus=fast", '--limit cpus must be a number from 0.01 to 1,024 or "unlimited"'),
    ],
)
def test_a_bad_limit_flag_is_invalid_option_before_any_trial(
    tmp_path: Path, flag: str, message: str
) -> None:
    """``run --limit`` is read like the configuration; a bad one exits 2."""
    project = make_project(tmp_path / "p")
    code, out = _invoke("run", str(project), "--limit", flag)
    assert code == 2
    assert "error [invalid-option]" in out
    assert message in out
    assert not (project / ".atlante" / "eval").exists()


def test_a_limit_given_twice_is_refused() -> None:
    """The same key twice is ambiguous, not last-one-wins."""
    with pytest.raises(DiagnosticError, match="--limit pids is given more than once"):
        run_options(limits=["pids=64", "pids=128"])


def test_run_eval_takes_the_same_limits_as_the_flag(tmp_path: Path) -> None:
    """``run_eval(limits=...)`` refuses what ``--limit`` refuses, before any trial."""
    project = make_project(tmp_path / "p")
    with pytest.raises(DiagnosticError) as refused:
        anyio.run(lambda: run_eval(project, host=StandinHost(), limits={"pids": 2}))
    assert refused.value.exit_code == 2
    assert refused.value.diagnostics[0].code == "invalid-option"
    assert run_options(limits={"memoryMb": 512, "cpus": 1}).limits == LimitsConfig(
        memory_mb=512, cpus=1.0
    )


def test_os_brings_its_defaults_and_none_brings_none() -> None:
    """Defaults apply under os only; tmpMb never under none; unlimited turns one off."""
    nothing = LimitsConfig()
    assert resolve_limits("none", nothing) == ResourceLimits()
    assert resolve_limits("os", nothing) == ResourceLimits(memory_mb=4096, pids=4096, tmp_mb=1024)
    assert OS_DEFAULTS.cpus is None, "CPU is shared by weight, not capped, by default"
    config = LimitsConfig(pids=512, tmp_mb=64, cpus=2)
    assert resolve_limits("none", config) == ResourceLimits(pids=512, cpus=2.0)
    override = LimitsConfig(pids="unlimited", memory_mb=256)
    assert resolve_limits("os", config, override) == ResourceLimits(
        memory_mb=256, cpus=2.0, tmp_mb=64
    )


def _trial(verdict: str, **fields: object) -> TrialResult:
    return TrialResult.model_validate({"i": 0, "verdict": verdict, "durationMs": 5, **fields})


def test_a_limit_that_ended_the_session_is_budget_exceeded_and_leads_the_cause() -> None:
    """The host died with a limit reached: budget-exceeded; the limit leads error and cause."""
    reached = [LimitReached(phase="session", limit="memory", value=512)]
    crashed = _trial("infra-error", error="host claude failed: exit 137")
    settled = with_limits(crashed, reached)
    assert settled.verdict == "budget-exceeded"
    assert settled.error == "memory limit 512 MB reached (session): host claude failed: exit 137"
    assert trial_cause(settled) == settled.error
    assert settled.model_dump(by_alias=True, exclude_none=True)["limitsReached"] == [
        {"phase": "session", "limit": "memory", "value": 512}
    ]


def test_a_check_that_failed_under_a_limit_keeps_its_verdict() -> None:
    """A failing check stays fail (the limit does not excuse it); a pass stays a pass."""
    check = CheckResult(
        index=0, type="command", verdict="fail", evidence={"exit": 1, "expectExit": 0}
    )
    reached = [LimitReached(phase="check", limit="pids", value=256)]
    failed = with_limits(_trial("fail", checks=[check.model_dump()]), reached)
    assert failed.verdict == "fail"
    assert failed.error == "pids limit 256 reached (checks)"
    assert trial_cause(failed) == (
        "pids limit 256 reached (checks); check 0 command: exit 1, expected 0"
    )
    passed = with_limits(_trial("pass"), [LimitReached(phase="session", limit="tmp", value=64)])
    assert passed.verdict == "pass"
    assert passed.error is None
    assert passed.limits_reached is not None
    assert trial_cause(passed) is None


def test_the_config_schema_documents_every_limit() -> None:
    """``schema config`` lists the four keys with their bounds and "unlimited"."""
    code, out = _invoke("schema", "config")
    assert code == 0
    limits = json.loads(out)["$defs"]["LimitsConfig"]
    assert set(limits["properties"]) == {"memoryMb", "pids", "cpus", "tmpMb"}
    assert limits["additionalProperties"] is False
    assert "unlimited" in json.dumps(limits["properties"]["pids"])
