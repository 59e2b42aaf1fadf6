"""Arms with different host versions: each arm runs its own pinned copy from the managed
host cache, installed with the real npm client from a local registry (docs/variants.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import console, report_dirs
from hostcachekit import OTHER, PACKAGE, PINNED, World, pinned_world
from stubcli import calls, sessions

from atlante_eval import RunReport
from atlante_eval.report import arm_scenarios


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A registry publishing two stand-in Claude Code versions, a third on PATH."""
    with pinned_world(tmp_path, monkeypatch) as made:
        yield made


def test_each_arm_runs_its_own_pinned_host_version(world: World) -> None:
    """Arm "current" runs the project's pin, arm "next" eval.variants' hostVersion: both
    installed into the cache by npm, each session on its own copy, PATH's never started."""
    config = world.project / "atlante.jsonc"
    document = json.loads(config.read_text())
    document["eval"]["budget"] = {"trials": 2}
    document["eval"]["variants"] = [{"name": "current"}, {"name": "next", "hostVersion": OTHER}]
    config.write_text(json.dumps(document))
    done = console(["run", str(world.project), "--jobs", "1"])
    assert done.returncode == 0, done.stderr.decode()
    err = done.stderr.decode()
    assert f"installed claude-code {PINNED}" in err
    assert f"installed claude-code {OTHER}" in err
    assert len(sessions(world.managed[PINNED])) == 2
    assert len(sessions(world.managed[OTHER])) == 2
    assert calls(world.on_path) == []
    assert world.registry.count("tarball", PACKAGE) == 2
    [run_dir] = report_dirs(world.project)
    report = RunReport.model_validate_json((run_dir / "report.json").read_bytes())
    versions = {a.name: a.host_version for a in report.meta.variants or []}
    assert versions == {"current": PINNED, "next": OTHER}
    assert report.meta.host_version == PINNED  # the seed fields show the control arm
    for arm in ("current", "next"):
        [result] = arm_scenarios(report, arm).values()
        assert [t.verdict for t in result.trials] == ["pass", "pass"]
        assert {t.variant for t in result.trials} == {arm}
    compared = console(["compare", str(run_dir), "--arms", "current,next", "--json"])
    assert compared.returncode == 0, compared.stderr.decode()
    sides = json.loads(compared.stdout)
    assert (sides["base"]["hostVersion"], sides["head"]["hostVersion"]) == (PINNED, OTHER)
