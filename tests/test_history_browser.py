"""`html --history STORE` in real headless Chromium: the heat map and trends drawn from the
history store (SQLite and PostgreSQL) match it, mark partial, shard, resumed, adaptive and
blessed runs, make no request, and show an injected scenario name as text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browserkit import browser, open_page
from historykit import dated_report, fresh_database, invoke, postgres_server, store, store_url
from reports import counts

from atlante_eval.history.store import HistoryStore
from atlante_eval.report import AdaptiveRecord

pytestmark = pytest.mark.browser
__all__ = ["browser", "fresh_database", "postgres_server", "store", "store_url"]  # fixtures

INJECTED = '<img src=x onerror="window.__pwned=1;alert(1)">'
ADAPTIVE = AdaptiveRecord(
    method="bonferroni-looks",
    baseline="base/report.json",
    baseline_run_id="2026-02-01T00-00-00-0000",
    alpha=0.05,
    margin=0.1,
    family_size=1,
    looks=[3],
    look_confidence=0.95,
    min_trials=3,
    max_trials=3,
    new_trials=3,
    cost=0.0,
    scenarios={},
    trials_used=3,
    fixed_per_scenario=3,
    fixed_trials=3,
    saving=0,
    compare_agrees=True,
)


def _fill(store: HistoryStore) -> list[str]:
    """Six runs: plain, partial, one shard, resumed, adaptive, plain (blessed)."""
    reports = [
        dated_report(1, {"steady": counts(3), "flip": counts(3)}),
        dated_report(2, {"steady": counts(3), "flip": counts(0, 3)}, interrupted=True),
        dated_report(3, {"steady": counts(2), "flip": counts(1, 1)}, shard="1/2"),
        dated_report(4, {"steady": counts(3), "flip": counts(3)}, resumed_from="/r/x"),
        dated_report(5, {"steady": counts(3), "flip": counts(2, 1)}).model_copy(
            update={"adaptive": ADAPTIVE}
        ),
        dated_report(6, {"steady": counts(3), "flip": counts(0, 3), INJECTED: counts(1)}),
    ]
    for value in reports:
        store.ingest(value)
    store.bless(reports[0].run_id, reason="accepted")
    store.quarantine("flip", reason="known flake")
    return [r.run_id for r in reports]


def test_history_page_from_the_store(
    browser: Any, store: HistoryStore, store_url: str, tmp_path: Path
) -> None:
    """Every cell of the heat map is the store's pass rate; the runs carry their marks."""
    run_ids = _fill(store)
    page_file = tmp_path / "history.html"
    result = invoke("html", "--history", store_url, "-o", page_file)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"html: {page_file} (6 runs from ")
    page, recorder, context = open_page(browser, page_file)
    try:
        columns = page.eval_on_selector_all(
            "#heat-table thead th.run-col", "cells => cells.map(c => c.dataset.run)"
        )
        assert columns == run_ids
        marks = page.eval_on_selector_all(
            "#heat-table thead th.run-col",
            "cells => cells.map(c => "
            "Array.from(c.querySelectorAll('.mark'), m => m.textContent).join(''))",
        )
        assert marks == ["B", "P", "S", "R", "A", ""]
        rows = page.eval_on_selector_all(
            "#heat-table tbody tr",
            "rows => rows.map(r => [r.dataset.scenario, Array.from(r.querySelectorAll('td'), "
            "c => c.textContent.trim())])",
        )
        assert rows == [
            [INJECTED, ["", "", "", "", "", "100"]],
            ["flip", ["100", "0", "50", "100", "67", "0"]],
            ["steady", ["100", "100", "100", "100", "100", "100"]],
        ]
        flip = store.scenario("flip", last=10)
        assert flip is not None
        titles = page.eval_on_selector_all(
            "tr[data-scenario='flip'] td", "cells => cells.map(c => c.title)"
        )
        for title, stored in zip(titles, flip.nights, strict=True):
            assert title.startswith(f"{stored.run_id}: {stored.passed}/{stored.graded} passed")
        assert page.inner_text("tr[data-scenario='flip'] th") == "flip quarantined"
        assert page.locator("#trends svg").count() == 3
        page.fill("#filter", "ste")
        visible = page.eval_on_selector_all(
            "#heat-table tbody tr:not(.hidden)", "rows => rows.map(r => r.dataset.scenario)"
        )
        assert visible == ["steady"]
        assert page.evaluate("window.__pwned === undefined")
        assert recorder.dialogs == []
        assert recorder.foreign_requests(page_file.absolute().as_uri()) == []
        assert recorder.console_errors() == []
        assert recorder.errors == []
    finally:
        context.close()


def test_history_page_needs_an_output_file(store_url: str, store: HistoryStore) -> None:
    """Without -o the store page is refused as the directory page is."""
    result = invoke("html", "--history", store_url)
    assert result.exit_code == 2
    assert "--history needs -o FILE" in result.stderr
