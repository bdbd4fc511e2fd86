"""Issue 45 §7: replicas behind one Redis share one rate limit and one cache.

Two real server processes (``python -m ragattn_api.server``) on one real Redis, each with
``RAGATTN_CACHE_BACKEND=redis``: a burst sent to both in turn is refused as one limit, not one per
replica, and an answer computed by one is a cache hit on the other. Their API keys are listed in
opposite orders: the bucket is named by the key's digest, not its position. A third test stops
Redis under an app and sees the documented fallback: the per-process limit, counted.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LIMIT = 6  # per minute: 0.1 token a second, so the burst below earns none back
DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Bananas."]


def _events(metrics: str) -> dict[str, float]:
    """``ragattn_rate_limit_events_total`` by event."""
    found = re.findall(r'^ragattn_rate_limit_events_total\{event="(\w+)"\} (\S+)$', metrics, re.M)
    return {event: float(n) for event, n in found}


def test_two_replicas_share_one_rate_limit_and_one_cache(
    spawn_server: Callable[..., Any], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    common = {"cache_backend": "redis", "redis_url": redis.url, "rate_limit_per_minute": str(LIMIT)}
    replicas = [
        spawn_server(name="replica-a", api_keys="key-one,key-two", **common),
        spawn_server(name="replica-b", api_keys="key-two,key-one", **common),
    ]
    one = {"Authorization": "Bearer key-one"}
    body = {"query": "capital of France?", "documents": DOCS}
    burst = [
        httpx.post(f"{replicas[i % 2].url}/v2/rerank", json=body, headers=one, timeout=120)
        for i in range(2 * LIMIT)
    ]
    assert [r.status_code for r in burst] == [200] * LIMIT + [429] * LIMIT
    for refused in burst[LIMIT:]:
        assert refused.json()["error_type"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 10
    # Each replica granted half: per process, each would have granted the whole limit.
    counts = [_events(httpx.get(f"{r.url}/metrics").text) for r in replicas]
    assert counts == [{"granted": LIMIT / 2, "refused": LIMIT / 2, "fallback": 0.0}] * 2

    # The other key has its own bucket; a fresh question computed on one replica...
    two = {"Authorization": "Bearer key-two"}
    fresh = {"query": f"which capital is {uuid.uuid4().hex}?", "documents": DOCS}
    computed = httpx.post(f"{replicas[0].url}/v2/rerank", json=fresh, headers=two, timeout=120)
    assert computed.status_code == 200
    assert computed.headers["x-ragattn-cache"] == "miss"
    # ...is a hit on the other, with the same answer.
    served = httpx.post(f"{replicas[1].url}/v2/rerank", json=fresh, headers=two, timeout=120)
    assert served.status_code == 200
    assert served.headers["x-ragattn-cache"] == "hit"
    assert served.json()["results"] == computed.json()["results"]


@pytest.mark.anyio
async def test_with_redis_down_each_replica_limits_per_process(
    make_app: Callable[..., Litestar], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()
    app = make_app(
        cache_backend="redis",
        redis_url=redis.url,
        redis_timeout_s=0.5,
        redis_cooldown_s=30.0,
        rate_limit_per_minute=3,
    )
    async with AsyncTestClient(app=app) as c:
        body = {"query": "capital of Italy?", "documents": DOCS}
        assert (await c.post("/v2/rerank", json=body)).status_code == 200  # one token, in Redis
        redis.stop()
        statuses = [(await c.post("/v2/rerank", json=body)).status_code for _ in range(4)]
        # Neither refused for want of Redis nor unlimited: a full per-process bucket of 3.
        assert statuses == [200, 200, 200, 429]
        assert _events((await c.get("/metrics")).text) == {
            "granted": 4.0,
            "refused": 1.0,
            "fallback": 4.0,
        }
