"""Issue 30 §1 and §3: the work of one request is bounded before it is queued.

- A request whose tokens (query plus documents after truncation) exceed
  ``RAGATTN_MAX_REQUEST_TOKENS`` is a 413 naming the limit and the value, decided while the model
  thread is held by another job (so it was never queued behind it).
- A request's own ``max_tokens_per_doc`` can lower the fast length check's limit, never lift it: a
  huge value does not make the server tokenize a 5 MB document before refusing it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SENTENCE = "Paris is the capital of France and lies on the Seine. "
FIVE_MB = SENTENCE * 95_000


def _tokenize_jobs(metrics: str) -> float:
    """How many jobs the tokenizer thread has run (``ragattn_model_seconds{task="tokenize"}``)."""
    found = re.search(r'^ragattn_model_seconds_count\{task="tokenize"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


async def test_a_request_over_the_token_budget_is_refused_before_it_is_queued(
    production_server: Callable[..., Any], gated: Any
) -> None:
    with production_server(reranker=gated, cache_backend="none", max_request_tokens=200) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            held = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 60)
            # 8 documents of ~12 tokens each fit the per-document limit but not 200 in all once
            # there are 24 of them; the exact count is made on the tokenizer thread.
            over = {"query": "capital?", "documents": [SENTENCE] * 24}
            for route, extra in (
                ("/v2/rerank", {}),
                ("/v1/compress", {"ratio": 0.5}),
                ("/v1/rerank_compress", {"ratio": 0.5}),
            ):
                resp = await c.post(route, json={**over, **extra})
                assert resp.status_code == 413, (route, resp.text)
                body = resp.json()
                assert body["error_type"] == "input_too_large"
                assert "RAGATTN_MAX_REQUEST_TOKENS" in body["message"]
                assert "the limit is 200" in body["message"]
                value = re.search(r"the request has (?:at least )?(\d+) tokens", body["message"])
                assert value is not None and int(value.group(1)) > 200, body["message"]
            assert not held.done(), "the held request finished: the refusals proved nothing"
            gated.gate.set()
            assert (await held).status_code == 200
            # Tokens are counted after truncation: the same documents cut to 4 tokens fit.
            cut = await c.post(
                "/v2/rerank",
                json={"query": "capital?", "documents": [SENTENCE] * 24, "max_tokens_per_doc": 4},
            )
            assert cut.status_code == 200, cut.text
            assert any("truncated" in w for w in cut.json()["meta"]["warnings"])


async def test_a_large_max_tokens_per_doc_does_not_lift_the_fast_length_check(
    production_server: Callable[..., Any],
) -> None:
    with production_server(cache_backend="none", max_body_bytes=20_000_000) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            before = _tokenize_jobs((await c.get("/metrics")).text)
            for cap in (None, 4097, 1_000_000_000):
                body: dict[str, Any] = {"query": "capital?", "documents": [FIVE_MB]}
                if cap is not None:
                    body["max_tokens_per_doc"] = cap
                resp = await c.post("/v2/rerank", json=body)
                assert resp.status_code == 413, resp.text
                assert resp.json()["error_type"] == "input_too_large"
                message = resp.json()["message"]
                assert "documents[0] has more than 4096 tokens" in message, message
                assert "RAGATTN_MAX_TOKENS_PER_DOC" in message
            # Refused from its length alone: the tokenizer thread never saw the 5 MB document.
            assert _tokenize_jobs((await c.get("/metrics")).text) == before
            # A cap at or below the server's limit still truncates instead of refusing.
            resp = await c.post(
                "/v2/rerank",
                json={
                    "query": "capital?",
                    "documents": [FIVE_MB[:20_000]],
                    "max_tokens_per_doc": 64,
                },
            )
            assert resp.status_code == 200, resp.text
            assert any("truncated" in w for w in resp.json()["meta"]["warnings"])
