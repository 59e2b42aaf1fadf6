"""--shard I/N --balance duration: an LPT split by an earlier report's durations, merged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from factory import make_project, scenario
from hypothesis import given
from hypothesis import strategies as st
from reports import report, trials, write
from standin import StandinHost, actions
from typer.testing import CliRunner, Result

from atlante_eval import RunReport, hosts, merge_reports, run_eval
from atlante_eval.cli import app
from atlante_eval.diagnostics import DiagnosticError
from atlante_eval.history import parse_history_url
from atlante_eval.history.store import open_store
from atlante_eval.project.shards import balance_by_duration, expected_makespan, round_robin
from atlante_eval.report.merge import ShardReport
from atlante_eval.run.balance import scenario_durations

SHARDS = 3
TRIALS = 2
#: Mean session durations (ms) of the earlier report: two scenarios take ten times longer.
DURATIONS = {"a-long": 10_000, "b": 1_000, "c-long": 10_000, "d": 1_000, "e": 1_000, "f": 1_000}


@given(
    st.lists(st.integers(min_value=1, max_value=10_000), min_size=0, max_size=60),
    st.integers(min_value=1, max_value=8),
)
def test_lpt_split_covers_the_plan_once_within_grahams_bound(
    estimates: list[int], count: int
) -> None:
    """Every position lands in exactly one shard, in plan order, within list scheduling's bound."""
    split = balance_by_duration(estimates, count)
    assert len(split) == count
    assert sorted(p for shard in split for p in shard) == list(range(len(estimates)))
    assert all(list(shard) == sorted(shard) for shard in split)
    assert balance_by_duration(list(estimates), count) == split
    if estimates:
        longest = max(sum(estimates[p] for p in shard) for shard in split)
        # Graham: any list schedule ends by the mean load plus the longest job's remainder.
        assert longest <= sum(estimates) / count + max(estimates) * (1 - 1 / count) + 1e-9


def _optimum(estimates: list[int], count: int) -> int:
    """The shortest possible makespan, by exhaustive search (small inputs only)."""
    best = sum(estimates)
    loads = [0] * count

    def place(i: int) -> None:
        nonlocal best
        if i == len(estimates):
            best = min(best, max(loads))
            return
        seen: set[int] = set()
        for shard in range(count):
            if loads[shard] in seen or loads[shard] + estimates[i] >= best:
                continue  # an equally loaded shard was tried already, or this cannot win
            seen.add(loads[shard])
            loads[shard] += estimates[i]
            place(i + 1)
            loads[shard] -= estimates[i]

    place(0)
    return best


@given(
    st.lists(st.integers(min_value=1, max_value=100), min_size=1, max_size=8),
    st.integers(min_value=1, max_value=4),
)
def test_lpt_split_is_within_its_guarantee_of_the_optimum(estimates: list[int], count: int) -> None:
    """LPT's makespan is at most (4/3 - 1/(3N)) of the best split's (Graham 1969)."""
    split = balance_by_duration(estimates, count)
    longest = max(sum(estimates[p] for p in shard) for shard in split)
    assert longest <= _optimum(estimates, count) * (4 / 3 - 1 / (3 * count)) + 1e-9


def test_the_optimum_search_on_the_input_that_broke_the_old_bound() -> None:
    """2,3,3,3 on 3 shards: the best split takes 5 (above 4/3 of the naive bound), LPT too."""
    estimates = [2, 3, 3, 3]
    assert _optimum(estimates, 3) == 5
    assert max(expected_makespan(estimates, s, 1) for s in balance_by_duration(estimates, 3)) == 5


def test_lpt_fixes_what_round_robin_leaves_skewed() -> None:
    """A plan whose long trials all fall on the same round-robin shards balances by duration."""
    estimates = [10, 10, 1, 1, 10, 10, 1, 1, 1, 1, 1, 1]
    rr = round_robin(len(estimates), 4)
    assert rr == ((0, 4, 8), (1, 5, 9), (2, 6, 10), (3, 7, 11))
    assert [expected_makespan(estimates, s, 1) for s in rr] == [21, 21, 3, 3]
    split = balance_by_duration(estimates, 4)
    assert [expected_makespan(estimates, s, 1) for s in split] == [12, 12, 12, 12]
    assert split == ((0, 2, 8), (1, 3, 9), (4, 6, 10), (5, 7, 11))


