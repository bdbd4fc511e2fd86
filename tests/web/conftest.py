"""Browser fixtures: the real app on a loopback uvicorn server and a headless Chromium.

Chromium is the distribution's (``apt-get install -y chromium``), driven by Playwright without
its own browser download. A missing browser or Playwright is a test failure, never a skip, so CI
cannot pass without having looked at the page.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
MODEL_TIMEOUT_MS = 300_000
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str:
    """``RAGATTN_CHROMIUM`` or the first Chromium on PATH; fails the test when there is none."""
    explicit = os.environ.get("RAGATTN_CHROMIUM")
    if explicit:
        if not Path(explicit).exists():
            pytest.fail(f"RAGATTN_CHROMIUM={explicit} does not exist")
        return explicit
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "no Chromium found for the browser tests: run 'apt-get install -y chromium' "
        "or set RAGATTN_CHROMIUM to a Chromium binary"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright, shared by the tests of one module (and stopped
    after it, so Playwright's event loop does not outlive the browser tests)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.fail(f"playwright is not installed ({exc}): pip install playwright")
    executable = chromium_path()
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def expect(browser: Any) -> Any:
    """Playwright's auto-waiting assertions; they poll without ``eval``, so the page's CSP holds."""
    from playwright.sync_api import expect as playwright_expect

    # Generous: model calls share two cores with other work; nothing here asserts on time.
    playwright_expect.set_options(timeout=MODEL_TIMEOUT_MS)
    return playwright_expect


@pytest.fixture
def screenshot_dir(tmp_path: Path) -> Path:
    """Where screenshots go: ``RAGATTN_SCREENSHOT_DIR`` (e.g. ``docs/img``) or a temp dir."""
    target = os.environ.get("RAGATTN_SCREENSHOT_DIR")
    path = Path(target) if target else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path
