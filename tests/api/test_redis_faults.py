"""The service with a Redis cache under Redis faults: stopped, paused, full, restarted under load.

Each test starts its own ``redis-server`` (the ``redis_server`` factory in tests/conftest.py) on a
free loopback port, which it may stop, pause or restart; the shared test Redis is never touched.
Pass criteria: no failed request, every body equal to the no-cache body, cache errors counted in
the metrics, ``/ready`` 200 with ``degraded`` while Redis is unusable, and cache hits again once
Redis is back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.cache import RedisCache

pytestmark = [pytest.mark.redis, pytest.mark.anyio]

DOCS = [
    "Paris is the capital of France.",
    "Rome is the capital of Italy.",
    "Bananas are rich in potassium.",
]
QUERIES = [f"capital question {i}?" for i in range(6)]
COOLDOWN_S = 0.3


@pytest.fixture
def redis_proc(redis_server: Callable[[], Any]) -> Any:
    """A private redis-server (tests/conftest.py) this test may stop, pause, fill and restart."""
    return redis_server()


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "id"}


def _errors(metrics: str) -> float:
    line = next(
        x for x in metrics.splitlines() if x.startswith('ragattn_cache_events_total{event="error"}')
    )
    return float(line.split()[-1])


@pytest.fixture
async def baseline(make_app: Callable[..., Litestar]) -> dict[str, dict[str, Any]]:
    """The no-cache body of every query."""
    async with AsyncTestClient(app=make_app(cache_backend="none")) as c:
        out = {}
        for q in QUERIES:
            resp = await c.post("/v2/rerank", json={"query": q, "documents": DOCS})
            assert resp.status_code == 200
            out[q] = _strip(resp.json())
        return out


def _redis_app(make_app: Callable[..., Litestar], url: str) -> Litestar:
    return make_app(
        cache_backend="redis", redis_url=url, redis_timeout_s=0.2, redis_cooldown_s=COOLDOWN_S
    )


async def _serve_all(c: Any, baseline: dict[str, Any]) -> list[str]:
    """Every query once; each must be a 200 equal to the no-cache body. Returns cache headers."""
    headers = []
    for q in QUERIES:
        resp = await c.post("/v2/rerank", json={"query": q, "documents": DOCS})
        assert resp.status_code == 200, resp.text
        assert _strip(resp.json()) == baseline[q]
        headers.append(resp.headers["x-ragattn-cache"])
    return headers


async def _ready(c: Any) -> dict[str, Any]:
    resp = await c.get("/ready")
    assert resp.status_code == 200
    return resp.json()


async def _recovered(c: Any, baseline: dict[str, Any]) -> None:
    """After the breaker's cool-down, entries are written and read again."""
    await asyncio.sleep(COOLDOWN_S + 0.1)
    assert (await _ready(c))["degraded"] is False
    await _serve_all(c, baseline)  # refills the cache
    assert await _serve_all(c, baseline) == ["hit"] * len(QUERIES)


@pytest.mark.slow
async def test_stopped_and_restarted_redis(
    make_app: Callable[..., Litestar], redis_proc: Any, baseline: dict[str, Any]
) -> None:
    async with AsyncTestClient(app=_redis_app(make_app, redis_proc.url)) as c:
        assert await _serve_all(c, baseline) == ["miss"] * len(QUERIES)
        assert await _serve_all(c, baseline) == ["hit"] * len(QUERIES)
        redis_proc.stop()
        assert await _serve_all(c, baseline) == ["miss"] * len(QUERIES)
        ready = await _ready(c)
        assert ready["degraded"] is True and ready["cache"] == "redis"
        assert _errors((await c.get("/metrics")).text) >= 1
        redis_proc.start()  # empty: nothing was saved
        await _recovered(c, baseline)


@pytest.mark.slow
async def test_paused_redis_times_out_into_misses(
    make_app: Callable[..., Litestar], redis_proc: Any, baseline: dict[str, Any]
) -> None:
    async with AsyncTestClient(app=_redis_app(make_app, redis_proc.url)) as c:
        await _serve_all(c, baseline)
        assert redis_proc.cli("client", "pause", "3000", "ALL") == "OK"
        assert await _serve_all(c, baseline) == ["miss"] * len(QUERIES)
        assert (await _ready(c))["degraded"] is True
        errors = _errors((await c.get("/metrics")).text)
        assert errors >= 1
        redis_proc.cli("client", "unpause")
        await _recovered(c, baseline)


@pytest.mark.slow
async def test_full_noeviction_redis_is_a_counted_error(
    make_app: Callable[..., Litestar], redis_proc: Any, baseline: dict[str, Any]
) -> None:
    redis_proc.cli("config", "set", "maxmemory-policy", "noeviction")
    redis_proc.cli("config", "set", "maxmemory", "1")
    async with AsyncTestClient(app=_redis_app(make_app, redis_proc.url)) as c:
        assert await _serve_all(c, baseline) == ["miss"] * len(QUERIES)
        metrics = (await c.get("/metrics")).text
        assert _errors(metrics) >= 1  # SET refused with OOM
        assert redis_proc.cli("dbsize") == "0"
        redis_proc.cli("config", "set", "maxmemory", "0")
        await _recovered(c, baseline)


@pytest.mark.slow
async def test_restart_under_load_fails_no_request(
    make_app: Callable[..., Litestar],
    redis_proc: Any,
    baseline: dict[str, Any],
    live_server: Any,
) -> None:
    """Four concurrent clients on a live server while Redis is stopped and started again."""
    with live_server(_redis_app(make_app, redis_proc.url)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            await _serve_all(c, baseline)
            stop = asyncio.Event()
            served: list[str] = []

            async def load(worker: int) -> None:
                i = worker
                while not stop.is_set():
                    q = QUERIES[i % len(QUERIES)]
                    resp = await c.post("/v2/rerank", json={"query": q, "documents": DOCS})
                    assert resp.status_code == 200, resp.text
                    assert _strip(resp.json()) == baseline[q]
                    served.append(resp.headers["x-ragattn-cache"])
                    i += 1

            clients = [asyncio.ensure_future(load(w)) for w in range(4)]
            await asyncio.sleep(0.5)
            await asyncio.to_thread(redis_proc.stop)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(redis_proc.start)
            await asyncio.sleep(COOLDOWN_S + 1.0)
            stop.set()
            await asyncio.gather(*clients)  # a failed assertion in any client fails here
            assert len(served) > 20 and "miss" in served
            assert _errors((await c.get("/metrics")).text) >= 1
            await _recovered(c, baseline)


def test_every_redis_error_class_is_caught() -> None:
    """Timeouts, OOM/other ResponseErrors, BusyLoading and connection errors are all misses."""
    from redis import exceptions as rx

    caught = RedisCache("redis://127.0.0.1:1/0")._errors
    for cls in (
        rx.ConnectionError,
        rx.TimeoutError,
        rx.OutOfMemoryError,
        rx.ResponseError,
        rx.BusyLoadingError,
        rx.ReadOnlyError,
        TimeoutError,
        ConnectionRefusedError,
    ):
        assert issubclass(cls, caught), cls