def test_equal_durations_split_round_robin() -> None:
    """With nothing to tell the trials apart, the balanced split is the round-robin one."""
    assert balance_by_duration([5] * 11, 3) == round_robin(11, 3)


def test_expected_makespan_runs_jobs_at_once_in_plan_order() -> None:
    """One job adds the durations up; more jobs start each trial on the first free slot."""
    estimates = [4, 1, 1, 1, 3]
    assert expected_makespan(estimates, range(5), 1) == 10
    assert expected_makespan(estimates, range(5), 2) == 6  # 4 | 1+1+1+3
    assert expected_makespan(estimates, range(5), 8) == 4
    assert expected_makespan(estimates, [], 2) == 0


def test_scenario_durations_ignore_untimed_trials() -> None:
    """Skipped and infra-error trials say nothing about a session's length."""
    earlier = report(
        {
            "a": [
                *trials(["pass"], duration_ms=3000),
                *trials(["infra-error"], start=1, duration_ms=5),
                *trials(["fail"], start=2, duration_ms=1000),
            ],
            "b": trials(["skipped-budget", "skipped-budget"], duration_ms=0),
            "c": trials(["timeout"], duration_ms=0),
        }
    )
    assert scenario_durations(earlier) == {"a": 2000, "c": 1}


def _earlier_report(durations: dict[str, int]) -> RunReport:
    """An earlier run of the suite whose trials took ``durations`` (ms) per scenario."""
    return report(
        {name: trials(["pass"] * TRIALS, duration_ms=ms) for name, ms in sorted(durations.items())},
        run_id="2026-02-01T00-00-00-abcd",
    )


def _project(root: Path, names: list[str]) -> Path:
    check = [{"type": "file-exists", "path": "out.txt"}]
    return make_project(
        root,
        scenarios=[
            scenario(
                name,
                prompt=actions({"write": "out.txt", "content": name}, {"usage": 5})
                if name != "d"
                else actions({"usage": 5}),
                checks=check,
            )
            for name in names
        ],
    )


def _run(root: Path, out: Path, **options: Any) -> RunReport:
    async def go() -> RunReport:
        return await run_eval(root, host=StandinHost(), trials=TRIALS, out=out, **options)

    return anyio.run(go)


def _balanced_shards(root: Path, tmp_path: Path, **options: Any) -> list[RunReport]:
    """Every shard of the run balanced by duration (``--balance duration``), one job each."""
    return [
        _run(
            root,
            tmp_path / f"s{i}",
            shard=f"{i}/{SHARDS}",
            balance="duration",
            jobs=1,
            **options,
        )
        for i in range(1, SHARDS + 1)
    ]


def _positions(shard: RunReport, names: list[str]) -> list[int]:
    order = sorted(names)
    return sorted(
        order.index(name) * TRIALS + trial.i
        for name, result in shard.scenarios.items()
        for trial in result.trials
    )


