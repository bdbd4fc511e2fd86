"""Issue 16 §8: a full Redis (``maxmemory`` with ``noeviction``) keeps serving cache hits.

Every SET fails with OOM, yet GETs still work: a failed write must not turn the reads off, and
``/ready`` stays ``degraded: false`` while reads succeed. After a Redis restart the stale pooled
connection is retried once, so the first request after it is a normal miss, not a bypass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = [pytest.mark.redis, pytest.mark.anyio, pytest.mark.slow]

DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Bananas."]
HOT = [f"hot question {i}?" for i in range(3)]


def _counter(metrics: str, event: str) -> float:
    prefix = f'ragattn_cache_events_total{{event="{event}"}}'
    return float(next(x for x in metrics.splitlines() if x.startswith(prefix)).split()[-1])


async def test_hits_are_served_from_a_full_redis(
    make_app: Callable[..., Litestar], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    app = make_app(cache_backend="redis", redis_url=redis.url, redis_cooldown_s=5.0)
    async with AsyncTestClient(app=app) as c:
        fresh = {}
        for q in HOT:  # cached while Redis has room
            resp = await c.post("/v2/rerank", json={"query": q, "documents": DOCS})
            assert resp.headers["x-ragattn-cache"] == "miss"
            fresh[q] = resp.json()["results"]
        # Full: no memory for anything new, and nothing may be evicted.
        used = int(redis.cli("info", "memory").split("used_memory:")[1].split()[0])
        assert redis.cli("config", "set", "maxmemory-policy", "noeviction") == "OK"
        assert redis.cli("config", "set", "maxmemory", str(used // 2)) == "OK"
        refused = await c.post("/v2/rerank", json={"query": "a new question", "documents": DOCS})
        assert refused.status_code == 200
        assert refused.headers["x-ragattn-cache"] == "miss"
        errors_after_oom = _counter((await c.get("/metrics")).text, "error")
        assert errors_after_oom >= 1  # the SET failed with OOM, counted
        # The failed write opened the write breaker only: hot keys are still hits.
        for _ in range(3):
            for q in HOT:
                resp = await c.post("/v2/rerank", json={"query": q, "documents": DOCS})
                assert resp.status_code == 200
                assert resp.headers["x-ragattn-cache"] == "hit", q
                assert resp.json()["results"] == fresh[q]
            ready = (await c.get("/ready")).json()
            assert ready["degraded"] is False
        metrics = (await c.get("/metrics")).text
        assert _counter(metrics, "hit") == 9
        assert _counter(metrics, "error") == errors_after_oom  # no read failed


async def test_a_redis_restart_costs_one_retry_not_a_bypass(
    make_app: Callable[..., Litestar], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    app = make_app(cache_backend="redis", redis_url=redis.url, redis_cooldown_s=30.0)
    async with AsyncTestClient(app=app) as c:
        body = {"query": HOT[0], "documents": DOCS}
        assert (await c.post("/v2/rerank", json=body)).headers["x-ragattn-cache"] == "miss"
        assert (await c.post("/v2/rerank", json=body)).headers["x-ragattn-cache"] == "hit"
        redis.stop()
        redis.start()  # same port, empty: the pooled connection is stale now
        after = await c.post("/v2/rerank", json=body)
        assert after.headers["x-ragattn-cache"] == "miss"
        again = await c.post("/v2/rerank", json=body)
        # Had the stale connection opened the 30 s breaker, this would be a miss too.
        assert again.headers["x-ragattn-cache"] == "hit"
        metrics = (await c.get("/metrics")).text
        assert _counter(metrics, "error") == 0
        assert (await c.get("/ready")).json()["degraded"] is False
