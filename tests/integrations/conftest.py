"""Integration fixtures: the in-process engines, and a live service on loopback serving them.

The server is a real uvicorn on 127.0.0.1 (a free port) running ``api.create_app`` with the same
loaded engines, so remote answers must equal in-process ones exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from ragattn.client import Client

API_KEY = "integrations-test-key"


@dataclass(frozen=True)
class Corpus:
    """A hand-built query and three documents with ids and metadata; index 1 answers it."""

    query: str = "What is the capital of France?"
    texts: tuple[str, ...] = (
        "Bananas are a yellow fruit rich in potassium. They grow in the tropics.",
        "Paris is the capital and largest city of France. It lies on the Seine.",
        "The Rhine flows through Germany and the Netherlands. It ends in the North Sea.",
    )
    ids: tuple[str, ...] = ("fruit", "paris", "rhine")
    metadata: tuple[dict[str, Any], ...] = field(
        default_factory=lambda: (
            {"source": "wiki/banana"},
            {"source": "wiki/paris", "year": 2024},
            {"source": "wiki/rhine"},
        )
    )


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture(scope="session")
def reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy, method="icr")


@pytest.fixture(scope="session")
def compressor(proxy: Any) -> Any:
    from ragattn.compress import Compressor

    return Compressor(proxy, method="focal")


@pytest.fixture(scope="session")
def server_url(reranker: Any, compressor: Any, live_server: Any) -> Iterator[str]:
    """A live service (API key required) over the session's engines."""
    from api import create_app
    from ragattn.settings import Settings

    app = create_app(Settings(api_keys=(API_KEY,)), reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="session")
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url, api_key=API_KEY, timeout_s=300) as c:
        yield c


@pytest.fixture(params=["local", "remote"])
def engines(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(reranker, compressor): the in-process engines, or one Client for both."""
    if request.param == "local":
        return request.getfixturevalue("reranker"), request.getfixturevalue("compressor")
    c = request.getfixturevalue("client")
    return c, c
