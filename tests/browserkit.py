"""Open HTML pages in real headless Chromium (Debian's ``chromium``) through Playwright.

Playwright's Python package carries its driver; the browser is the system one,
launched by ``executable_path`` (``playwright install`` is never run). When the
browser is missing the browser tests skip, except in CI (``CI=1``) or with
``ATLANTE_EVAL_REQUIRE_BROWSER=1``, where they fail loudly. Each page records its
requests, console messages, page errors and dialogs so that tests can assert none
happened.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("ATLANTE_EVAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_required() -> bool:
    """Whether a missing browser is an error (CI, or asked for) rather than a skip."""
    return os.environ.get("CI") not in (None, "", "0") or bool(
        os.environ.get("ATLANTE_EVAL_REQUIRE_BROWSER")
    )


def _missing() -> str | None:
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium for the module's tests."""
    problem = _missing()
    if problem is not None:
        if browser_required():
            pytest.fail(f"browser tests must run here: {problem}")
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Recorder:
    """What a page did: requests, console messages, page errors, dialogs."""

    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def foreign_requests(self, own: str) -> list[str]:
        """Every request other than the page's own file."""
        return [url for url in self.requests if url != own]

    def console_errors(self) -> list[tuple[str, str]]:
        """Console messages of type error or warning."""
        return [m for m in self.console if m[0] in ("error", "warning")]


def open_page(
    browser: Browser, file: Path, *, javascript: bool = True
) -> tuple[Page, Recorder, Any]:
    """Open ``file`` in a fresh context; return the page, its recorder, and the context."""
    context = browser.new_context(
        java_script_enabled=javascript, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    recorder = Recorder()
    page.on("request", lambda request: recorder.requests.append(request.url))
    page.on("console", lambda message: recorder.console.append((message.type, message.text)))
    page.on("pageerror", lambda error: recorder.errors.append(str(error)))

    def on_dialog(dialog: Any) -> None:
        recorder.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.goto(file.absolute().as_uri(), wait_until="load")
    return page, recorder, context
