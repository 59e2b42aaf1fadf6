"""Two model arms on the real ``claude`` and ``opencode`` CLIs against the mock model server.

One ``run_eval`` per host (the pinned versions from the managed host cache) runs a
passing scenario under two arms, ``main`` (``eval.model``) and ``cheap`` (another model):
the mock records which model each model call asked for, so each arm's model is seen to
reach the host and through it the provider; the report gives each arm its trials (with
that model), its statistics and the uplift of ``cheap`` against ``main`` (docs/variants.md).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario

from atlante_eval import run_eval
from atlante_eval.report import arm_scenarios

from .environment import HOSTS, OPENCODE_PROVIDER, leftovers, real_host_environment
from .fixtures import require_hosts
from .hosts import PINNED
from .mock_model import MockModelServer, Reply, Script, WriteFile

pytestmark = pytest.mark.realhost

#: Each host's two models: as eval.model / the arm names them, and as the mock sees them.
MODELS = {
    "claude-code": {"main": ("mock-model", "mock-model"), "cheap": ("mock-cheap", "mock-cheap")},
    "opencode": {
        "main": ("mock/mock-model", "mock-model"),
        "cheap": ("mock/mock-cheap", "mock-cheap"),
    },
}
CHECK_HELLO = [
    sys.executable,
    "-c",
    "import pathlib,sys; sys.exit(pathlib.Path('hello.txt').read_text() != 'hello\\n')",
]


def _provider() -> str:
    """OpenCode's mock provider, with the cheap model beside the main one."""
    provider: dict[str, Any] = json.loads(json.dumps(OPENCODE_PROVIDER))
    models = provider["provider"]["mock"]["models"]
    models["mock-cheap"] = dict(models["mock-model"])
    return json.dumps(provider)


@pytest.mark.parametrize("host", HOSTS)
def test_two_model_arms_reach_the_real_host(host: str, tmp_path: Path) -> None:
    """Each arm's trials ask the provider for that arm's model; the report is per arm."""
    bin_dir = require_hosts()
    models = MODELS[host]
    marker = uuid.uuid4().hex
    script = Script("arms", [WriteFile("hello.txt", "hello\n"), Reply("done")])
    extra = {"OPENCODE_CONFIG_CONTENT": _provider()} if host == "opencode" else None
    with (
        MockModelServer([script]) as mock,
        real_host_environment(
            host, mock, tmp_path, bin_dir=bin_dir, marker=marker, extra=extra
        ) as pass_env,
    ):
        root = make_project(
            tmp_path / "p",
            host=host,
            scenarios=[
                scenario(
                    "hello",
                    prompt="Write hello.txt. [script:arms]",
                    checks=[{"type": "command", "run": CHECK_HELLO}],
                )
            ],
            eval_extra={
                "model": models["main"][0],
                "hostVersion": PINNED[host],
                "budget": {"trials": 2},
                "variants": [{"name": "main"}, {"name": "cheap", "model": models["cheap"][0]}],
            },
        )
        report = anyio.run(lambda: run_eval(root, jobs=2, out=tmp_path / "out", pass_env=pass_env))
        assert leftovers(marker) == []
    main_calls = [r for r in mock.requests if r.script == "arms"]
    asked = {r.model for r in main_calls}
    assert asked == {models["main"][1], models["cheap"][1]}, asked
    assert [a.model for a in report.meta.variants or []] == [models["main"][0], models["cheap"][0]]
    for arm in ("main", "cheap"):
        [result] = arm_scenarios(report, arm).values()
        assert [t.verdict for t in result.trials] == ["pass", "pass"], [
            t.error for t in result.trials
        ]
        assert {t.variant for t in result.trials} == {arm}
        assert {t.model for t in result.trials} == {models[arm][1]}
        assert result.stats is not None
        assert result.stats.passed == 2
        # Each trial's model calls asked for its arm's model only: two calls per trial.
        assert sum(1 for r in main_calls if r.model == models[arm][1]) == 2 * 2
    # The seed fields show the control arm (OpenCode's as the host resolved it: mock-model).
    assert report.meta.model.endswith(models["main"][1])
    assert report.uplift is not None
    row = report.uplift.arms["cheap"].scenarios["hello"]
    assert (row.control_passed, row.arm_passed, row.difference) == (2, 2, 0.0)
    assert row.verdict == "inconclusive"  # two trials a side decide nothing
    assert report.uplift.totals["cheap"].trials == 2
