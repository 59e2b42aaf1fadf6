"""The history store on SQLite and on a real PostgreSQL: ingest, migrations, concurrency,
queries, blessed baselines and the quarantine gate. Every test runs on both backends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from historykit import (
    as_json,
    dated_report,
    fresh_database,
    invoke,
    postgres_server,
    store,
    store_url,
)
from reports import config, counts, write

from atlante_eval.history import parse_history_url
from atlante_eval.history.database import open_database
from atlante_eval.history.schema import HEAD_REVISION, metadata
from atlante_eval.history.store import HistoryStore, open_store
from atlante_eval.report import RunReport
from atlante_eval.report.merge import ShardReport, merge_reports

__all__ = ["fresh_database", "postgres_server", "store", "store_url"]  # fixtures

ROOT = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, value: RunReport) -> Path:
    return write(tmp_path / "runs" / value.run_id, value)


# --- ingest ------------------------------------------------------------------------


def test_ingesting_the_same_report_twice_keeps_one_run(store_url: str, tmp_path: Path) -> None:
    """`history ingest` of one run twice records it once; the second time says so."""
    run = _write(tmp_path, dated_report(1, {"a": counts(2, 1), "b": counts(3)}))
    first = invoke("history", "ingest", run, "--history", store_url)
    second = invoke("history", "ingest", run / "report.json", "--history", store_url, "--json")
    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("recorded 2026-03-01T02-00-00-0000 (6 trials)")
    assert second.exit_code == 0
    assert as_json(second) == [
        {"runId": "2026-03-01T02-00-00-0000", "status": "unchanged", "trials": 6, "absorbed": []}
    ]
    listed = as_json(invoke("history", "list", "--history", store_url, "--json"))
    assert [(r["runId"], r["trials"], r["passed"], r["scenarios"]) for r in listed] == [
        ("2026-03-01T02-00-00-0000", 6, 5, 2)
    ]


def test_a_directory_of_runs_is_ingested_and_selftests_are_left_out(
    store_url: str, tmp_path: Path
) -> None:
    """A report base is walked; a selftest report is skipped with a warning."""
    for day in (1, 2):
        _write(tmp_path, dated_report(day, {"a": counts(1)}))
    selftest = _write(tmp_path, dated_report(3, {"a": counts(1)}, host="selftest"))
    result = invoke("history", "ingest", tmp_path / "runs", "--history", store_url)
    assert result.exit_code == 0
    assert "warning [history-ingest-skipped]" in result.stderr
    assert str(selftest) in result.stderr
    listed = as_json(invoke("history", "list", "--history", store_url, "--json"))
    assert [r["runId"][:10] for r in listed] == ["2026-03-02", "2026-03-01"]


def test_a_reference_report_is_ingested_once(store_url: str, tmp_path: Path) -> None:
    """A report the reference tool wrote (no start times, no statistics) records by run id."""
    document = {
        "runId": "2026-02-01T10-00-00-abcd",
        "meta": {
            "atlante": "0.9.0",
            "host": "opencode",
            "model": "anthropic/claude-sonnet-4",
            "modelVersion": "claude-sonnet-4",
            "config": {
                "trials": 2,
                "timeoutMs": 600000,
                "maxSessions": 15,
                "maxTokens": 400000,
                "setupTimeoutMs": 300000,
                "checkTimeoutDefaultMs": 120000,
            },
        },
        "scenarios": {
            "fixes-bug": {
                "trials": [
                    {"i": 0, "verdict": "pass", "durationMs": 1000},
                    {"i": 1, "verdict": "fail", "durationMs": 1200, "checks": []},
                ],
                "passRate": 0.5,
                "meanDurationMs": 1100,
                "spread": {"durationP95Ms": 1200},
            }
        },
    }
    file = tmp_path / "reference" / "report.json"
    file.parent.mkdir()
    file.write_text(json.dumps(document), encoding="utf-8")
    for _ in range(2):
        assert invoke("history", "ingest", file, "--history", store_url).exit_code == 0
    shown = as_json(invoke("history", "show", "fixes-bug", "--history", store_url, "--json"))
    assert [(n["runId"], n["passed"], n["graded"]) for n in shown["nights"]] == [
        ("2026-02-01T10-00-00-abcd", 1, 2)
    ]


def _shards(day: int) -> tuple[RunReport, RunReport]:
    whole = dated_report(day, {"a": counts(3, 1), "b": counts(2, 2)}, config=config(trials=4))
    shards = []
    for index in (1, 2):
        scenarios = {
            name: result.model_copy(
                update={"trials": [t for t in result.trials if t.i % 2 == index - 1]}
            )
            for name, result in whole.scenarios.items()
        }
        meta = whole.meta.model_copy(update={"shard": f"{index}/2", "plan_digest": "p" * 64})
        shards.append(
            whole.model_copy(
                update={"run_id": f"{whole.run_id}-s{index}", "meta": meta, "scenarios": scenarios}
            )
        )
    return shards[0], shards[1]


def test_merged_shards_are_one_run_in_any_order(store: HistoryStore) -> None:
    """Shards recorded one by one are superseded by their merge; recording either again
    (or another merge of the same shards) changes nothing."""
    one, two = _shards(4)
    assert store.ingest(one).status == "recorded"
    assert store.ingest(two).status == "recorded"
    assert {r.shard for r in store.runs()} == {"1/2", "2/2"}
    merged = merge_reports([ShardReport("1", one), ShardReport("2", two)])
    result = store.ingest(merged)
    assert (result.status, result.absorbed) == ("replaced", [one.run_id, two.run_id])
    [run] = store.runs()
    assert (run.run_id, run.trials, run.shard, run.absorbed) == (
        merged.run_id,
        8,
        None,
        [one.run_id, two.run_id],
    )
    again = merge_reports([ShardReport("1", one), ShardReport("2", two)])
    assert again.run_id != merged.run_id  # merge makes a fresh run id each time
    assert store.ingest(again).status == "unchanged"
    assert store.ingest(one).status == "unchanged"
    assert [r.run_id for r in store.runs()] == [merged.run_id]


def test_a_resumed_run_supersedes_the_interrupted_one(store: HistoryStore) -> None:
    """The run that resumed an interrupted one (reusing its trials) replaces it."""
    partial = dated_report(5, {"a": counts(2)}, interrupted=True)
    resumed = dated_report(5, {"a": counts(4)}, serial=1, resumed_from="/runs/x")
    later = "2026-03-05T03:00:00.000Z"
    trials = [
        *partial.scenarios["a"].trials,  # reused as they were
        *(t.model_copy(update={"started_at": later}) for t in resumed.scenarios["a"].trials[2:]),
    ]
    resumed = resumed.model_copy(
        update={"scenarios": {"a": resumed.scenarios["a"].model_copy(update={"trials": trials})}}
    )
    store.ingest(partial)
    result = store.ingest(resumed)
    assert (result.status, result.absorbed) == ("replaced", [partial.run_id])
    [run] = store.runs()
    assert (run.run_id, run.resumed_from, run.interrupted) == (resumed.run_id, "/runs/x", False)


def test_the_stored_report_rebuilds_without_diffs(store: HistoryStore) -> None:
    """A run's report comes back from the store as it was recorded, diffs aside."""
    original = dated_report(6, {"a": counts(1, 1)})
    with_diff = original.model_copy(
        update={
            "scenarios": {
                "a": original.scenarios["a"].model_copy(
                    update={
                        "trials": [
                            t.model_copy(update={"diff": "--- a\n+++ b\n"})
                            for t in original.scenarios["a"].trials
                        ]
                    }
                )
            }
        }
    )
    store.ingest(with_diff)
    assert store.report(original.run_id) == original


