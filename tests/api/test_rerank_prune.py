"""``prune`` on the rerank routes (issue 43, item 3), over real HTTP with the real lifespan and
the packaged proxy's real forward passes.

Without the field the routes answer today's bytes: the body is compared with one encoded by a
frozen copy of the wire structs as they were before the field existed. With it, each result's kept
spans slice back to its document's text, ``pruned_text`` is made of those substrings, and ranking
and pruning equal one in-process ``Compressor.rerank_and_compress`` call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.client import AsyncClient
from ragattn.types import Budget, Document

pytestmark = pytest.mark.anyio

RERANK_ROUTES = ["/v1/rerank", "/v2/rerank", "/rerank"]
QUERY = "What is the capital of France?"
DOCS = [
    "Bananas are a yellow fruit rich in potassium. They grow in the tropics.",
    "Paris is the capital and largest city of France. It lies on the Seine. "
    "The city has many museums.",
    "The Rhine flows through Germany and the Netherlands. France borders Germany.",
    "Zürich 🇨🇭 is not a capital.  Bern is the Swiss capital, and Paris is France's.",
]
_ID = re.compile(rb'"id":"[0-9a-f-]{36}"')


@pytest.fixture(autouse=True)
def _needs_compressor(compressor: Any) -> None:
    if not hasattr(compressor, "rerank_and_compress"):
        pytest.fail("Compressor.rerank_and_compress is missing: prune has no engine")


def _without_id(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "id"}


def _api_version(route: str) -> str:
    return "2" if route == "/v2/rerank" else "1"


# --- (a) without the field: today's bytes -------------------------------------------------------


class _OldDocument(msgspec.Struct):
    text: str


class _OldResult(msgspec.Struct, omit_defaults=True):
    index: int
    relevance_score: float
    document: _OldDocument | None = None
    raw_score: float | None = None


class _OldVersion(msgspec.Struct):
    version: str


class _OldBilled(msgspec.Struct):
    search_units: int
    input_tokens: int


class _OldMeta(msgspec.Struct):
    api_version: _OldVersion
    billed_units: _OldBilled
    warnings: list[str]


class _OldResponse(msgspec.Struct, omit_defaults=True):
    """The rerank response's wire structs as they were before ``prune`` (frozen here)."""

    id: str
    results: list[_OldResult]
    meta: _OldMeta
    model: str
    method: str | None = None


def _old_body(
    service: Any, payload: dict[str, Any], route: str, reranker: Any, notes: list[str]
) -> bytes:
    """Today's body for ``payload``, from the library and the frozen structs (``id`` blanked)."""
    docs = [d if isinstance(d, str) else d["text"] for d in payload["documents"]]
    checked = service.limits.check(
        payload["query"],
        [Document(text=t) for t in docs],
        truncate_to=payload.get("max_tokens_per_doc"),
    )
    top_n = payload.get("top_n")
    ranked = reranker.rerank(
        payload["query"],
        list(checked.documents),
        top_n=None if top_n is None else min(top_n, len(docs)),
    )
    n_docs = max((r.index for r in ranked), default=-1) + 1
    back = bool(payload.get("return_documents"))
    raw = bool(payload.get("raw_scores"))
    body = _OldResponse(
        id="-",
        results=[
            _OldResult(
                index=r.index,
                relevance_score=r.relevance_score,
                document=_OldDocument(text=r.document.text) if back else None,
                raw_score=r.raw_score if raw else None,
            )
            for r in ranked
        ],
        meta=_OldMeta(
            api_version=_OldVersion(version=_api_version(route)),
            billed_units=_OldBilled(
                search_units=max(1, math.ceil(n_docs / 100)),
                input_tokens=checked.input_tokens,
            ),
            warnings=[*notes, *checked.warnings, *ranked.warnings],
        ),
        model=service.model_name,
    )
    return msgspec.json.encode(body)