def _without_timings(value: object) -> object:
    # finalState: what a trial's final state stores depends on timing (.git's index)
    timing = {"runId", "durationMs", "startedAt", "meanDurationMs", "spread", "meta", "finalState"}
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in timing}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_balanced_shards_run_the_lpt_split_and_merge_into_the_whole_run(tmp_path: Path) -> None:
    """Each shard runs its LPT slice, records the split, and the merge equals one whole run."""
    names = sorted(DURATIONS)
    root = _project(tmp_path / "p", names)
    earlier = write(tmp_path / "earlier", _earlier_report(DURATIONS))
    shards = _balanced_shards(root, tmp_path, balance_from=earlier)
    estimates = [DURATIONS[name] for name in names for _ in range(TRIALS)]
    expected = balance_by_duration(estimates, SHARDS)
    assert [tuple(_positions(s, names)) for s in shards] == list(expected)
    # Round robin would have given shard 1 both long scenarios' first trials.
    assert expected != round_robin(len(estimates), SHARDS)
    first = shards[0].meta.shard_balance
    assert first is not None
    assert first.by == "duration"
    assert first.from_run_id == "2026-02-01T00-00-00-abcd"
    assert [load.expected_ms for load in first.shards] == [
        expected_makespan(estimates, s, 1) for s in expected
    ]
    # Four long trials on three shards: one shard gets two of them, whatever the split.
    assert first.expected_makespan_ms == 20_000
    assert first.round_robin_makespan_ms == 22_000
    for n, shard in enumerate(shards):
        record = shard.meta.shard_balance
        assert record is not None
        assert [load.actual_ms is not None for load in record.shards] == [
            m == n for m in range(SHARDS)
        ]
        assert record.shards[n].actual_ms == shard.meta.wall_time_ms
    merged = merge_reports([ShardReport(f"s{i}", s) for i, s in enumerate(shards, 1)])
    whole = _run(root, tmp_path / "whole")
    assert _without_timings(merged.model_dump(by_alias=True)) == _without_timings(
        whole.model_dump(by_alias=True)
    )
    record = merged.meta.shard_balance
    assert record is not None
    walls = [s.meta.wall_time_ms for s in shards]
    assert [load.actual_ms for load in record.shards] == walls
    assert record.actual_makespan_ms == max(w for w in walls if w is not None)


def test_without_balance_from_the_history_stores_last_whole_run_balances(tmp_path: Path) -> None:
    """No --balance-from: every shard reads the history store's newest whole run (the shards
    record themselves as shards, so a later shard still finds the same run)."""
    names = sorted(DURATIONS)
    root = _project(tmp_path / "p", names)
    url = str(tmp_path / "history.sqlite")
    with open_store(parse_history_url(url)) as store:
        store.ingest(_earlier_report(DURATIONS))
    shards = _balanced_shards(root, tmp_path, history=True, history_url=url)
    estimates = [DURATIONS[name] for name in names for _ in range(TRIALS)]
    assert [tuple(_positions(s, names)) for s in shards] == list(
        balance_by_duration(estimates, SHARDS)
    )
    for shard in shards:
        record = shard.meta.shard_balance
        assert record is not None
        assert record.from_run_id == "2026-02-01T00-00-00-abcd"
    with open_store(parse_history_url(url)) as store:
        assert [r.shard for r in store.runs()].count(None) == 1  # the shards are shards