# --- migrations ----------------------------------------------------------------------


def test_a_store_of_the_first_schema_version_is_migrated(store_url: str) -> None:
    """Rows written under schema 0001 survive the migration to the newest revision."""
    location = parse_history_url(store_url)
    database = open_database(location, revision="0001")
    old = dated_report(7, {"a": counts(1, 1)})
    meta = old.meta.model_dump(mode="json", by_alias=True, exclude_none=True)
    scenario = old.scenarios["a"].model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"trials"}
    )
    try:
        with database.write() as connection:
            inspector = sa.inspect(connection)
            assert "arm" not in {c["name"] for c in inspector.get_columns("runs")}
            runs = _v1_table("runs", _V1_RUN)
            connection.execute(
                sa.insert(runs).values(
                    run_id=old.run_id,
                    started_at=old.meta.started_at,
                    ingested_at="2026-03-07T05:00:00.000Z",
                    host="opencode",
                    model=old.meta.model,
                    interrupted=False,
                    adaptive=False,
                    trial_count=2,
                    passed=1,
                    meta=meta,
                )
            )
            run_pk = connection.execute(sa.text("SELECT id FROM runs")).scalar_one()
            scenarios = _v1_table("scenarios", _V1_SCENARIO)
            connection.execute(
                sa.insert(scenarios).values(
                    run_pk=run_pk,
                    name="a",
                    executed=2,
                    graded=2,
                    passed=1,
                    infra_errors=0,
                    skipped=0,
                    pass_rate=0.5,
                    document=scenario,
                )
            )
            scenario_pk = connection.execute(sa.text("SELECT id FROM scenarios")).scalar_one()
            trials = _v1_table("trials", _V1_TRIAL)
            for trial in old.scenarios["a"].trials:
                connection.execute(
                    sa.insert(trials).values(
                        run_pk=run_pk,
                        scenario_pk=scenario_pk,
                        i=trial.i,
                        verdict=trial.verdict,
                        duration_ms=trial.duration_ms,
                        document=trial.model_dump(mode="json", by_alias=True, exclude_none=True),
                    )
                )
    finally:
        database.close()
    with open_store(location) as migrated:
        [run] = migrated.runs()
        assert (run.run_id, run.arm) == (old.run_id, None)
        assert migrated.report(old.run_id) == old
        assert migrated.ingest(dated_report(8, {"a": counts(2)})).status == "recorded"
    engine = sa.create_engine(location.url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        assert (
            connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
            == HEAD_REVISION
        )
        columns = {c["name"] for c in sa.inspect(connection).get_columns("baselines")}
    engine.dispose()
    assert "arm" in columns


def _v1_table(name: str, columns: tuple[str, ...]) -> sa.TableClause:
    """A table of schema 0001 as a raw writer sees it (no model of this engine's version)."""
    return sa.table(
        name, *(sa.column(c, sa.JSON if c in ("meta", "document") else None) for c in columns)
    )


_V1_RUN = (
    "run_id",
    "started_at",
    "ingested_at",
    "host",
    "model",
    "interrupted",
    "adaptive",
    "trial_count",
    "passed",
    "meta",
)
_V1_SCENARIO = (
    "run_pk",
    "name",
    "executed",
    "graded",
    "passed",
    "infra_errors",
    "skipped",
    "pass_rate",
    "document",
)
_V1_TRIAL = ("run_pk", "scenario_pk", "i", "verdict", "duration_ms", "document")


def test_the_migrations_build_exactly_the_declared_tables(store_url: str) -> None:
    """Migrating an empty database yields the tables and columns of schema.py."""
    location = parse_history_url(store_url)
    open_database(location).close()
    engine = sa.create_engine(location.url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        inspector = sa.inspect(connection)
        built = {
            table: {c["name"] for c in inspector.get_columns(table)}
            for table in inspector.get_table_names()
            if table != "alembic_version"
        }
    engine.dispose()
    assert built == {t.name: {c.name for c in t.columns} for t in metadata.sorted_tables}


# --- concurrency ---------------------------------------------------------------------

_WORKER = """
import sys
from pathlib import Path
from atlante_eval.history import parse_history_url
from atlante_eval.history.store import open_store

url, *paths = sys.argv[1:]
with open_store(parse_history_url(url)) as store:
    for path in paths:
        results, notes = store.ingest_path(Path(path))
        assert not notes, notes
        print(results[0].status, flush=True)
"""


def test_four_processes_ingest_at_once(store_url: str, tmp_path: Path) -> None:
    """Four processes migrate a new store and record runs at the same time, one run shared
    by all: every run is recorded once, nothing is lost or duplicated."""
    shared = _write(tmp_path, dated_report(20, {"a": counts(2, 1), "b": counts(1)}))
    batches = []
    for worker in range(4):
        own = [
            _write(tmp_path, dated_report(1 + worker * 4 + k, {"a": counts(1, k), "b": counts(2)}))
            for k in range(4)
        ]
        batches.append([shared, *own])
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_WORKER), encoding="utf-8")
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), store_url, *map(str, batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for batch in batches
    ]
    outputs = [w.communicate(timeout=240) for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0, 0], [err for _, err in outputs]
    statuses = [line for out, _ in outputs for line in out.split()]
    assert sorted(statuses).count("recorded") == 17
    assert statuses.count("unchanged") == 3
    with open_store(parse_history_url(store_url)) as opened:
        runs = opened.runs()
    assert len(runs) == 17
    assert len({r.run_id for r in runs}) == 17
    assert sum(r.trials for r in runs) == 4 + sum(3 + k for k in range(4)) * 4


