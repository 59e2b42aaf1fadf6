"""A 500-trial run's report.html stays within a few MB (the bench's run; no timing here)."""

from __future__ import annotations

from pathlib import Path

from atlante_eval.views.html import render_run_html
from bench.bench_html import SCENARIOS, SIZE_BUDGET_BYTES, TRIALS, build


def test_a_500_trial_page_stays_within_its_size_budget(tmp_path: Path) -> None:
    """Every trial keeps a panel and some transcript; the whole page is at most 5 MiB."""
    report = build(tmp_path)
    page = render_run_html(report, run_dir=tmp_path, links_from=tmp_path).decode()
    assert SCENARIOS * TRIALS == 500
    assert len(page.encode()) <= SIZE_BUDGET_BYTES
    assert page.count('<details class="trial') == 500
    assert 'href="trials/s00/0/transcript.jsonl"' in page
    assert "more entries left out of this page" in page
