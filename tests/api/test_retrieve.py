"""``POST /v1/retrieve`` over a small BM25 index built for the test (no dense vectors needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

CORPUS = [
    {"id": "paris", "text": "Paris is the capital and largest city of France."},
    {"id": "rome", "text": "Rome is the capital city of Italy."},
    {"id": "banana", "text": "Bananas are yellow fruit rich in potassium."},
    {"id": "rhine", "text": "The Rhine flows through Germany and the Netherlands."},
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


async def test_bm25_search_matches_the_index(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    from ragattn.retrieve import Index

    expected = Index.load(index_dir).search("capital of France", 3, mode="bm25")
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        resp = await c.post(
            "/v1/retrieve", json={"query": "capital of France", "k": 3, "mode": "bm25"}
        )
        again = await c.post(
            "/v1/retrieve", json={"query": "capital of France", "k": 3, "mode": "bm25"}
        )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [r["doc_id"] for r in body["results"]] == [h.doc_id for h in expected]
    assert body["results"][0]["doc_id"] == "paris"
    assert body["results"][0]["text"] == CORPUS[0]["text"]
    assert "relevance_score" not in body["results"][0]
    assert again.headers["x-ragattn-cache"] == "hit"


async def test_retrieve_then_rerank(
    make_app: Callable[..., Litestar], index_dir: Path, reranker: Any
) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        payload = {"query": "capital of France", "k": 3, "mode": "bm25", "rerank": True, "top_n": 2}
        resp = await c.post("/v1/retrieve", json=payload)
    assert resp.status_code == 200, resp.text
    results = resp.json()["results"]
    assert len(results) == 2
    assert all(0.0 <= r["relevance_score"] <= 1.0 for r in results)
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)


async def test_retrieve_errors(make_app: Callable[..., Litestar], index_dir: Path) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir), max_documents=5)) as c:
        empty = await c.post("/v1/retrieve", json={"query": " ", "k": 3})
        too_many = await c.post("/v1/retrieve", json={"query": "q", "k": 6})
        bad_mode = await c.post("/v1/retrieve", json={"query": "q", "k": 3, "mode": "vector"})
        dense = await c.post("/v1/retrieve", json={"query": "q", "k": 3, "mode": "dense"})
    assert (empty.status_code, empty.json()["error_type"]) == (400, "invalid_request")
    assert (too_many.status_code, too_many.json()["error_type"]) == (413, "input_too_large")
    assert (bad_mode.status_code, bad_mode.json()["error_type"]) == (400, "invalid_request")
    assert (dense.status_code, dense.json()["error_type"]) == (400, "invalid_request")
    assert "without dense vectors" in dense.json()["message"]


async def test_no_route_without_an_index(client: AsyncTestClient[Litestar]) -> None:
    resp = await client.post("/v1/retrieve", json={"query": "q"})
    assert (resp.status_code, resp.json()["error_type"]) == (404, "not_found")
