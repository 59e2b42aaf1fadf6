"""merge: shard reports of one plan become the single run's report; mismatches are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from reports import config, meta, write
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, TrialResult, load_report, merge_reports, run_eval
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.report import HostSource, OriginInfo, finalize, summarize
from atlante_eval.report.merge import ShardReport, parse_shard_label

TRIALS = 4
SHARDS = 3
DIGEST = "d" * 64
VERDICTS = {
    "alpha": ["pass", "fail", "pass", "infra-error"],
    "beta": ["timeout", "pass", "pass", "pass"],
    "gamma": ["fail", "skipped-budget", "budget-exceeded", "pass"],
}
SHARD_TIMES = [
    ("2026-03-01T02:00:05.000Z", "2026-03-01T02:10:00.000Z", 595_000, 4),
    ("2026-03-01T02:00:01.000Z", "2026-03-01T02:09:00.000Z", 539_000, 2),
    ("2026-03-01T02:00:03.000Z", "2026-03-01T02:12:30.000Z", 747_000, 4),
]


def _trial(name: str, i: int) -> TrialResult:
    verdict = VERDICTS[name][i]
    ran = verdict != "skipped-budget"
    return TrialResult.model_validate(
        {
            "i": i,
            "verdict": verdict,
            "duration_ms": 1000 * (i + 1) + len(name) if ran else 0,
            "tokens": 100 * (i + 1) if ran else None,
            "cost": 0.01 * (i + 1) if ran else None,
            "model": "anthropic/claude-sonnet-4-5" if name == "beta" and i == 2 else None,
        }
    )


def _scenario(name: str, trials: list[TrialResult]) -> Any:
    return summarize(
        trials,
        source=f"eval/scenarios/{name}.eval.json",
        origin=OriginInfo(kind="project"),
        fingerprint=name[0] * 64,
        description=f"The {name} task",
    )


def _single() -> RunReport:
    """The report one machine would write for the whole plan."""
    scenarios = {
        name: _scenario(name, [_trial(name, i) for i in range(TRIALS)]) for name in VERDICTS
    }
    return finalize(
        RunReport(
            run_id="2026-03-01T02-00-01-0000",
            meta=meta(
                config=config(trials=TRIALS),
                plan_digest=DIGEST,
                started_at="2026-03-01T02:00:01.000Z",
                ended_at="2026-03-01T02:12:30.000Z",
                wall_time_ms=747_000,
                jobs=10,
            ),
            scenarios=scenarios,
        )
    )


def _shard(index: int, *, count: int = SHARDS, **meta_overrides: Any) -> RunReport:
    """Shard ``index`` of the plan: trials at plan positions p with p % count == index - 1."""
    scenarios = {}
    for number, name in enumerate(sorted(VERDICTS)):
        mine = [
            _trial(name, i) for i in range(TRIALS) if (number * TRIALS + i) % count == index - 1
        ]
        if mine:
            scenarios[name] = _scenario(name, mine)
    started, ended, wall, jobs = SHARD_TIMES[(index - 1) % len(SHARD_TIMES)]
    values: dict[str, Any] = {
        "config": config(trials=TRIALS),
        "plan_digest": DIGEST,
        "shard": f"{index}/{count}",
        "started_at": started,
        "ended_at": ended,
        "wall_time_ms": wall,
        "jobs": jobs,
        **meta_overrides,
    }
    return finalize(
        RunReport(
            run_id=f"2026-03-01T02-00-0{index}-000{index}", meta=meta(**values), scenarios=scenarios
        )
    )


def _shards(*indexes: int, **overrides: Any) -> list[ShardReport]:
    return [ShardReport(f"shard{i}.json", _shard(i, **overrides)) for i in indexes]


def _refusal(shards: list[ShardReport]) -> str:
    with pytest.raises(DiagnosticError) as caught:
        merge_reports(shards)
    assert caught.value.exit_code == 2
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "merge-mismatch"
    assert diagnostic.next
    return diagnostic.message


def _invoke(*args: str | Path) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def test_three_shards_merge_into_the_single_report() -> None:
    """Merged shards equal the single-machine report: trials, statistics, totals and meta."""
    single = _single()
    shards = _shards(3, 1, 2)  # any order
    assert all(len(s.report.all_trials()) < len(single.all_trials()) for s in shards)
    merged = merge_reports(shards, run_id=single.run_id)
    assert merged == single
    assert merged.meta.shard is None
    assert merged.meta.model == "anthropic/claude-sonnet-4-5"  # from the trial that reported it
    assert merged.meta.totals is not None
    assert merged.meta.totals.trials == 12


def test_merged_report_gets_a_fresh_run_id() -> None:
    """Without a run id the merged report gets a new one in the usual format."""
    merged = merge_reports(_shards(1, 2, 3))
    assert len(merged.run_id) == len("2026-03-01T02-00-01-0000")
    assert merged.run_id not in {s.report.run_id for s in _shards(1, 2, 3)}


def test_any_interrupted_shard_marks_the_merge_interrupted() -> None:
    """One interrupted shard makes the merged run interrupted; differing extras are dropped."""
    shards = [*_shards(1, 2), ShardReport("s3", _shard(3, interrupted=True, run_root="/tmp/r"))]
    merged = merge_reports(shards)
    assert merged.meta.interrupted is True
    assert merged.meta.run_root is None


def test_the_gateway_figures_of_every_shard_are_summed() -> None:
    """meta.gateway sums over shards that all had it; one shard without it drops it."""
    from atlante_eval.report import GatewaySummary

    def gateway(n: int) -> GatewaySummary:
        return GatewaySummary(calls=10 * n, refused=n, fallback_trials=1)

    shards = [ShardReport(f"s{i}", _shard(i, gateway=gateway(i))) for i in (1, 2, 3)]
    assert merge_reports(shards).meta.gateway == GatewaySummary(
        calls=60, refused=6, fallback_trials=3
    )
    mixed = [*shards[:2], ShardReport("s3", _shard(3))]
    assert merge_reports(mixed).meta.gateway is None


def test_parse_shard_label() -> None:
    """I/N with 1 <= I <= N parses; anything else is None."""
    assert parse_shard_label("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "1/0", "a/b", "1/2/3", "", " 1/2"):
        assert parse_shard_label(bad) is None


def test_refuses_reports_without_shard_information() -> None:
    """A whole-run report is not a shard: strict, no --force."""
    message = _refusal([ShardReport("whole.json", _single())])
    assert message == "whole.json is not a shard report (meta.shard is missing)"


def test_refuses_different_plan_digests() -> None:
    """Shards of different plans are refused."""
    shards = [*_shards(1, 2), ShardReport("other.json", _shard(3, plan_digest="e" * 64))]
    message = _refusal(shards)
    assert (
        message == "other.json belongs to another run: its plan digest differs from shard1.json's"
    )


def _managed(integrity: str, executable: str) -> HostSource:
    return HostSource(
        kind="managed", executable=executable, package="opencode-ai@1.2.3", integrity=integrity
    )


def test_shards_of_one_pinned_copy_merge_and_others_are_refused() -> None:
    """Pinned shards on different machines merge (their common source); a PATH shard does not."""
    sources = {i: _managed("sha512-a", f"/home/m{i}/claude") for i in (1, 2, 3)}
    shards = [ShardReport(f"s{i}", _shard(i, host_source=sources[i])) for i in (1, 2, 3)]
    merged = merge_reports(shards)
    assert merged.meta.host_source == _managed("sha512-a", "").model_copy(
        update={"executable": None}
    )
    same = merge_reports(
        [ShardReport(f"s{i}", _shard(i, host_source=sources[1])) for i in (1, 2, 3)]
    )
    assert same.meta.host_source == sources[1]
    path = HostSource(kind="path", executable="/usr/bin/opencode")
    for odd in (path, _managed("sha512-b", "/x")):
        message = _refusal([*shards[:2], ShardReport("odd.json", _shard(3, host_source=odd))])
        assert message == "odd.json belongs to another run: its host source differs from s1's"


def test_refuses_a_duplicate_shard() -> None:
    """The same shard index twice is refused."""
    shards = [*_shards(1, 2, 3), ShardReport("again.json", _shard(2))]
    assert _refusal(shards) == "shard 2/3 was given twice: shard2.json and again.json"


def test_refuses_missing_shards() -> None:
    """Fewer than N shards are refused, naming the missing ones."""
    assert _refusal(_shards(2)) == "missing shard reports: 1/3, 3/3"


def test_refuses_different_shard_counts() -> None:
    """Shards of an N=3 and an N=2 split are refused."""
    shards = [*_shards(1, 2), ShardReport("two.json", _shard(2, count=2))]
    assert _refusal(shards).startswith("the reports split the plan into different numbers")


def test_refuses_overlapping_trials() -> None:
    """A trial present in two shards is refused."""
    shards = _shards(1, 2, 3)
    first = shards[0].report
    stolen = shards[1].report.scenarios["alpha"].trials[0]
    alpha = _scenario("alpha", [*first.scenarios["alpha"].trials, stolen])
    tampered = first.model_copy(update={"scenarios": {**first.scenarios, "alpha": alpha}})
    message = _refusal([ShardReport("shard1.json", tampered), *shards[1:]])
    assert message == f"trial {stolen.i} of scenario 'alpha' is in both shard1.json and shard2.json"


def test_refuses_missing_trials() -> None:
    """A shard that lost a trial leaves a hole that is refused."""
    shards = _shards(1, 2, 3)
    first = shards[0].report
    beta = first.scenarios["beta"]
    trimmed = first.model_copy(
        update={"scenarios": {**first.scenarios, "beta": _scenario("beta", beta.trials[1:])}}
    )
    message = _refusal([ShardReport("shard1.json", trimmed), *shards[1:]])
    assert message == f"scenario 'beta' misses trial {beta.trials[0].i} after merging"


def test_refuses_shards_with_a_different_scenario_fingerprint() -> None:
    """A scenario whose fingerprint differs between shards is refused."""
    shards = _shards(1, 2, 3)
    third = shards[2].report
    gamma = third.scenarios["gamma"].model_copy(update={"fingerprint": "z" * 64})
    tampered = third.model_copy(update={"scenarios": {**third.scenarios, "gamma": gamma}})
    message = _refusal([*shards[:2], ShardReport("shard3.json", tampered)])
    assert message.startswith("scenario 'gamma' has a different fingerprint in shard3.json")


def test_merge_command_outputs(tmp_path: Path) -> None:
    """merge prints JSON by default, publishes a run directory with --out, a file with -o."""
    paths = [write(tmp_path / f"s{i}", _shard(i)) for i in (1, 2, 3)]
    printed = _invoke("merge", *paths)
    assert printed.exit_code == 0
    assert json.loads(printed.stdout)["meta"]["totals"]["trials"] == 12
    published = _invoke("merge", *paths, "--out", tmp_path / "merged")
    assert published.exit_code == 0
    [run_dir] = (tmp_path / "merged").iterdir()
    assert load_report(run_dir).run_id == run_dir.name
    assert published.stdout.startswith("merged 3 shard reports\n")
    target = tmp_path / "merged.json"
    assert _invoke("merge", *paths, "-o", target).exit_code == 0
    expected = load_report(run_dir).model_copy(update={"run_id": load_report(target).run_id})
    assert load_report(target) == expected
    again = _invoke("merge", *paths, "-o", target)
    assert again.exit_code == 3
    assert "refusing to overwrite" in again.stderr


def test_merge_command_refusals_exit_2(tmp_path: Path) -> None:
    """Missing shards and conflicting options exit 2 with a diagnostic."""
    paths = [write(tmp_path / f"s{i}", _shard(i)) for i in (1, 2)]
    missing = _invoke("merge", *paths)
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error [merge-mismatch]: missing shard report: 3/3")
    both = _invoke("merge", *paths, "--out", tmp_path, "-o", tmp_path / "x.json")
    assert both.exit_code == 2
    assert "error [invalid-option]" in both.stderr
    unreadable = _invoke("merge", tmp_path / "nope")
    assert unreadable.exit_code == 2
    assert unreadable.stderr.startswith("error [report-unreadable]")


_TIMING_KEYS = frozenset(
    {
        "runId",
        "durationMs",
        "startedAt",
        "endedAt",
        "wallTimeMs",
        "meanDurationMs",
        "spread",
        "jobs",
        # what a final state stores depends on timing (.git's index, sharing across trials)
        "finalState",
    }
)


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in _TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_real_shard_runs_merge_into_the_real_whole_run(tmp_path: Path) -> None:
    """Three real --shard runs merged equal one real unsharded run, timings aside."""
    check = [{"type": "file-exists", "path": "out.txt"}]
    root = make_project(
        tmp_path / "p",
        scenarios=[
            scenario(
                "writes",
                prompt=actions({"write": "out.txt", "content": "x"}, {"usage": 7, "cost": 0.5}),
                checks=check,
            ),
            scenario("idle", prompt=actions({"usage": 3}), checks=check),
        ],
    )

    def run(shard: str | None, out: Path) -> RunReport:
        return anyio.run(lambda: run_eval(root, host=StandinHost(), trials=3, out=out, shard=shard))

    whole = run(None, tmp_path / "whole")
    shards = [ShardReport(f"shard{i}", run(f"{i}/3", tmp_path / f"shard{i}")) for i in (1, 2, 3)]
    assert {s.report.meta.plan_digest for s in shards} == {whole.meta.plan_digest}
    merged = merge_reports(shards)
    expected = _without_timings(whole.model_dump(mode="json", by_alias=True, exclude_none=True))
    actual = _without_timings(merged.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert actual == expected
