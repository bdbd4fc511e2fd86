"""Rerank routes over real HTTP (Litestar's AsyncTestClient with the real lifespan and engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

QUERY = "What is the capital of France?"
DOCS = [
    "Bananas are a yellow fruit rich in potassium.",
    "Paris is the capital and largest city of France.",
    "The Rhine flows through Germany and the Netherlands.",
]


def _without_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "id"}


async def test_v2_matches_the_library_exactly(
    client: AsyncTestClient[Litestar], reranker: Any
) -> None:
    """The server is a thin layer: same order and scores as calling the library in process."""
    resp = await client.post(
        "/v2/rerank", json={"model": "rerank-v3.5", "query": QUERY, "documents": DOCS}
    )
    assert resp.status_code == 200
    body = resp.json()
    expected = reranker.rerank(QUERY, DOCS)
    assert [r["index"] for r in body["results"]] == [r.index for r in expected]
    for got, want in zip(body["results"], expected, strict=True):
        assert got["relevance_score"] == pytest.approx(want.relevance_score, abs=1e-6)
        assert 0.0 <= got["relevance_score"] <= 1.0
        assert set(got) == {"index", "relevance_score"}
    assert body["meta"]["api_version"] == {"version": "2"}
    assert body["meta"]["billed_units"]["search_units"] == 1
    assert body["meta"]["billed_units"]["input_tokens"] > 0
    assert body["meta"]["warnings"] == []
    assert body["model"] == "smollm2-135m"
    assert isinstance(body["id"], str) and body["id"]


async def test_v1_objects_return_documents_and_top_n(client: AsyncTestClient[Litestar]) -> None:
    docs = [{"text": t, "id": f"d{i}"} for i, t in enumerate(DOCS)]
    resp = await client.post(
        "/v1/rerank", json={"query": QUERY, "documents": docs, "top_n": 2, "return_documents": True}
    )
    assert resp.status_code == 200
    results = resp.json()["results"]
    assert len(results) == 2
    for r in results:
        assert r["document"] == {"text": DOCS[r["index"]]}
    assert resp.json()["meta"]["api_version"] == {"version": "1"}


async def test_tei_texts_alias_and_top_n_clamped(client: AsyncTestClient[Litestar]) -> None:
    resp = await client.post(
        "/rerank",
        json={"query": QUERY, "texts": DOCS, "top_k": 50, "return_text": True, "raw_scores": True},
    )
    assert resp.status_code == 200
    results = resp.json()["results"]
    assert sorted(r["index"] for r in results) == [0, 1, 2]
    assert all(isinstance(r["raw_score"], float) and r["document"]["text"] for r in results)


async def test_truncation_is_reported_in_meta_warnings(client: AsyncTestClient[Litestar]) -> None:
    long_doc = "Paris is the capital of France. " * 40
    resp = await client.post(
        "/v2/rerank",
        json={
            "model": "m",
            "query": QUERY,
            "documents": [long_doc, DOCS[0]],
            "max_tokens_per_doc": 16,
        },
    )
    assert resp.status_code == 200
    warnings = resp.json()["meta"]["warnings"]
    assert len(warnings) == 1
    assert warnings[0].startswith("documents[0] truncated from ")
    assert warnings[0].endswith(" to 16 tokens (max_tokens_per_doc)")


async def test_cached_response_equals_fresh(client: AsyncTestClient[Litestar]) -> None:
    payload = {"model": "m", "query": QUERY, "documents": DOCS, "top_n": 2}
    fresh = await client.post("/v2/rerank", json=payload)
    cached = await client.post("/v2/rerank", json=payload)
    assert fresh.headers["x-ragattn-cache"] == "miss"
    assert cached.headers["x-ragattn-cache"] == "hit"
    assert _without_id(cached.json()) == _without_id(fresh.json())
    assert cached.json()["id"] != fresh.json()["id"]
    # A different document order is a different request (indices change), never a stale hit.
    reordered = await client.post("/v2/rerank", json={**payload, "documents": DOCS[::-1]})
    assert reordered.headers["x-ragattn-cache"] == "miss"


async def test_disabled_cache_still_answers(make_app: Callable[..., Litestar]) -> None:
    async with AsyncTestClient(app=make_app(cache_backend="none")) as c:
        payload = {"model": "m", "query": QUERY, "documents": DOCS[:2]}
        first = await c.post("/v2/rerank", json=payload)
        second = await c.post("/v2/rerank", json=payload)
    assert second.headers["x-ragattn-cache"] == "miss"
    assert _without_id(first.json()) == _without_id(second.json())


async def test_metrics_count_requests_cache_and_model_time(
    client: AsyncTestClient[Litestar],
) -> None:
    payload = {"model": "m", "query": QUERY, "documents": DOCS[:2]}
    await client.post("/v2/rerank", json=payload)
    await client.post("/v2/rerank", json=payload)
    text = (await client.get("/metrics")).text
    assert 'ragattn_requests_total{method="POST",route="/v2/rerank",status="200"} 2.0' in text
    assert 'ragattn_cache_events_total{event="hit"} 1.0' in text
    assert 'ragattn_cache_events_total{event="miss"} 1.0' in text
    assert 'ragattn_model_seconds_count{task="rerank"} 1.0' in text
    assert "ragattn_queue_depth 0.0" in text
    assert "ragattn_request_duration_seconds_bucket" in text


# --- per-request method ---------------------------------------------------------------------


def _other_method(reranker: Any) -> str:
    """A cheap registered method that is not the service's default (no proxy forward)."""
    return "fused-no-attention" if reranker.method != "fused-no-attention" else "minilm"


