"""Browser fixtures: the real app on a loopback uvicorn server and a headless Chromium.

Chromium is the distribution's (``apt-get install -y chromium``), driven by Playwright without
its own browser download. A missing browser or Playwright is a test failure, never a skip, so CI
cannot pass without having looked at the page.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from litestar import Litestar

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


@pytest.fixture(scope="session")
def reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy, method="icr")


@pytest.fixture(scope="session")
def compressor(proxy: Any) -> Any:
    from ragattn.compress import Compressor

    # Untrained, so the page test does not depend on probe weights having been trained.
    return Compressor(proxy, method="focal")


@contextmanager
def serve(app: Litestar) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread; yields the base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="web-test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="session")
def live_server() -> Callable[[Litestar], Any]:
    """``with live_server(app) as base_url:`` a real uvicorn server on loopback."""
    return serve


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


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright, shared by every browser test."""
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


@pytest.fixture(scope="session")
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
