"""RedisCache against a real redis-server (``RAGATTN_TEST_REDIS_URL``; scripts/test.sh starts one).

Without the variable these tests skip locally and fail in CI (``CI=true``), so a missing Redis can
never pass silently there.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ragattn.cache import RedisCache

pytestmark = [pytest.mark.redis, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _redis_url() -> str:
    url = os.environ.get("RAGATTN_TEST_REDIS_URL")
    if url:
        return url
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("RAGATTN_TEST_REDIS_URL is not set; CI must run a real redis-server")
    pytest.skip("RAGATTN_TEST_REDIS_URL is not set (start redis-server and export it)")


@pytest.fixture
async def cache() -> AsyncIterator[RedisCache]:
    c = RedisCache(_redis_url(), ttl_s=30, timeout_s=0.5, cooldown_s=0.2)
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


async def test_out_of_memory_is_a_miss_not_an_error(cache: RedisCache) -> None:
    """A full ``noeviction`` Redis raises OutOfMemoryError, a ResponseError, not ConnectionError."""
    admin = cache._client
    old = await admin.config_get("maxmemory", "maxmemory-policy")
    key = _key()
    try:
        await admin.config_set("maxmemory-policy", "noeviction")
        await admin.config_set("maxmemory", "1")
        await cache.set(key, b"x" * 1000)
        assert cache.stats.errors == 1
        assert cache.stats.sets == 0
    finally:
        await admin.config_set("maxmemory", old["maxmemory"])
        await admin.config_set("maxmemory-policy", old["maxmemory-policy"])
    time.sleep(0.25)  # past the cool-down
    await cache.set(key, b"ok")
    assert await cache.get(key) == b"ok"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    """A throwaway redis-server this test may stop; never the shared one."""
    _redis_url()  # same skip / CI-fail policy
    port = 6400 + os.getpid() % 500
    pidfile = tmp_path / "redis.pid"
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pidfile.write_text(str(proc.pid))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        ping = subprocess.run(
            ["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True
        )
        if ping.stdout.strip() == "PONG":
            break
        time.sleep(0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=5)


async def test_redis_stopped_mid_use_is_a_counted_miss(private_redis: str) -> None:
    c = RedisCache(private_redis, ttl_s=30, timeout_s=0.2, cooldown_s=0.1)
    await c.set("k", b"v")
    assert await c.get("k") == b"v"
    port = private_redis.rsplit(":", 1)[1].split("/")[0]
    subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"], capture_output=True)
    time.sleep(0.1)
    assert await c.get("k") is None
    assert c.stats.errors >= 1
    await c.close()