async def test_a_named_method_serves_the_call_and_is_reported(
    client: AsyncTestClient[Litestar], reranker: Any, proxy: Any
) -> None:
    from ragattn import Reranker

    other = _other_method(reranker)
    default = (await client.post("/v2/rerank", json={"query": QUERY, "documents": DOCS})).json()
    resp = await client.post(
        "/v2/rerank",
        json={"model": "rerank-v3.5", "query": QUERY, "documents": DOCS, "method": other},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["method"] == other
    expected = Reranker(proxy, method=other).rerank(QUERY, DOCS)
    assert [r["index"] for r in body["results"]] == [r.index for r in expected]
    for got, want in zip(body["results"], expected, strict=True):
        assert got["relevance_score"] == pytest.approx(want.relevance_score, abs=1e-6)
    scores = lambda b: {r["index"]: r["relevance_score"] for r in b["results"]}  # noqa: E731
    assert scores(body) != scores(default)
    assert body["model"] == default["model"]  # ``model`` names the proxy either way


async def test_without_method_the_response_keeps_the_cohere_shape(
    client: AsyncTestClient[Litestar], reranker: Any
) -> None:
    for route in ("/v1/rerank", "/v2/rerank", "/rerank"):
        resp = await client.post(route, json={"model": "m", "query": QUERY, "documents": DOCS})
        body = resp.json()
        assert list(body) == ["id", "results", "meta", "model"], route
        assert list(body["meta"]) == ["api_version", "billed_units", "warnings"], route
        assert all(list(r) == ["index", "relevance_score"] for r in body["results"]), route
    # Naming the default method changes nothing but the added key.
    plain = await client.post("/v2/rerank", json={"model": "m", "query": QUERY, "documents": DOCS})
    named = await client.post(
        "/v2/rerank",
        json={"model": "m", "query": QUERY, "documents": DOCS, "method": reranker.method},
    )
    assert named.json()["method"] == reranker.method
    assert _without_id(named.json()) == {**_without_id(plain.json()), "method": reranker.method}


@pytest.mark.parametrize("route", ["/v1/rerank", "/v2/rerank", "/rerank"])
@pytest.mark.parametrize("method", ["nope", "", "MINILM"])
async def test_an_unknown_method_is_a_400_naming_the_valid_ones(
    client: AsyncTestClient[Litestar], route: str, method: str
) -> None:
    from ragattn.rerank import METHODS

    resp = await client.post(route, json={"query": QUERY, "documents": DOCS, "method": method})
    assert resp.status_code == 400, resp.text
    assert resp.json() == {
        "error_type": "invalid_request",
        "message": f"unknown rerank method {method!r}; valid: {', '.join(METHODS)}",
    }


async def test_each_method_has_its_own_cache_entry_and_engine(
    make_app: Callable[..., Litestar], reranker: Any
) -> None:
    other = _other_method(reranker)
    payload = {"model": "m", "query": QUERY, "documents": DOCS, "top_n": 2}
    app = make_app()
    async with AsyncTestClient(app=app) as c:

        async def cache(extra: dict[str, Any]) -> str:
            resp = await c.post("/v2/rerank", json={**payload, **extra})
            assert resp.status_code == 200, resp.text
            return str(resp.headers["x-ragattn-cache"])

        assert await cache({}) == "miss"
        assert await cache({"method": other}) == "miss"  # never the default's entry
        assert await cache({"method": other}) == "hit"
        assert await cache({}) == "hit"
        assert await cache({"method": reranker.method}) == "hit"  # the default, named
        other_docs = {"documents": DOCS[::-1], "method": other}
        assert await cache(other_docs) == "miss"
        service = app.state.service
        # Built once on first use and kept: the same engine serves every later call.
        assert service.rerank_engine(other) is service.rerank_engine(other)
        assert service.rerank_engine(other).method == other
        assert service.rerank_engine(reranker.method) is reranker


async def test_a_served_app_builds_every_method_before_it_is_ready(
    make_app: Callable[..., Litestar], reranker: Any
) -> None:
    """The production start-up (``build_methods``) leaves no per-request method to build later."""
    from ragattn.compress.registry import METHODS as COMPRESS_METHODS
    from ragattn.rerank import METHODS

    app = make_app()
    async with AsyncTestClient(app=app):
        service = app.state.service
        missing = service.build_methods()
        for name in METHODS:
            if f"rerank:{name}" not in missing:
                engine = service.rerank_engine(name)
                assert engine.method == name and service.rerank_engine(name) is engine
        assert {n for n in METHODS if f"rerank:{n}" not in missing} >= {"minilm", reranker.method}
        built = {n for n in COMPRESS_METHODS if f"compress:{n}" not in missing}
        assert {"sentinel", "lexical"} <= built
        assert all(service.compressor(n).method == n for n in built)


GERMAN_QUERY = "Wie viele Mitglieder hatte der Ruderverein Germania im Gründungsjahr?"
GERMAN_DOCS = [
    "Sport clubs in Germany often have hundreds of members and their own boathouses on the river.",
    "Rudern ist eine Sportart, bei der ein Boot mit Riemen oder Skulls fortbewegt wird.",
    "Im Gründungsjahr 1879 zählte der Ruderverein Germania nur zwölf Mitglieder, heute sind es "
    "über dreihundert.",
    "Die Vereine der Stadt treffen sich jedes Jahr zu einer großen Regatta auf dem See.",
]


async def test_a_german_call_is_ranked_by_the_multilingual_method_and_says_so(
    client: AsyncTestClient[Litestar], reranker: Any
) -> None:
    """The default reranker ranks a call not in English with the multilingual method, and the
    response names it in ``method`` (an English call keeps Cohere's shape); the answer leads."""
    from ragattn.rerank import MULTILINGUAL_METHOD

    assert reranker.multilingual is not None  # the service's default routes by language
    resp = await client.post("/v2/rerank", json={"query": GERMAN_QUERY, "documents": GERMAN_DOCS})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["method"] == MULTILINGUAL_METHOD
    assert body["results"][0]["index"] == 2
    english = (await client.post("/v2/rerank", json={"query": QUERY, "documents": DOCS})).json()
    assert "method" not in english
    named = await client.post(
        "/v2/rerank",
        json={"query": GERMAN_QUERY, "documents": GERMAN_DOCS, "method": "fused-no-attention"},
    )
    assert named.json()["method"] == "fused-no-attention"  # a named method ranks every language
