"""Regenerate docs/img/html-report.png: the run page of the golden test's run, one trial open.

Run from the repository root: ``python -m tools.html_screenshot`` (needs /usr/bin/chromium).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"]


def main() -> None:
    """Render the page and save the screenshot."""
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    from playwright.sync_api import sync_playwright
    from test_html_golden import _run_dir

    from atlante_eval import load_report
    from atlante_eval.views.html import render_run_html

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = _run_dir(Path(tmp))
        page_file = run_dir / "report.html"
        page_file.write_bytes(
            render_run_html(load_report(run_dir), run_dir=run_dir, links_from=run_dir)
        )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 1400})
            page.goto(page_file.as_uri())
            page.locator('#verdict-grid a.cell[href="#s-alpha-t1"]').click()
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=str(ROOT / "docs" / "img" / "html-report.png"))
            browser.close()


if __name__ == "__main__":
    main()