# --- queries -------------------------------------------------------------------------


def _nights(store: HistoryStore) -> None:
    for day in range(1, 6):
        flip = counts(3) if day % 2 else counts(0, 3)
        store.ingest(dated_report(day, {"steady": counts(3), "flip": flip, "mixed": counts(2, 1)}))
    store.ingest(
        dated_report(6, {"steady": counts(3), "flip": counts(0, 3), "mixed": counts(2, 1)})
    )


def test_show_gives_rates_intervals_flips_and_the_first_failing_run(
    store: HistoryStore, store_url: str
) -> None:
    """`history show` lists a scenario's runs with intervals, counts its flips and names
    the first run of the current failing streak."""
    _nights(store)
    store.ingest(dated_report(7, {"flip": counts(0, 3)}))
    shown = as_json(
        invoke("history", "show", "flip", "--last", "4", "--history", store_url, "--json")
    )
    assert [n["outcome"] for n in shown["nights"]] == ["fail", "pass", "fail", "fail"]
    assert shown["nights"][0]["interval"] == [0.0, pytest.approx(0.5615, abs=1e-4)]
    assert (shown["flips"], shown["flipRate"]) == (2, pytest.approx(2 / 3))
    assert shown["firstFailing"] == "2026-03-06T02-00-00-0000"
    assert shown["lastPassing"] == "2026-03-05T02-00-00-0000"
    assert shown["window"]["passed"] == 3
    assert shown["window"]["graded"] == 12
    missing = invoke("history", "show", "nope", "--history", store_url)
    assert missing.exit_code == 2
    assert "error [history-not-found]" in missing.stderr


