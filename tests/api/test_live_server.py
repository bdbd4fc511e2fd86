"""A real uvicorn server on loopback: plain httpx, and the official Cohere SDK unchanged."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import httpx
import pytest

from ragattn.settings import Settings
from ragattn_api import create_app

pytestmark = pytest.mark.slow

QUERY = "What is the capital of France?"
DOCS = [
    "Bananas are a yellow fruit rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Rhine flows through Germany and the Netherlands.",
]
KEY = "live-test-key"


@pytest.fixture(scope="module")
def server_url(reranker: Any, compressor: Any, live_server: Any) -> Any:
    app = create_app(Settings(api_keys=(KEY,)), reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        yield url


def test_cohere_client_v2_reranks_unchanged(server_url: str, reranker: Any) -> None:
    cohere = pytest.importorskip("cohere")
    co = cohere.ClientV2(base_url=server_url, api_key=KEY)
    resp = co.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS, top_n=2)
    expected = reranker.rerank(QUERY, DOCS, top_n=2)
    assert [r.index for r in resp.results] == [r.index for r in expected]
    for got, want in zip(resp.results, expected, strict=True):
        assert got.relevance_score == pytest.approx(want.relevance_score, abs=1e-6)
    assert resp.id
    assert resp.meta is not None and resp.meta.api_version is not None


def test_cohere_client_v1_return_documents(server_url: str) -> None:
    cohere = pytest.importorskip("cohere")
    co = cohere.Client(base_url=server_url, api_key=KEY)
    resp = co.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS, return_documents=True)
    assert sorted(r.index for r in resp.results) == [0, 1, 2]
    assert all(r.document is not None and r.document.text == DOCS[r.index] for r in resp.results)


def test_cohere_client_sees_a_401_for_a_wrong_key(server_url: str) -> None:
    cohere = pytest.importorskip("cohere")
    co = cohere.ClientV2(base_url=server_url, api_key="wrong")
    with pytest.raises(cohere.errors.UnauthorizedError):
        co.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS)


def test_plain_http_and_public_routes(server_url: str) -> None:
    with httpx.Client(base_url=server_url, timeout=60) as c:
        assert c.get("/health").json() == {
            "status": "ok",
            "device": "cpu",
            "dtype": "float32",
            "max_request_tokens": 16384,  # engines handed in: not measured, the ceiling
            "proxies": {  # loaded: whether an earlier test in the session read another language
                "english": "smollm2-135m",
                "other_languages": "gemma3-270m",
                "other_languages_loaded": ANY,
            },
        }
        ready = c.get("/ready").json()
        assert (ready["status"], ready["device"], ready["dtype"]) == ("ready", "cpu", "float32")
        resp = c.post(
            "/rerank",
            json={"query": QUERY, "texts": DOCS},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        assert resp.status_code == 200
        assert len(resp.json()["results"]) == 3
        bad = c.post(
            "/v1/rerank",
            content=b"{",
            headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
        )
        assert bad.status_code == 400 and bad.json()["error_type"] == "invalid_request"
        assert "ragattn_requests_total" in c.get("/metrics").text
