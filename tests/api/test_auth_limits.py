"""API keys (deny by default), rate limiting, the bounded model queue and request coalescing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

KEY = "test-key-123"
BODY = {
    "model": "m",
    "query": "capital of France?",
    "documents": ["Paris is in France.", "Rome is in Italy."],
}
PUBLIC = {"/health", "/ready", "/metrics", "/", "/demo.json", "/static/app.js"}
"""Routes served without a key: probes, and the page with its assets (they hold no data)."""


async def test_every_route_needs_a_key_except_the_allowlist(
    make_app: Callable[..., Litestar],
) -> None:
    app = make_app(api_keys=(KEY, "other-key"))
    checked: set[str] = set()
    async with AsyncTestClient(app=app) as c:
        for route in app.routes:
            if route.path.startswith("/schema"):
                continue
            path = route.path.replace("{file_path:path}", "app.js")
            for method in sorted(route.methods):
                if method in {"HEAD", "OPTIONS"}:
                    continue
                resp = await c.request(method, path)
                checked.add(f"{method} {path}")
                if path in PUBLIC:
                    assert resp.status_code == 200, path
                else:
                    assert resp.status_code == 401, (method, path)
                    assert resp.json()["error_type"] == "unauthorized"
                    assert resp.headers["www-authenticate"] == "Bearer"
    # The walk must really have covered the model routes and the probes.
    assert {
        "POST /v2/rerank",
        "POST /v1/rerank",
        "POST /rerank",
        "POST /v1/compress",
        "GET /health",
    } <= checked


async def test_keys_are_checked(make_app: Callable[..., Litestar]) -> None:
    async with AsyncTestClient(app=make_app(api_keys=(KEY,))) as c:
        wrong = await c.post("/v2/rerank", json=BODY, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.json() == {"error_type": "unauthorized", "message": "invalid API key"}
        basic = await c.post("/v2/rerank", json=BODY, headers={"Authorization": f"Basic {KEY}"})
        assert basic.status_code == 401
        ok = await c.post("/v2/rerank", json=BODY, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        assert (await c.get("/schema/openapi.json")).status_code == 200


async def test_rate_limit_is_429_with_retry_after(make_app: Callable[..., Litestar]) -> None:
    async with AsyncTestClient(app=make_app(rate_limit_per_minute=2)) as c:
        statuses = [(await c.post("/v2/rerank", json=BODY)).status_code for _ in range(2)]
        limited = await c.post("/v2/rerank", json=BODY)
        assert statuses == [200, 200]
        assert limited.status_code == 429
        assert limited.json()["error_type"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        assert (await c.get("/health")).status_code == 200  # public routes are not limited


async def test_full_queue_is_429_and_identical_requests_compute_once(
    make_app: Callable[..., Litestar], gated: Any, live_server: Any
) -> None:
    """Live server: two identical requests share one job; a different third one gets 429."""
    app = make_app(reranker=gated, queue_size=1, cache_backend="none")
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            first = asyncio.ensure_future(c.post("/v2/rerank", json=BODY))
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            twin = asyncio.ensure_future(c.post("/v2/rerank", json=BODY))
            other = await c.post("/v2/rerank", json={**BODY, "query": "capital of Italy?"})
            assert other.status_code == 429
            assert other.json()["error_type"] == "overloaded"
            assert other.headers["retry-after"] == "1"
            assert "ragattn_queue_depth 1.0" in (await c.get("/metrics")).text
            gated.gate.set()
            a, b = await first, await twin
            metrics = (await c.get("/metrics")).text
    assert a.status_code == b.status_code == 200
    assert a.json()["results"] == b.json()["results"]
    assert gated.calls == 1
    assert "ragattn_coalesced_requests_total 1.0" in metrics
    assert "ragattn_queue_rejected_total 1.0" in metrics