def test_flaky_ranks_scenarios_whose_outcome_flips(store: HistoryStore, store_url: str) -> None:
    """`history flaky` ranks flipping scenarios first; a steady one is not listed."""
    _nights(store)
    found = as_json(invoke("history", "flaky", "--history", store_url, "--json"))
    assert [f["scenario"] for f in found] == ["flip", "mixed"]
    assert found[0]["outcomes"] == ["pass", "fail", "pass", "fail", "pass", "fail"]
    assert found[0]["flips"] == 5
    assert (found[1]["flips"], found[1]["flakyRuns"]) == (0, 6)


def test_list_filters_by_host_model_and_date(store: HistoryStore, store_url: str) -> None:
    """`history list` filters by host, model and date range."""
    store.ingest(dated_report(1, {"a": counts(1)}))
    store.ingest(dated_report(2, {"a": counts(1)}, model="other/model"))
    store.ingest(dated_report(3, {"a": counts(1)}, host="claude-code"))

    def ids(*args: str) -> list[str]:
        result = invoke("history", "list", "--history", store_url, "--json", *args)
        assert result.exit_code == 0, result.stderr
        return [r["runId"][8:10] for r in as_json(result)]

    assert ids() == ["03", "02", "01"]
    assert ids("--host", "opencode") == ["02", "01"]
    assert ids("--model", "other/model") == ["02"]
    assert ids("--since", "2026-03-02", "--until", "2026-03-02") == ["02"]
    bad = invoke("history", "list", "--history", store_url, "--since", "yesterday")
    assert bad.exit_code == 2
    assert "--since must be a date YYYY-MM-DD" in bad.stderr


