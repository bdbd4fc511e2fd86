"""API fixtures: one real reranker and one real compressor with the default methods per test
session (the library's defaults, whatever they are: the service's tests follow them).

Apps are built per test with their own settings but share the loaded engine, so each test runs
the real lifespan (cache, worker, fingerprint) without reloading the proxy.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.settings import Settings
from ragattn_api import create_app


@pytest.fixture(scope="session")
def reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy)


@pytest.fixture(scope="session")
def compressor(proxy: Any) -> Any:
    """The default compressor; overrides the unit tests' untrained ``focal`` one."""
    from ragattn import Compressor

    return Compressor(proxy)


@pytest.fixture
def make_app(reranker: Any, compressor: Any) -> Callable[..., Litestar]:
    def build(**overrides: Any) -> Litestar:
        rr = overrides.pop("reranker", reranker)
        return create_app(Settings(**overrides), reranker=rr, compressor=compressor)

    return build


@pytest.fixture
async def client(make_app: Callable[..., Litestar]) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app=make_app()) as c:
        yield c


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

    def rerank_checked(self, *args: Any, **kwargs: Any) -> Any:
        """The checked entry the service calls (:class:`ragattn.contract.RerankVerbs`)."""
        self.calls += 1
        self.entered.set()
        if not self.gate.wait(timeout=60):
            raise TimeoutError("test gate was never opened")
        return self.inner.rerank_checked(*args, **kwargs)


@pytest.fixture
def gated(reranker: Any) -> GatedReranker:
    return GatedReranker(reranker)
