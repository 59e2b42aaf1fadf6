"""run_lifecycle owns a run's directory and run root: publish on the way out, always clean up."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from atlante_eval import Meta, ScenarioResult
from atlante_eval.report import REPORT_FILE, MetaConfig
from atlante_eval.run.lifecycle import ActiveRun, run_lifecycle

CONFIG = MetaConfig(
    trials=1,
    timeout_ms=1000,
    max_sessions=1,
    max_tokens=10,
    setup_timeout_ms=1000,
    check_timeout_default_ms=1000,
)
META = Meta(atlante="0", host="h", model="m", model_version="v", config=CONFIG)


def _none(_stopped: bool) -> dict[str, ScenarioResult]:
    return {}


@pytest.mark.anyio
async def test_a_finished_run_is_published_and_its_run_root_removed(tmp_path: Path) -> None:
    """On a normal exit the report is published, the run root removed, the end hook called."""
    ended: list[ActiveRun] = []

    async def on_end(run: ActiveRun) -> None:
        ended.append(run)

    async with run_lifecycle(
        project_root=tmp_path, out=None, meta=META, keep=False, results=_none, on_end=on_end
    ) as run:
        (run.run_root / "trial").mkdir()
        assert run.run_dir.parent == tmp_path / ".atlante" / "eval"
    assert run.report_path == run.run_dir / REPORT_FILE
    document = json.loads(run.report_path.read_text(encoding="utf-8"))
    assert document["runId"] == run.run_id
    assert "interrupted" not in document["meta"]
    assert document["meta"]["wallTimeMs"] >= 0
    assert not run.run_root.exists()
    assert ended == [run]


@pytest.mark.anyio
async def test_a_cancelled_run_still_publishes_an_interrupted_report(tmp_path: Path) -> None:
    """Cancellation publishes (shielded) a report marked interrupted, and cleans up."""
    seen: list[bool] = []

    def results(stopped: bool) -> dict[str, ScenarioResult]:
        seen.append(stopped)
        return {}

    with anyio.CancelScope() as scope:
        async with run_lifecycle(
            project_root=tmp_path,
            out=tmp_path / "out",
            meta=META,
            keep=False,
            results=results,
        ) as run:
            scope.cancel()
            await anyio.sleep_forever()
    assert seen == [True]
    assert run.report_path is not None
    document = json.loads(run.report_path.read_text(encoding="utf-8"))
    assert document["meta"]["interrupted"] is True
    assert not run.run_root.exists()


@pytest.mark.anyio
async def test_without_partial_a_failed_run_leaves_no_directory(tmp_path: Path) -> None:
    """partial=False discards the reserved directory when the body raises."""
    with pytest.raises(RuntimeError, match="boom"):
        async with run_lifecycle(
            project_root=tmp_path,
            out=tmp_path / "out",
            meta=META,
            keep=False,
            results=_none,
            partial=False,
        ) as run:
            raise RuntimeError("boom")
    assert not run.run_dir.exists()
    assert not run.run_root.exists()
    assert run.report is None


@pytest.mark.anyio
async def test_keep_leaves_the_run_root_and_records_it(tmp_path: Path) -> None:
    """With keep the run root survives and the report names it."""
    async with run_lifecycle(
        project_root=tmp_path, out=tmp_path / "out", meta=META, keep=True, results=_none
    ) as run:
        pass
    assert run.report is not None
    assert run.report.meta.run_root == str(run.run_root)
    assert run.run_root.is_dir()
    run.run_root.rmdir()