# --- baselines -----------------------------------------------------------------------


def test_bless_then_compare_with_blessed(store_url: str, tmp_path: Path) -> None:
    """A blessed run is BASE for `compare blessed[:NAME] HEAD`; the blessing is recorded."""
    base = _write(tmp_path, dated_report(1, {"task": counts(10)}))
    other = _write(tmp_path, dated_report(2, {"task": counts(5, 5)}))
    head = _write(tmp_path, dated_report(3, {"task": counts(0, 10)}))
    blessed = invoke(
        "history",
        "bless",
        base,
        "--reason",
        "the accepted harness",
        "--by",
        "ci-bot",
        "--history",
        store_url,
    )
    assert blessed.exit_code == 0, blessed.stderr
    assert "blessed 2026-03-01T02-00-00-0000 as baseline default" in blessed.stdout
    compared = invoke(
        "compare", "blessed", head, "--history", store_url, "--json", "--fail-on", "regressed"
    )
    document = as_json(compared)
    assert document["base"]["runId"] == "2026-03-01T02-00-00-0000"
    assert document["base"]["path"].startswith("blessed:default (run 2026-03-01T02-00-00-0000")
    assert document["scenarios"]["task"]["verdict"] == "regressed"
    assert compared.exit_code == 1
    why = document["behaviour"]  # a baseline rebuilt from the store has no transcripts
    assert why["baseDir"] is None
    assert why["scenarios"]["task"]["usage"] is None
    assert why["scenarios"]["task"]["notes"][0].startswith(
        "transcripts absent from BASE and HEAD (a reference report, a blessed baseline"
    )
    missing = invoke("compare", "blessed:nightly", head, "--history", store_url)
    assert missing.exit_code == 2
    assert "error [history-no-baseline]: no baseline 'nightly'" in missing.stderr
    invoke("history", "ingest", other, "--history", store_url)
    assert (
        invoke(
            "history",
            "bless",
            "2026-03-02T02-00-00-0000",
            "--name",
            "nightly",
            "--reason",
            "why",
            "--history",
            store_url,
        ).exit_code
        == 0
    )
    nightly = as_json(invoke("compare", "blessed:nightly", head, "--history", store_url, "--json"))
    assert nightly["base"]["runId"] == "2026-03-02T02-00-00-0000"
    listed = as_json(invoke("history", "baselines", "--history", store_url, "--json"))
    assert {(b["name"], b["runId"], b["blessedBy"], b["reason"]) for b in listed} == {
        ("default", "2026-03-01T02-00-00-0000", "ci-bot", "the accepted harness"),
        ("nightly", "2026-03-02T02-00-00-0000", listed[1]["blessedBy"], "why"),
    }


def test_bless_refuses_an_unknown_run(store_url: str) -> None:
    """Blessing a run id the store lacks is history-not-found (exit 2)."""
    result = invoke(
        "history", "bless", "2020-01-01T00-00-00-0000", "--reason", "x", "--history", store_url
    )
    assert result.exit_code == 2
    assert "error [history-not-found]" in result.stderr


# --- quarantine and the gate ---------------------------------------------------------


def _regression(tmp_path: Path) -> tuple[Path, Path]:
    base = _write(tmp_path, dated_report(1, {"flake": counts(10), "solid": counts(10)}))
    head = _write(tmp_path, dated_report(2, {"flake": counts(0, 10), "solid": counts(10)}))
    return base, head