WITHOUT_PRUNE: list[tuple[dict[str, Any], list[str]]] = [
    ({"model": "rerank-v3.5", "query": QUERY, "documents": DOCS[:3]}, []),
    (
        {
            "query": QUERY,
            "documents": DOCS,
            "top_n": 2,
            "return_documents": True,
            "raw_scores": True,
            "rank_fields": ["text"],
        },
        [],
    ),
    (
        {
            "query": QUERY,
            "documents": ["Paris is in France. " * 30, DOCS[0]],
            "max_tokens_per_doc": 8,
        },
        [],
    ),
    ({"query": QUERY, "documents": DOCS[:2], "colour": "red"}, ["unknown field 'colour' ignored"]),
]


@pytest.mark.parametrize("route", RERANK_ROUTES)
async def test_without_prune_the_body_is_todays_byte_for_byte(
    make_app: Callable[..., Litestar], reranker: Any, route: str
) -> None:
    app = make_app()
    async with AsyncTestClient(app=app) as c:
        for payload, notes in WITHOUT_PRUNE:
            for cache in ("miss", "hit"):
                resp = await c.post(route, json=payload)
                assert resp.status_code == 200, resp.text
                assert resp.headers["x-ragattn-cache"] == cache
                got = _ID.sub(b'"id":"-"', resp.content)
                assert got == _old_body(app.state.service, payload, route, reranker, notes)
                body = resp.json()
                assert list(body) == ["id", "results", "meta", "model"]
                assert list(body["meta"]) == ["api_version", "billed_units", "warnings"]
                keys = ["index", "relevance_score"]
                keys += ["document"] if payload.get("return_documents") else []
                keys += ["raw_score"] if payload.get("raw_scores") else []
                assert all(list(r) == keys for r in body["results"])


async def test_prune_null_is_the_same_as_no_prune(client: AsyncTestClient[Litestar]) -> None:
    payload = {"query": QUERY, "documents": DOCS[:3], "top_n": 2}
    plain = await client.post("/v2/rerank", json=payload)
    null = await client.post("/v2/rerank", json={**payload, "prune": None})
    assert null.status_code == 200, null.text
    assert null.headers["x-ragattn-cache"] == "hit"  # one request, one entry
    assert _ID.sub(b"", null.content) == _ID.sub(b"", plain.content)


# --- (b) with the field: spans, pruned text, order, top_n -----------------------------------------


def _trailing_space(text: str, end: int) -> str:
    n = end
    while n < len(text) and text[n].isspace():
        n += 1
    return text[end:n]


def _check_pruned_result(result: dict[str, Any], source: str) -> None:
    """Each span is ``source[start:end]``; ``pruned_text`` is those substrings in document order,
    each with the whitespace that follows it in ``source``, right-stripped."""
    spans = result["kept_spans"]
    assert [s["start"] for s in spans] == sorted(s["start"] for s in spans)
    for span in spans:
        assert 0 <= span["start"] < span["end"] <= len(source)
        assert source[span["start"] : span["end"]] == span["text"]
        assert 0.0 <= span["score"] <= 1.0
    rebuilt = "".join(
        source[s["start"] : s["end"]] + _trailing_space(source, s["end"]) for s in spans
    )
    assert result["pruned_text"] == rebuilt.rstrip()


