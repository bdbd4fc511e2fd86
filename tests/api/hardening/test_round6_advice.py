"""Issue 59 §1: advice that works when followed.

A 413 that tells the caller what to send instead is followed literally, on every route with
documents, on a real server over HTTP: the requests it advises are answered (200), never refused
again. Before, the per-document 413 advised ``max_tokens_per_doc`` up to the request budget, which
left no room for the query (another 413 on ``/v2/rerank``), and ``/v1/compress`` and
``/v1/rerank_compress`` ignored the field, so the same 413 came back forever. The message also
credited a per-document limit lowered to the budget to ``RAGATTN_MAX_TOKENS_PER_DOC``.

``/v1/ask`` takes no documents (it retrieves them), so none of its 413s gives such advice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SENTENCE = "Paris is the capital of France and lies on the Seine. "
BUDGET = 640
ROUTES = [
    ("/v2/rerank", {}),
    ("/v1/rerank", {}),
    ("/v1/compress", {"ratio": 0.5}),
    ("/v1/rerank_compress", {"ratio": 0.5}),
]
REFUSED = {
    # One document over the per-document limit (4096 lowered to the budget) among short ones.
    "one_long": (
        {"query": "capital?", "documents": [SENTENCE * 60, SENTENCE, SENTENCE, SENTENCE]},
        "documents[0] has",
    ),
    # Every document within the limit, over the budget together.
    "over_budget": (
        {"query": "capital?", "documents": [SENTENCE * 8] * 6},
        "the request has",
    ),
    # Over the budget because of titles: no cap fits them all, the advice splits the request.
    "titled": (
        {
            "query": "capital?",
            "documents": [{"text": "four words of text", "title": SENTENCE * 4}] * 12,
        },
        "the request has",
    ),
}


def followed(body: dict[str, Any], message: str) -> list[dict[str, Any]]:
    """The bodies a 413's advice asks for, read from its message: the same body with the advised
    ``max_tokens_per_doc``, or its documents split into consecutive parts of the advised size (each
    with the advised cap, if any). Fails when the message advises neither."""
    one = re.search(r"send max_tokens_per_doc=(\d+)", message)
    if one is not None:
        return [{**body, "max_tokens_per_doc": int(one.group(1))}]
    split = re.search(
        r"split it into (\d+) requests of (?:at most (\d+) documents|one document each)"
        r"(?:, (?:each )?with max_tokens_per_doc=(\d+))?",
        message,
    )
    assert split is not None, f"no advice to follow: {message}"
    size = int(split.group(2) or 1)
    cap = {"max_tokens_per_doc": int(split.group(3))} if split.group(3) else {}
    docs = body["documents"]
    parts = [{**body, "documents": docs[i : i + size], **cap} for i in range(0, len(docs), size)]
    assert len(parts) == int(split.group(1)), message
    return parts


def _warnings(route: str, answer: dict[str, Any]) -> list[str]:
    return answer["warnings"] if route == "/v1/compress" else answer["meta"]["warnings"]


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_following_a_413s_advice_is_answered_on_every_route(
    production_server: Callable[..., Any], case: str
) -> None:
    body, refusal = REFUSED[case]
    with production_server(cache_backend="none", max_request_tokens=BUDGET) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            for route, extra in ROUTES:
                sent = {**body, **extra}
                resp = await c.post(route, json=sent)
                assert resp.status_code == 413, (route, resp.text)
                assert resp.json()["error_type"] == "input_too_large"
                message = resp.json()["message"]
                assert message.startswith(refusal), (route, message)
                for advised in followed(sent, message):
                    answer = await c.post(route, json=advised)
                    assert answer.status_code == 200, (route, message, answer.text)
                    warned = _warnings(route, answer.json())
                    assert not any("unknown field" in w for w in warned), warned
                    if "max_tokens_per_doc" in advised and case != "titled":
                        assert any("truncated" in w for w in warned), (route, warned)


async def test_a_per_document_limit_lowered_to_the_budget_is_credited_to_it(
    production_server: Callable[..., Any],
) -> None:
    body, _ = REFUSED["one_long"]
    with production_server(cache_backend="none", max_request_tokens=BUDGET) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            resp = await c.post("/v2/rerank", json=body)
    message = resp.json()["message"]
    assert f"the limit is {BUDGET} per document" in message, message
    assert (
        f"(RAGATTN_MAX_TOKENS_PER_DOC=4096 lowered to the request budget, {BUDGET} tokens)"
        in message
    )
    advised = re.search(r"max_tokens_per_doc=(\d+)", message)
    assert advised is not None and int(advised.group(1)) < BUDGET, message


async def test_the_compress_routes_take_max_tokens_per_doc(
    production_server: Callable[..., Any],
) -> None:
    """The field is honoured (documents cut, with a warning), not ignored; it changes the
    answer, so it is part of the cache key: the same body without it is not served from the
    entry of the one with it."""
    docs = [SENTENCE * 6, SENTENCE * 2]
    with production_server(cache_backend="memory") as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            for route in ("/v1/compress", "/v1/rerank_compress"):
                plain = {"query": "capital?", "documents": docs, "ratio": 0.5}
                cut = await c.post(route, json={**plain, "max_tokens_per_doc": 8})
                assert cut.status_code == 200, cut.text
                warned = _warnings(route, cut.json())
                assert any(w.startswith("documents[0] truncated from ") for w in warned), warned
                assert any(w.startswith("documents[1] truncated from ") for w in warned), warned
                whole = await c.post(route, json=plain)
                assert whole.status_code == 200, whole.text
                assert whole.headers.get("x-ragattn-cache") != "hit"
                assert not any("truncated" in w for w in _warnings(route, whole.json()))
            schema = (await c.get("/schema/openapi.json")).json()["components"]["schemas"]
    for name in ("CompressRequest", "RerankCompressRequest", "RerankRequest"):
        described = schema[name]["properties"]["max_tokens_per_doc"].get("description", "")
        assert "title and text together" in described, (name, described)
    assert "counts with the text" in schema["DocumentIn"]["properties"]["title"]["description"]
