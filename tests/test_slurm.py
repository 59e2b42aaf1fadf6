"""The documented Slurm array job runs, unchanged, on a real cluster and merges to the whole run.

The test starts its own single-node Slurm cluster (tests/slurmkit.py), saves the
two scripts of docs/scaling.md into a project exactly as the page prints them,
and submits them with the page's own submission commands. ``atlante-eval`` on the
jobs' PATH is the real command line with the stand-in host wired in. The array's
tasks each run one shard, the dependent job merges them, and the merged report
must equal a run of the same plan on one machine: the same verdicts, statistics
and totals, timings aside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factory import make_project, scenario
from recipes import recipe
from slurmkit import Cluster, listening, slurm_cluster
from standin import actions

from atlante_eval import load_report
from atlante_eval.history import history_location
from atlante_eval.history.store import open_store

STANDIN_CLI = Path(__file__).with_name("standin_cli.py")
#: The shards of the documented array (``#SBATCH --array=1-4``).
SHARDS = 4
TRIALS = 3
#: Keys whose values are timings or run identity, not results.
_TIMING_KEYS = frozenset(
    {"runId", "durationMs", "startedAt", "endedAt", "wallTimeMs", "meanDurationMs", "spread"}
    # what a trial's final state stores depends on timing (.git's index, sharing)
    | {"finalState"}
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A single-node cluster for this module, torn down after it."""
    with slurm_cluster() as running:
        yield running


def _project(root: Path) -> Path:
    wrote = [{"type": "file-exists", "path": "out.txt"}]
    return make_project(
        root,
        eval_extra={"budget": {"trials": TRIALS}},
        scenarios=[
            scenario("writes", prompt=actions({"write": "out.txt", "content": "x"}), checks=wrote),
            scenario("forgets", prompt=actions({"usage": 3}), checks=wrote),
            scenario(
                "flaky",
                prompt=actions(
                    {"chance": 0.5, "seed": 7, "then": [{"write": "out.txt", "content": "y"}]}
                ),
                checks=wrote,
            ),
        ],
    )


def _command_dir(root: Path) -> Path:
    """A directory holding ``atlante-eval``: the real CLI with the stand-in host."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    entry = bin_dir / "atlante-eval"
    entry.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN_CLI}" "$@"\n', encoding="utf-8")
    entry.chmod(0o755)
    return bin_dir


def _shell(argv: list[str], project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in the project as a user of the cluster would; its output captured."""
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, check=False)


def _comparable(value: object) -> object:
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def _results(path: Path) -> dict[str, Any]:
    """What must match between the merged and the single run: scenarios and totals."""
    report = json.loads(path.read_text(encoding="utf-8"))
    return {
        "scenarios": _comparable(report["scenarios"]),
        "totals": _comparable(report["meta"]["totals"]),
        "planDigest": report["meta"]["planDigest"],
    }


def test_documented_array_job_merges_into_the_single_machine_run(
    cluster: Cluster, tmp_path: Path
) -> None:
    """N shard tasks and the dependent merge job, as documented, give the one-machine report."""
    project = _project(tmp_path / "project")
    env = {
        **cluster.env,
        "PATH": f"{_command_dir(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for name in ("eval-shards.sbatch", "eval-merge.sbatch"):
        (project / name).write_text(recipe("scaling.md", name).text, encoding="utf-8")
    submit = recipe("scaling.md", "slurm-submit").text
    submitted = _shell(["bash", "-euo", "pipefail", "-c", submit], project, env)
    assert submitted.returncode == 0, submitted.stderr
    cluster.wait_idle()

    jobs = [job for job in cluster.jobs() if job.get("WorkDir") == str(project)]
    tasks = sorted(
        (job for job in jobs if "ArrayTaskId" in job), key=lambda job: int(job["ArrayTaskId"])
    )
    [merge] = [job for job in jobs if "ArrayTaskId" not in job]
    logs = {p.name: p.read_text(errors="replace") for p in project.glob("slurm-*.out")}
    assert [(t["ArrayTaskId"], t["JobState"], t["ExitCode"]) for t in tasks] == [
        (str(i), "COMPLETED", "0:0") for i in range(1, SHARDS + 1)
    ], logs
    assert merge["Dependency"] == "(null)"  # satisfied: it waited for the array
    assert (merge["JobState"], merge["ExitCode"]) == ("COMPLETED", "0:0"), logs
    shards = sorted(project.glob("reports/shard-*/*/report.json"))
    assert [load_report(p).meta.shard for p in shards] == [f"{i}/{SHARDS}" for i in (1, 2, 3, 4)]
    [merged] = project.glob("reports/merged/*/report.json")
    # The merged report goes into the history store, whole, standing for its shards.
    ingested = _shell(["atlante-eval", "history", "ingest", str(merged.parent)], project, env)
    assert ingested.returncode == 0, ingested.stderr
    location = history_location(None, configured=None, project_root=project)
    assert location is not None
    with open_store(location) as store:
        recorded = {run.run_id: run for run in store.runs()}
    whole = recorded[load_report(merged).run_id]
    assert (whole.shard, whole.trials) == (None, 3 * TRIALS)  # three scenarios

    single = _shell(["atlante-eval", "run", "--out", "reports/single"], project, env)
    assert single.returncode == 1, single.stderr  # "forgets" fails every trial
    [alone] = project.glob("reports/single/*/report.json")
    assert _results(merged) == _results(alone)
    verdicts = {
        name: [t["verdict"] for t in result["trials"]]
        for name, result in _results(merged)["scenarios"].items()
    }
    assert verdicts["writes"] == ["pass"] * TRIALS
    assert verdicts["forgets"] == ["fail"] * TRIALS
    assert set(verdicts["flaky"]) == {"pass", "fail"}


def test_a_broken_copy_of_the_array_script_fails_its_tasks_and_the_merge(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Drop the shard count from the script: every task and the merge job fail, visibly."""
    project = _project(tmp_path / "project")
    env = {
        **cluster.env,
        "PATH": f"{_command_dir(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    shards = recipe("scaling.md", "eval-shards.sbatch").text
    broken = shards.replace("/${SLURM_ARRAY_TASK_COUNT}", "", 1)
    assert broken != shards
    (project / "eval-shards.sbatch").write_text(broken, encoding="utf-8")
    merge_script = recipe("scaling.md", "eval-merge.sbatch").text
    (project / "eval-merge.sbatch").write_text(merge_script, encoding="utf-8")
    submit = recipe("scaling.md", "slurm-submit").text
    subprocess.run(["bash", "-euo", "pipefail", "-c", submit], cwd=project, env=env, check=True)
    cluster.wait_idle()
    jobs = {job["JobId"]: job for job in cluster.jobs()}
    mine = [job for job in jobs.values() if job.get("WorkDir") == str(project)]
    states = sorted(
        (job.get("ArrayTaskId", "merge"), job["JobState"], job["ExitCode"]) for job in mine
    )
    # --shard 1 (no /N) is invalid-option: exit 2 from every task, and nothing to merge.
    assert states == [
        *((str(i), "FAILED", "2:0") for i in range(1, SHARDS + 1)),
        ("merge", "FAILED", "2:0"),
    ]
    assert not list(project.glob("reports/merged/*/report.json"))


def test_the_cluster_listens_on_loopback_only(cluster: Cluster) -> None:
    """slurmctld and slurmd accept connections on 127.0.0.1 and nowhere else."""
    loopback = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
    for port in cluster.ports:
        addresses = listening(port)
        assert addresses, f"nothing listens on port {port}"
        assert all(a.split(":")[0] == loopback for a in addresses), addresses