@pytest.mark.parametrize("route", RERANK_ROUTES)
async def test_prune_ranks_and_prunes_from_one_compressor_call(
    client: AsyncTestClient[Litestar], compressor: Any, route: str
) -> None:
    payload = {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS, "prune": {"ratio": 0.4}}
    resp = await client.post(route, json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    ranked, pruned = compressor.rerank_and_compress(QUERY, DOCS, ratio=0.4)
    assert list(body) == ["id", "results", "meta", "model", "method"]
    assert body["method"] == ranked.method  # the method that ranked, e.g. sentinel:document-probe
    assert body["method"].startswith(f"{compressor.method}:")
    assert list(body["meta"]) == [
        "api_version",
        "billed_units",
        "warnings",
        "pruning",
        "stage_seconds",
    ]
    assert body["meta"]["api_version"] == {"version": _api_version(route)}
    assert body["meta"]["pruning"] == {
        "origin_tokens": pruned.origin_tokens,
        "compressed_tokens": pruned.compressed_tokens,
        "ratio": pytest.approx(pruned.ratio),
        "tokenizer": pruned.tokenizer,
    }
    assert body["meta"]["pruning"]["compressed_tokens"] <= math.floor(0.4 * pruned.origin_tokens)
    # Best first, every document once (Cohere's order on every route, /v2/rerank included).
    assert [r["index"] for r in body["results"]] == [r.index for r in ranked]
    assert sorted(r["index"] for r in body["results"]) == list(range(len(DOCS)))
    scores = [r["relevance_score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    by_index = {d.index: d for d in pruned.documents}
    for got, want in zip(body["results"], ranked, strict=True):
        assert list(got) == ["index", "relevance_score", "pruned_text", "kept_spans"]
        assert got["relevance_score"] == pytest.approx(want.relevance_score, abs=1e-6)
        _check_pruned_result(got, DOCS[got["index"]])
        assert got["pruned_text"] == by_index[got["index"]].text
        assert [(s["start"], s["end"]) for s in got["kept_spans"]] == [
            (s.start, s.end) for s in by_index[got["index"]].kept_spans
        ]
    assert any(r["kept_spans"] for r in body["results"])


async def test_prune_keeps_top_n_return_documents_and_raw_scores(
    client: AsyncTestClient[Litestar], compressor: Any
) -> None:
    docs = [{"text": t, "id": f"d{i}"} for i, t in enumerate(DOCS)]
    payload = {
        "query": QUERY,
        "documents": docs,
        "top_n": 2,
        "return_documents": True,
        "raw_scores": True,
        "rank_fields": ["text"],
        "prune": {"target_tokens": 24},
    }
    resp = await client.post("/v2/rerank", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    ranked, pruned = compressor.rerank_and_compress(QUERY, DOCS, top_n=2, target_tokens=24)
    assert [r["index"] for r in body["results"]] == [r.index for r in ranked]
    assert len(body["results"]) == 2
    for got, want in zip(body["results"], ranked, strict=True):
        keys = ["index", "relevance_score", "document", "raw_score", "pruned_text", "kept_spans"]
        assert list(got) == keys
        assert got["document"] == {"text": DOCS[got["index"]]}
        assert got["raw_score"] == pytest.approx(want.raw_score, abs=1e-6)
        _check_pruned_result(got, DOCS[got["index"]])
    # One budget across the returned results only: the other documents are neither counted nor
    # pruned.
    pruning = body["meta"]["pruning"]
    assert pruning["origin_tokens"] == pruned.origin_tokens
    assert pruning["compressed_tokens"] == pruned.compressed_tokens <= 24


async def test_prune_with_max_tokens_per_doc_indexes_the_text_as_sent(
    client: AsyncTestClient[Litestar],
) -> None:
    long_doc = "Paris is the capital of France. The Seine crosses it. " * 20
    payload = {
        "query": QUERY,
        "texts": [long_doc, DOCS[0]],
        "max_tokens_per_doc": 24,
        "prune": {"threshold": 0.0},
    }
    resp = await client.post("/rerank", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    warnings = body["meta"]["warnings"]
    assert any(w.startswith("documents[0] truncated from ") for w in warnings), warnings
    sources = [long_doc, DOCS[0]]
    for result in body["results"]:
        _check_pruned_result(result, sources[result["index"]])
    first = next(r for r in body["results"] if r["index"] == 0)
    # threshold 0 keeps every sentence of what was read: the truncated prefix, never past it.
    assert first["kept_spans"] and first["kept_spans"][-1]["end"] < len(long_doc)


# --- (c) bad input: 4xx with a stable error_type ------------------------------------------------

BAD_PRUNE: list[tuple[Any, str]] = [
    ({"ratio": 0.2, "target_tokens": 10}, "send at most one budget in 'prune'"),
    ({"ratio": 0.2, "threshold": 0.5}, "send at most one budget in 'prune'"),
    ({"ratio": 0}, "`$.prune.ratio`"),
    ({"ratio": 1.5}, "`$.prune.ratio`"),
    ({"ratio": -0.2}, "`$.prune.ratio`"),
    ({"ratio": "0.2"}, "`$.prune.ratio`"),
    ({"target_tokens": 0}, "`$.prune.target_tokens`"),
    ({"target_tokens": -5}, "`$.prune.target_tokens`"),
    ({"target_tokens": 2.5}, "`$.prune.target_tokens`"),
    ({"target_tokens": "64"}, "`$.prune.target_tokens`"),
    ({"target_tokens": True}, "`$.prune.target_tokens`"),
    ({"threshold": 1.5}, "`$.prune.threshold`"),
    (
        {"ratio": 0.2, "keep_order": False},
        "'prune' has no field 'keep_order'; its fields are ratio, target_tokens, threshold, "
        "max_tokens",
    ),
    ({"target_tokens": 10, "max_tokens": 64}, "max_tokens is the token ceiling of a ratio"),
    ({"threshold": 0.5, "max_tokens": 64}, "send it with ratio, not with threshold"),
    ({"ratio": 0.2, "max_tokens": 0}, "`$.prune.max_tokens`"),
    ({"ratio": 0.2, "max_tokens": True}, "`$.prune.max_tokens`"),
    ({"ratio": 0.2, "max_tokens": 2.5}, "`$.prune.max_tokens`"),
    (0.2, "`$.prune`"),
    ("ratio", "`$.prune`"),
    ([{"ratio": 0.2}], "`$.prune`"),
]


@pytest.mark.parametrize("route", RERANK_ROUTES)
@pytest.mark.parametrize(("prune", "fragment"), BAD_PRUNE)
async def test_a_bad_prune_is_a_400_invalid_request(
    client: AsyncTestClient[Litestar], route: str, prune: Any, fragment: str
) -> None:
    resp = await client.post(route, json={"query": QUERY, "documents": DOCS, "prune": prune})
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert list(body) == ["error_type", "message"]
    assert body["error_type"] == "invalid_request"
    assert fragment in body["message"]


@pytest.mark.parametrize("route", RERANK_ROUTES)
async def test_prune_with_method_is_a_400(client: AsyncTestClient[Litestar], route: str) -> None:
    payload = {"query": QUERY, "documents": DOCS, "prune": {"ratio": 0.4}, "method": "minilm"}
    resp = await client.post(route, json=payload)
    assert resp.status_code == 400, resp.text
    assert resp.json() == {
        "error_type": "invalid_request",
        "message": "send 'prune' or 'method', not both: with 'prune' the compressor's one read "
        "ranks and prunes (the response's 'method' names it)",
    }


@pytest.mark.parametrize(
    ("route", "payload"),
    [
        ("/v1/compress", {"query": QUERY, "documents": DOCS, "ratio": 0.5}),
        ("/v1/rerank_compress", {"query": QUERY, "documents": DOCS, "ratio": 0.5}),
    ],
)
async def test_prune_on_a_route_without_it_is_a_400_not_ignored(
    client: AsyncTestClient[Litestar], route: str, payload: dict[str, Any]
) -> None:
    resp = await client.post(route, json={**payload, "prune": {"ratio": 0.5}})
    assert resp.status_code == 400, resp.text
    assert resp.json() == {
        "error_type": "invalid_request",
        "message": "this route does not take 'prune'; it is a field of /v1/rerank, /v2/rerank "
        "and /rerank (on /v1/compress and /v1/rerank_compress send the budget, ratio, "
        "target_tokens or threshold, at the top level)",
    }
    # An unknown field elsewhere in the body is still only a warning (Cohere-compatible).
    nested = {**payload, "documents": [{"text": DOCS[0], "prune": 1}]}
    ok = await client.post(route, json=nested)
    assert ok.status_code == 200, ok.text


async def test_the_openapi_document_states_the_prune_rules(
    client: AsyncTestClient[Litestar],
) -> None:
    import jsonschema_rs

    spec = (await client.get("/schema/openapi.json")).json()
    schema = {"$ref": "#/components/schemas/RerankRequest", "components": spec["components"]}
    valid = jsonschema_rs.validator_for(schema)
    base = {"query": "q", "documents": ["a"]}
    assert valid.is_valid({**base, "prune": {"ratio": 0.5}})
    assert valid.is_valid({**base, "prune": {"target_tokens": 3}, "top_n": 1})
    assert valid.is_valid({**base, "prune": None, "method": "minilm"})
    for prune, _ in BAD_PRUNE:
        assert not valid.is_valid({**base, "prune": prune}), prune
    assert not valid.is_valid({**base, "prune": {"ratio": 0.5}, "method": "minilm"})
    results = spec["components"]["schemas"]["RerankResultOut"]["properties"]
    assert {"pruned_text", "kept_spans"} <= set(results)
    assert "pruning" in spec["components"]["schemas"]["RerankMeta"]["properties"]


# --- (d) the cache never mixes pruned and unpruned answers ---------------------------------------


async def test_pruned_and_unpruned_calls_never_share_a_cache_entry(
    client: AsyncTestClient[Litestar],
) -> None:
    payload = {"model": "m", "query": QUERY, "documents": DOCS, "top_n": 3}

    async def call(extra: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        resp = await client.post("/v2/rerank", json={**payload, **extra})
        assert resp.status_code == 200, resp.text
        return str(resp.headers["x-ragattn-cache"]), resp.json()

    plain_cache, plain = await call({})
    pruned_cache, pruned = await call({"prune": {"ratio": 0.4}})
    assert (plain_cache, pruned_cache) == ("miss", "miss")
    again_cache, again = await call({"prune": {"ratio": 0.4}})
    assert again_cache == "hit"
    pruned["meta"].pop("stage_seconds")  # the fresh answer's own seconds; a hit claims none
    assert _without_id(again) == _without_id(pruned)  # cached equals fresh
    plain_again_cache, plain_again = await call({})
    assert plain_again_cache == "hit"
    assert _without_id(plain_again) == _without_id(plain)
    assert all("pruned_text" not in r for r in plain_again["results"])
    assert "method" not in plain_again and "pruning" not in plain_again["meta"]
    # Another budget, or the same budget in other units, is another answer.
    assert (await call({"prune": {"ratio": 0.6}}))[0] == "miss"
    assert (await call({"prune": {"target_tokens": 20}}))[0] == "miss"
    # a ratio's ceiling is another budget: its own entry
    capped_cache, capped = await call({"prune": {"ratio": 0.4, "max_tokens": 8}})
    assert capped_cache == "miss"
    assert capped["meta"]["pruning"]["compressed_tokens"] <= 8
    assert pruned["meta"]["pruning"]["compressed_tokens"] > 8
    assert (await call({"prune": {"ratio": 0.4}, "top_n": 2}))[0] == "miss"


# --- the SDK ------------------------------------------------------------------------------------


async def test_the_async_client_carries_pruned_text_and_spans(
    make_app: Callable[..., Litestar], compressor: Any
) -> None:
    app = make_app()
    async with AsyncTestClient(app=app):
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://testserver", transport=transport) as sdk:
            plain = await sdk.rerank(QUERY, DOCS, top_n=2)
            pruned = await sdk.rerank(QUERY, DOCS, top_n=2, prune={"ratio": 0.4})
            same = await sdk.rerank(QUERY, DOCS, top_n=2, prune=Budget(kind="ratio", value=0.4))
    assert plain.method == ""
    assert all(r.pruned_text is None and r.kept_spans == () for r in plain)
    assert all(
        set(r.to_dict()) == {"index", "relevance_score", "raw_score", "document"} for r in plain
    )
    ranked, compressed = compressor.rerank_and_compress(QUERY, DOCS, top_n=2, ratio=0.4)
    assert pruned.method == ranked.method
    assert [r.index for r in pruned] == [r.index for r in ranked]
    texts = {d.index: d.text for d in compressed.documents}
    for result in pruned:
        assert result.pruned_text == texts[result.index]
        assert result.document.text == DOCS[result.index]
        for span in result.kept_spans:
            assert span.doc_index == result.index
            assert result.document.text[span.start : span.end] == span.text
        assert "pruned_text" in result.to_dict()
    assert [(r.index, r.pruned_text) for r in same] == [(r.index, r.pruned_text) for r in pruned]
