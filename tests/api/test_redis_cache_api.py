"""The service with ``cache_backend=redis`` on a real redis-server, one stopped mid-test."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = [pytest.mark.redis, pytest.mark.anyio]

DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy."]


def _body() -> dict[str, object]:
    # A fresh query per test run, so entries left in a shared Redis never turn a miss into a hit.
    return {
        "model": "m",
        "query": f"capital of France? ({uuid.uuid4().hex[:8]})",
        "documents": DOCS,
    }


def _strip(body: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in body.items() if k != "id"}


async def test_redis_hit_equals_fresh_across_app_instances(
    make_app: Callable[..., Litestar], redis_url: str
) -> None:
    body = _body()
    async with AsyncTestClient(app=make_app(cache_backend="redis", redis_url=redis_url)) as c:
        fresh = await c.post("/v2/rerank", json=body)
        assert fresh.status_code == 200
        assert fresh.headers["x-ragattn-cache"] == "miss"
    # A second process-like instance (new app, new client) reads the first one's entry.
    async with AsyncTestClient(app=make_app(cache_backend="redis", redis_url=redis_url)) as c:
        cached = await c.post("/v2/rerank", json=body)
        assert cached.headers["x-ragattn-cache"] == "hit"
        assert _strip(cached.json()) == _strip(fresh.json())
        assert (await c.get("/ready")).json()["cache"] == "redis"


async def test_redis_stopped_mid_test_requests_still_succeed(
    make_app: Callable[..., Litestar], redis_server: Callable[[], Any]
) -> None:
    server = redis_server()  # private: this test stops it, never the shared one
    body = _body()
    async with AsyncTestClient(
        app=make_app(cache_backend="redis", redis_url=server.url, redis_timeout_s=0.2)
    ) as c:
        first = await c.post("/v2/rerank", json=body)
        assert (await c.post("/v2/rerank", json=body)).headers["x-ragattn-cache"] == "hit"
        server.cli("shutdown", "nosave")
        time.sleep(0.1)
        after = await c.post("/v2/rerank", json=body)
        again = await c.post("/v2/rerank", json={**body, "documents": DOCS[::-1]})
        metrics = (await c.get("/metrics")).text
    assert after.status_code == 200 and again.status_code == 200
    assert after.headers["x-ragattn-cache"] == "miss"
    assert _strip(after.json()) == _strip(first.json())
    error_line = next(
        line
        for line in metrics.splitlines()
        if line.startswith('ragattn_cache_events_total{event="error"}')
    )
    assert float(error_line.split()[-1]) >= 1