def test_unknown_scenarios_are_estimated_with_a_warning(tmp_path: Path) -> None:
    """A scenario the earlier report never timed is expected to take the mean of the others."""
    names = ["a-long", "b", "new"]
    root = _project(tmp_path / "p", names)
    earlier = write(tmp_path / "earlier", _earlier_report({"a-long": 9_000, "b": 1_000}))
    result = _cli(
        "run", root, "--trials", str(TRIALS), "--shard", "1/2", "--balance", "duration",
        "--balance-from", earlier, "--jobs", "1", "--out", tmp_path / "out", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "warning [shard-balance-estimated]: 1 of 3 scenarios have no timed trial" in (
        result.stderr
    )
    record = json.loads(result.stdout)["meta"]["shardBalance"]
    assert record["estimated"] == ["new"]
    # Estimates 9000, 9000, 1000, 1000, 5000, 5000 (the mean) on two shards: 15000 each.
    assert [s["expectedMs"] for s in record["shards"]] == [15_000, 15_000]
    assert record["jobs"] == 1
    assert record["roundRobinMakespanMs"] == 15_000  # the same here: 9+1+5 on either shard


@pytest.fixture(autouse=True)
def _standin_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's configured host is the stand-in."""
    monkeypatch.setitem(hosts.HOST_FACTORIES, "opencode", StandinHost)


def _cli(*args: object) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--balance", "duration"], "--balance duration splits the plan between shards"),
        (
            ["--shard", "1/2", "--balance", "duration"],
            "--balance duration without --balance-from reads the durations of the history "
            "store's last whole run",
        ),
        (
            ["--shard", "1/2", "--balance", "duration", "--no-history"],
            "--balance duration needs --balance-from REPORT, or the history store's last run",
        ),
        (["--shard", "1/2", "--balance-from", "r.json"], "--balance-from is only used with"),
        (["--shard", "1/2", "--balance", "lpt"], "Invalid value for '--balance'"),
    ],
)
def test_balance_option_misuse_exits_2(tmp_path: Path, extra: list[str], message: str) -> None:
    """Every incomplete combination is refused before any trial, with the flag named."""
    root = _project(tmp_path / "p", ["b"])
    result = _cli("run", root, *extra, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_unreadable_balance_report_exits_2(tmp_path: Path) -> None:
    """A --balance-from report that cannot be read stops the run before any trial."""
    root = _project(tmp_path / "p", ["b"])
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    result = _cli(
        "run", root, "--shard", "1/2", "--balance", "duration",
        "--balance-from", tmp_path / "broken.json", "--out", tmp_path / "out",
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error [report-unreadable]")
    assert not any((tmp_path / "out").glob("*/report.json"))


def test_merge_refuses_shards_split_differently(tmp_path: Path) -> None:
    """A balanced shard and a round-robin one cannot be merged: their trials would not tile."""
    names = sorted(DURATIONS)
    root = _project(tmp_path / "p", names)
    earlier = write(tmp_path / "earlier", _earlier_report(DURATIONS))
    balanced = _run(root, tmp_path / "s1", shard="1/2", balance="duration", balance_from=earlier)
    plain = _run(root, tmp_path / "s2", shard="2/2")
    with pytest.raises(DiagnosticError) as caught:
        merge_reports([ShardReport("s1.json", balanced), ShardReport("s2.json", plain)])
    [problem] = caught.value.diagnostics
    assert problem.code == "merge-mismatch"
    assert problem.message.startswith("s2.json and s1.json split the plan differently")


def test_round_robin_stays_the_default(tmp_path: Path) -> None:
    """Without --balance a shard runs p mod N == I - 1 and records no split."""
    names = sorted(DURATIONS)
    root = _project(tmp_path / "p", names)
    shard = _run(root, tmp_path / "s", shard="2/3")
    assert _positions(shard, names) == list(round_robin(len(names) * TRIALS, 3)[1])
    assert shard.meta.shard_balance is None
    assert "shardBalance" not in shard.to_json()


def test_run_and_merge_summaries_show_expected_and_actual_makespans(tmp_path: Path) -> None:
    """The terminal summary of a balanced shard, and of the merge, shows the split."""
    names = sorted(DURATIONS)
    root = _project(tmp_path / "p", names)
    earlier = write(tmp_path / "earlier", _earlier_report(DURATIONS))
    outputs = []
    for i in (1, 2):
        result = _cli(
            "run", root, "--trials", str(TRIALS), "--shard", f"{i}/2", "--balance", "duration",
            "--balance-from", earlier, "--jobs", "1", "--out", tmp_path / f"s{i}", "--no-html",
        )  # fmt: skip
        assert result.exit_code == 1, result.stderr  # "d" fails every trial
        outputs.append(result.stdout)
    heading = (
        "shards balanced by duration (run 2026-02-01T00-00-00-abcd): longest expected 24.0s "
        "(round robin 24.0s)"
    )
    assert heading in outputs[0]
    assert "  shard 1/2: 6 trials · expected 24.0s · took " in outputs[0]
    assert "  shard 2/2: 6 trials · expected 24.0s\n" in outputs[0]
    shard_dirs = [*(tmp_path / "s1").iterdir(), *(tmp_path / "s2").iterdir()]
    merged = _cli("merge", *shard_dirs, "--out", tmp_path / "merged")
    assert merged.exit_code == 0, merged.stderr
    assert heading in merged.stdout
    assert merged.stdout.count(" · took ") == 2
