"""RedisCache against a real redis-server: the session's (``RAGATTN_TEST_REDIS_URL``, which
scripts/test.sh starts, else a private one) and private ones the fault tests fill or stop."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ragattn.cache import RedisCache

pytestmark = [pytest.mark.redis, pytest.mark.anyio]


@pytest.fixture
async def cache(redis_url: str) -> AsyncIterator[RedisCache]:
    c = RedisCache(redis_url, ttl_s=30, timeout_s=0.5, cooldown_s=0.2)
    yield c
    await c.close()


def _key() -> str:
    return f"ragattn:test:{uuid.uuid4().hex}"


async def test_roundtrip_sets_a_ttl(cache: RedisCache) -> None:
    key = _key()
    assert await cache.get(key) is None
    await cache.set(key, b"\x00payload\xff")
    assert await cache.get(key) == b"\x00payload\xff"
    ttl = await cache._client.ttl(key)
    assert 0 < ttl <= 30
    assert cache.stats.snapshot() == {"hits": 1, "misses": 1, "errors": 0, "sets": 1}
    assert await cache.ping()


async def test_unreachable_redis_is_a_counted_miss() -> None:
    c = RedisCache("redis://127.0.0.1:1/0", ttl_s=30, timeout_s=0.2, cooldown_s=60)
    await c.set("k", b"v")
    assert await c.get("k") is None
    assert await c.get("k") is None
    assert c.stats.errors >= 1
    assert c.stats.misses == 2
    assert not await c.ping()
    await c.close()


async def test_out_of_memory_is_a_miss_not_an_error(redis_server: Callable[[], Any]) -> None:
    """A full ``noeviction`` Redis raises OutOfMemoryError, a ResponseError, not ConnectionError."""
    server = redis_server()  # private: this test fills it
    cache = RedisCache(server.url, ttl_s=30, timeout_s=0.5, cooldown_s=0.2)
    key = _key()
    assert server.cli("config", "set", "maxmemory-policy", "noeviction") == "OK"
    assert server.cli("config", "set", "maxmemory", "1") == "OK"
    await cache.set(key, b"x" * 1000)
    assert cache.stats.errors == 1
    assert cache.stats.sets == 0
    assert server.cli("config", "set", "maxmemory", "0") == "OK"
    time.sleep(0.25)  # past the cool-down
    await cache.set(key, b"ok")
    assert await cache.get(key) == b"ok"
    await cache.close()


async def test_redis_stopped_mid_use_is_a_counted_miss(redis_server: Callable[[], Any]) -> None:
    server = redis_server()  # private: this test stops it
    c = RedisCache(server.url, ttl_s=30, timeout_s=0.2, cooldown_s=0.1)
    await c.set("k", b"v")
    assert await c.get("k") == b"v"
    server.cli("shutdown", "nosave")
    time.sleep(0.1)
    assert await c.get("k") is None
    assert c.stats.errors >= 1
    await c.close()
