"""Run options are checked once, before any trial: refused --pass-env names, bad shards."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from factory import make_project, scenario
from standin import StandinHost, actions

from atlante_eval import RunOptions
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.hosts import HostError
from atlante_eval.run import run_options
from atlante_eval.run.runner import execute_run


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
