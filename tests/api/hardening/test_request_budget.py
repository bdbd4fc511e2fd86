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


async def _refused_on_every_model_route(c: Any, body: dict[str, Any]) -> list[str]:
    """``body`` sent to rerank, compress and rerank_compress: each a 413 ``input_too_large``;
    returns their messages."""
    messages = []
    for route, extra in (
        ("/v2/rerank", {}),
        ("/v1/compress", {"ratio": 0.5}),
        ("/v1/rerank_compress", {"ratio": 0.5}),
    ):
        resp = await c.post(route, json={**body, **extra})
        assert resp.status_code == 413, (route, resp.text)
        assert resp.json()["error_type"] == "input_too_large"
        messages.append(resp.json()["message"])
    return messages


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
            for message in await _refused_on_every_model_route(c, over):
                assert "RAGATTN_MAX_REQUEST_TOKENS" in message
                assert "the limit is 200" in message
                value = re.search(r"the request has (?:at least )?(\d+) tokens", message)
                assert value is not None and int(value.group(1)) > 200, message
            assert not held.done(), "the held request finished: the refusals proved nothing"
            gated.gate.set()
            assert (await held).status_code == 200
            # Tokens are counted after truncation: 8 of these documents are over 200 with the
            # prompt's own parts, and fit once cut to 4 tokens each.
            eight = {"query": "capital?", "documents": [SENTENCE] * 8}
            assert (await c.post("/v2/rerank", json=eight)).status_code == 413
            cut = await c.post("/v2/rerank", json={**eight, "max_tokens_per_doc": 4})
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


# --- issue 45 item 6: the default budget follows the deadline ------------------------------------


async def test_a_stated_throughput_derives_the_budget_and_a_request_over_it_is_a_413(
    make_app: Callable[..., Any],
) -> None:
    """20 tokens/s × 80 s × 0.8 = 1,280 tokens; an explicit RAGATTN_MAX_REQUEST_TOKENS wins."""
    from litestar.testing import AsyncTestClient

    over = {"query": "capital?", "documents": [SENTENCE] * 120}  # about 1,450 tokens
    under = {"query": "capital?", "documents": [SENTENCE] * 24}  # about 290 tokens
    derived = make_app(cache_backend="none", tokens_per_second=20.0, request_timeout_s=80.0)
    async with AsyncTestClient(app=derived) as c:
        assert derived.state.request_budget.tokens == 1280
        for message in await _refused_on_every_model_route(c, over):
            assert "the limit is 1280 per request (RAGATTN_MAX_REQUEST_TOKENS unset: " in message
            assert "20 tokens/s stated by RAGATTN_TOKENS_PER_SECOND" in message
        assert (await c.post("/v2/rerank", json=under)).status_code == 200
    explicit = make_app(
        cache_backend="none", tokens_per_second=20.0, request_timeout_s=80.0, max_request_tokens=200
    )
    async with AsyncTestClient(app=explicit) as c:
        resp = await c.post("/v2/rerank", json=under)
        assert resp.status_code == 413
        assert (
            "the limit is 200 per request (RAGATTN_MAX_REQUEST_TOKENS);" in resp.json()["message"]
        )


def test_unset_the_budget_is_measured_at_start_up_and_logged(spawn_server: Any) -> None:
    """The real start-up: one timed rerank_compress on the machine, the budget derived from it
    and the 5 s deadline, said in the ready log line and in the 413."""
    from ragattn.request_budget import derive_budget

    server = spawn_server(request_timeout_s="5")
    line = re.search(
        r"max_request_tokens=(\d+) \(RAGATTN_MAX_REQUEST_TOKENS unset: 0\.8 × the 5 s deadline × "
        r"(\d+) tokens/s of rerank_compress measured at start-up",
        server.text(),
    )
    assert line is not None, server.text()
    budget, tps = int(line.group(1)), int(line.group(2))
    # The log rounds the throughput to whole tokens/s; the budget is derived from the exact one.
    assert budget in {derive_budget(tps - 0.5, 5.0), derive_budget(tps + 0.5, 5.0)}
    with httpx.Client(base_url=server.url, timeout=120) as c:
        # Passages of about 120 tokens, 1.2 times the budget in all.
        over = {"query": "capital?", "documents": [SENTENCE * 10] * (budget // 100 + 1)}
        resp = c.post("/v2/rerank", json=over)
    assert resp.status_code == 413, resp.text
    assert resp.json()["error_type"] == "input_too_large"
    assert f"the limit is {budget} per request" in resp.json()["message"]
    assert "measured at start-up" in resp.json()["message"]
