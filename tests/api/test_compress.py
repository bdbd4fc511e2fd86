"""``POST /v1/compress`` over HTTP against the real compressor (the default method; ``focal`` where
a request names one)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.compress import DEFAULT_METHOD

pytestmark = pytest.mark.anyio

QUERY = "When was the Eiffel Tower completed?"
DOCS = [
    "The Eiffel Tower is in Paris. It was completed in 1889. Bananas are yellow.",
    "Mount Everest is the highest mountain. It lies in the Himalayas.",
]


@pytest.fixture(autouse=True)
def _needs_compressor(compressor: Any) -> None:
    if compressor is None:
        pytest.fail("ragattn.compress is missing: the compress route has no engine")


async def test_compress_matches_the_library(
    client: AsyncTestClient[Litestar], compressor: Any
) -> None:
    resp = await client.post("/v1/compress", json={"query": QUERY, "documents": DOCS, "ratio": 0.5})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    expected = compressor.compress(QUERY, DOCS, ratio=0.5)
    assert body["compressed_text"] == expected.compressed_text
    assert body["origin_tokens"] == expected.origin_tokens
    assert body["compressed_tokens"] == expected.compressed_tokens
    assert isinstance(body["ratio"], float) and 0 < body["ratio"] <= 1
    assert body["method"] == DEFAULT_METHOD == compressor.method
    assert [d["index"] for d in body["documents"]] == [0, 1]
    for doc in body["documents"]:
        source = DOCS[doc["index"]]
        for span in doc["kept_spans"]:
            assert (
                source[span["start"] : span["end"]] == span["text"]
            )  # spans slice back to their text
            assert 0.0 <= span["score"] <= 1.0


async def test_context_string_and_llmlingua_aliases(client: AsyncTestClient[Litestar]) -> None:
    resp = await client.post(
        "/v1/compress",
        json={"query": QUERY, "context": DOCS[0], "target_token": 12, "method": "focal"},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert len(body["documents"]) == 1
    assert body["compressed_tokens"] <= body["origin_tokens"]


async def test_compress_cache_hit_equals_fresh(client: AsyncTestClient[Litestar]) -> None:
    payload = {"query": QUERY, "documents": DOCS, "threshold": 0.2, "method": "focal"}
    fresh = await client.post("/v1/compress", json=payload)
    cached = await client.post("/v1/compress", json=payload)
    assert (fresh.headers["x-ragattn-cache"], cached.headers["x-ragattn-cache"]) == ("miss", "hit")
    # ``meta`` holds the fresh answer's stage seconds, which a hit never claims
    strip = lambda b: {k: v for k, v in b.items() if k not in ("id", "meta")}  # noqa: E731
    assert strip(cached.json()) == strip(fresh.json())
    assert "meta" not in cached.json()


@pytest.mark.parametrize(
    ("payload", "status", "error_type", "fragment"),
    [
        (
            {"query": QUERY, "documents": DOCS, "ratio": 0.5, "threshold": 0.1},
            400,
            "invalid_request",
            "send at most one budget",
        ),
        ({"query": QUERY, "documents": DOCS, "ratio": 1.5}, 400, "invalid_request", "ratio"),
        (
            {"query": QUERY, "documents": DOCS, "ratio": 0.5, "rate": 0.5},
            400,
            "invalid_request",
            "alias",
        ),
        (
            {"query": QUERY, "ratio": 0.5},
            400,
            "invalid_request",
            "'documents' (or 'context') is required",
        ),
        ({"query": "", "documents": DOCS, "ratio": 0.5}, 400, "invalid_request", "non-empty"),
        (
            {"query": QUERY, "documents": DOCS, "ratio": 0.5, "method": "nope"},
            400,
            "invalid_request",
            "nope",
        ),
        (
            {"query": QUERY, "documents": DOCS, "target_tokens": 10, "max_tokens": 8},
            400,
            "invalid_request",
            "max_tokens is the token ceiling of a ratio budget; send it with ratio, not with "
            "target_tokens",
        ),
        (
            {"query": QUERY, "documents": DOCS, "target_token": 10, "max_tokens": 8},
            400,
            "invalid_request",
            "not with target_tokens",
        ),
        (
            {"query": QUERY, "documents": DOCS, "threshold": 0.5, "max_tokens": 8},
            400,
            "invalid_request",
            "not with threshold",
        ),
        (
            {"query": QUERY, "documents": DOCS, "ratio": 0.5, "max_tokens": 0},
            400,
            "invalid_request",
            "`$.max_tokens`",
        ),
    ],
)
async def test_bad_compress_requests(
    client: AsyncTestClient[Litestar], payload: Any, status: int, error_type: str, fragment: str
) -> None:
    resp = await client.post("/v1/compress", json=payload)
    assert resp.status_code == status, resp.text
    assert resp.json()["error_type"] == error_type
    assert fragment in resp.json()["message"]


async def test_rerank_compress_matches_the_library(
    client: AsyncTestClient[Litestar], compressor: Any
) -> None:
    if not hasattr(compressor, "rerank_and_compress"):
        pytest.fail("Compressor.rerank_and_compress is missing: /v1/rerank_compress has no engine")
    payload = {
        "query": QUERY,
        "documents": DOCS,
        "top_n": 1,
        "ratio": 0.5,
        "return_documents": True,
    }
    resp = await client.post("/v1/rerank_compress", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    ranked, compressed = compressor.rerank_and_compress(QUERY, DOCS, top_n=1, ratio=0.5)
    assert [r["index"] for r in body["results"]] == [r.index for r in ranked]
    for got, want in zip(body["results"], ranked, strict=True):
        assert got["relevance_score"] == pytest.approx(want.relevance_score, abs=1e-6)
        assert got["document"] == {"text": DOCS[want.index]}
    assert body["compression"]["compressed_text"] == compressed.compressed_text
    assert [d["index"] for d in body["compression"]["documents"]] == [r.index for r in ranked]
    assert body["meta"]["warnings"] == []
    again = await client.post("/v1/rerank_compress", json=payload)
    assert again.headers["x-ragattn-cache"] == "hit"
    body["meta"].pop("stage_seconds")  # the fresh answer's own; a hit claims none
    assert {k: v for k, v in again.json().items() if k != "id"} == {
        k: v for k, v in body.items() if k != "id"
    }


async def test_a_ratios_max_tokens_caps_what_is_kept_and_is_its_own_cache_entry(
    client: AsyncTestClient[Litestar], compressor: Any
) -> None:
    payload = {"query": QUERY, "documents": DOCS, "ratio": 0.9}
    plain = await client.post("/v1/compress", json=payload)
    capped = await client.post("/v1/compress", json={**payload, "max_tokens": 8})
    again = await client.post("/v1/compress", json={**payload, "max_tokens": 8})
    assert plain.status_code == capped.status_code == 200, (plain.text, capped.text)
    # a cached ratio-0.9 answer never answers a ratio-0.9-at-most-8-tokens call
    assert [r.headers["x-ragattn-cache"] for r in (plain, capped, again)] == ["miss", "miss", "hit"]
    expected = compressor.compress(QUERY, DOCS, ratio=0.9, max_tokens=8)
    body = capped.json()
    assert body["compressed_text"] == expected.compressed_text
    assert body["compressed_tokens"] == expected.compressed_tokens <= 8
    assert plain.json()["compressed_tokens"] > 8
    ranked = await client.post("/v1/rerank_compress", json={**payload, "max_tokens": 8, "top_n": 2})
    assert ranked.status_code == 200, ranked.text
    assert ranked.json()["compression"]["compressed_tokens"] <= 8


async def test_rerank_compress_takes_at_most_one_budget(client: AsyncTestClient[Litestar]) -> None:
    # none: DEFAULT_BUDGET (issue 62), the same entry as the explicit ratio 0.2 under 1,024 tokens
    none = await client.post("/v1/rerank_compress", json={"query": QUERY, "documents": DOCS})
    assert none.status_code == 200, none.text
    explicit = {"query": QUERY, "documents": DOCS, "ratio": 0.2, "max_tokens": 1024}
    same = await client.post("/v1/rerank_compress", json=explicit)
    assert (none.headers["x-ragattn-cache"], same.headers["x-ragattn-cache"]) == ("miss", "hit")
    two = await client.post("/v1/rerank_compress", json={**explicit, "threshold": 0.5})
    assert two.status_code == 400
    assert two.json()["error_type"] == "invalid_request"
    assert "send at most one budget" in two.json()["message"]


async def test_naming_the_default_method_shares_the_default_entry(
    client: AsyncTestClient[Litestar], compressor: Any
) -> None:
    payload = {"query": QUERY, "documents": DOCS, "ratio": 0.5}
    unnamed = await client.post("/v1/compress", json=payload)
    named = await client.post("/v1/compress", json={**payload, "method": compressor.method})
    assert (unnamed.headers["x-ragattn-cache"], named.headers["x-ragattn-cache"]) == ("miss", "hit")
    assert named.json()["method"] == unnamed.json()["method"] == compressor.method
    other = await client.post("/v1/compress", json={**payload, "method": "focal"})
    assert other.headers["x-ragattn-cache"] == "miss"
    assert other.json()["method"] == "focal"


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/rerank_compress"])
async def test_an_unknown_compress_method_is_a_400_naming_the_valid_ones(
    client: AsyncTestClient[Litestar], route: str
) -> None:
    from ragattn.compress import METHODS

    payload = {"query": QUERY, "documents": DOCS, "ratio": 0.5, "method": ""}
    resp = await client.post(route, json=payload)
    assert resp.status_code == 400, resp.text
    assert resp.json() == {
        "error_type": "invalid_request",
        "message": f"unknown compress method ''; valid: {', '.join(METHODS)}",
    }
