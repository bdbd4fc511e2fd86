"""API fixtures: one real reranker (and compressor, when the library has one) per test session.

Apps are built per test with their own settings but share the loaded engine, so each test runs
the real lifespan (cache, worker, fingerprint) without reloading the proxy.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from api import create_app
from ragattn.settings import Settings


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy)


@pytest.fixture(scope="session")
def compressor(proxy: Any) -> Any | None:
    if importlib.util.find_spec("ragattn.compress") is None:
        return None
    from ragattn.compress import Compressor

    # An untrained method: available whether or not probe weights have been trained yet.
    return Compressor(proxy, method="focal")


@pytest.fixture
def make_app(reranker: Any, compressor: Any | None) -> Callable[..., Litestar]:
    def build(**overrides: Any) -> Litestar:
        rr = overrides.pop("reranker", reranker)
        return create_app(Settings(**overrides), reranker=rr, compressor=compressor)

    return build


@pytest.fixture
async def client(make_app: Callable[..., Litestar]) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app=make_app()) as c:
        yield c


@pytest.fixture
def redis_url() -> str:
    """``RAGATTN_TEST_REDIS_URL``; skips locally without it, fails in CI (``CI=true``)."""
    url = os.environ.get("RAGATTN_TEST_REDIS_URL")
    if url:
        return url
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("RAGATTN_TEST_REDIS_URL is not set; CI must run a real redis-server")
    pytest.skip("RAGATTN_TEST_REDIS_URL is not set (start redis-server and export it)")


class GatedReranker:
    """The real reranker behind a gate: calls block until ``gate`` is set, and are counted.

    Lets queue and coalescing tests hold a job on the model thread deterministically.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.proxy = inner.proxy
        self.method = inner.method
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def rerank(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.entered.set()
        if not self.gate.wait(timeout=60):
            raise TimeoutError("test gate was never opened")
        return self.inner.rerank(*args, **kwargs)


@pytest.fixture
def gated(reranker: Any) -> GatedReranker:
    return GatedReranker(reranker)