def test_quarantine_is_ignored_by_the_gate_until_it_expires(
    store: HistoryStore, store_url: str, tmp_path: Path
) -> None:
    """A quarantined scenario's regression does not trip --fail-on (and the gate says so);
    without the quarantine, or once it expired, the same comparison exits 1."""
    base, head = _regression(tmp_path)
    gate = ("--fail-on", "regressed", "--history", store_url)
    unguarded = invoke("compare", base, head, *gate)
    assert unguarded.exit_code == 1  # the regression is real: the gate sees it
    today = datetime.now(UTC).date()
    added = invoke(
        "history",
        "quarantine",
        "add",
        "flake",
        "--reason",
        "races on CI",
        "--owner",
        "ana",
        "--until",
        today.isoformat(),
        "--history",
        store_url,
    )
    assert added.exit_code == 0, added.stderr
    held = invoke("compare", base, head, *gate, "--json")
    assert held.exit_code == 0
    assert (
        "warning [gate-quarantined]: the gate ignores quarantined scenario flake (regressed)"
        in held.stderr
    )
    document = as_json(held)
    assert document["scenarios"]["flake"]["verdict"] == "regressed"  # still reported
    assert document["gate"] == {
        "failOn": "regressed",
        "fails": False,
        "ignored": [
            {
                "scenario": "flake",
                "reason": "quarantined",
                "detail": f"races on CI (owner ana), until {today.isoformat()}",
                "verdict": "regressed",
            }
        ],
        "decidedBy": [],
    }
    assert "--fail-on regressed: passes" in held.stderr
    # An expired quarantine ends by itself: yesterday's last day no longer holds.
    store.release("flake")
    store.quarantine("flake", reason="old", until=today - timedelta(days=1))
    assert store.quarantined() == {}
    assert [q.active for q in store.quarantines(everything=True)] == [False, False]
    tripped = invoke("compare", base, head, *gate)
    assert tripped.exit_code == 1
    assert "--fail-on regressed: fails (exit 1), decided by scenario flake" in tripped.stderr
    listed = invoke("history", "quarantine", "list", "--all", "--history", store_url)
    assert "(expired)" in listed.stdout
    assert "(removed)" in listed.stdout


def test_quarantine_add_refuses_a_past_date_and_remove_an_unknown_scenario(store_url: str) -> None:
    """--until in the past is invalid-option; removing what is not quarantined is not found."""
    past = invoke(
        "history",
        "quarantine",
        "add",
        "x",
        "--reason",
        "r",
        "--until",
        "2001-01-01",
        "--history",
        store_url,
    )
    assert past.exit_code == 2
    assert "is in the past" in past.stderr
    invoke("history", "quarantine", "add", "x", "--reason", "r", "--history", store_url)
    assert invoke("history", "quarantine", "remove", "x", "--history", store_url).exit_code == 0
    again = invoke("history", "quarantine", "remove", "x", "--history", store_url)
    assert again.exit_code == 2
    assert "error [history-not-found]: 'x' is not quarantined" in again.stderr


def test_gate_stable_nights_counts_only_stable_scenarios(
    store: HistoryStore, store_url: str, tmp_path: Path
) -> None:
    """--gate-stable-nights N leaves out a scenario that flipped in its last N runs."""
    for day in (1, 2, 3):
        flake = counts(10) if day != 2 else counts(0, 10)
        store.ingest(dated_report(day, {"flake": flake, "solid": counts(10)}))
    base = _write(tmp_path, dated_report(3, {"flake": counts(10), "solid": counts(10)}))
    head = _write(tmp_path, dated_report(4, {"flake": counts(0, 10), "solid": counts(10)}))
    gate = ("--fail-on", "regressed", "--history", store_url)
    assert invoke("compare", base, head, *gate).exit_code == 1
    stable = invoke("compare", base, head, *gate, "--gate-stable-nights", "3")
    assert stable.exit_code == 0
    assert "warning [gate-unstable]: the gate ignores scenario flake (regressed)" in stable.stderr
    assert "solid" not in stable.stderr
