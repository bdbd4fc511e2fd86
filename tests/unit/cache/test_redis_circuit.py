"""One circuit per Redis (issue "Hardening, round five" §3): the cache and the rate limit share it.

A private ``redis-server`` is paused with SIGSTOP (hung, not down: connections are accepted and
commands never answered). The first call that waits out the timeout opens the circuit; every later
call, the cache's and the rate limit's alike, is bypassed without touching Redis until the cooldown
ends; then one probe per cooldown goes through, and after SIGCONT the first probe closes it. An
error Redis answers with (a full ``noeviction`` Redis refusing a SET) leaves it closed. No model is
loaded; nothing is timed: the circuit's own counters and Redis's own key count are the evidence.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ragattn.cache import RedisCache, RedisCircuit
from ragattn_api.rate_limit import RedisRateLimiter

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

TIMEOUT_S = 0.3
COOLDOWN_S = 0.6


@contextmanager
def hung(server: Any) -> Iterator[None]:
    """``server`` stopped with SIGSTOP for the block; resumed however the block ends."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def test_one_circuit_per_redis_url_and_cooldown() -> None:
    url = f"redis://127.0.0.1:1/{uuid.uuid4().int % 16}"
    cache = RedisCache(url, cooldown_s=7.0)
    limiter = RedisRateLimiter(5, url, cooldown_s=7.0)
    assert cache.circuit is limiter.circuit is RedisCircuit.of(url, cooldown_s=7.0)
    assert RedisCircuit.of("redis://127.0.0.1:2/0", cooldown_s=7.0) is not cache.circuit


async def test_a_hung_redis_costs_one_timeout_then_nothing_until_it_answers(
    redis_server: Callable[[], Any],
) -> None:
    server = redis_server()
    cache = RedisCache(server.url, ttl_s=60, timeout_s=TIMEOUT_S, cooldown_s=COOLDOWN_S)
    limiter = RedisRateLimiter(600, server.url, timeout_s=TIMEOUT_S, cooldown_s=COOLDOWN_S)
    circuit = cache.circuit
    assert limiter.circuit is circuit
    key = f"ragattn:test:{uuid.uuid4().hex}"
    try:
        await limiter.acquire("client")
        await cache.set(key, b"before")
        assert (circuit.failures, circuit.bypassed, limiter.fallbacks) == (0, 0, 0)
        with hung(server):
            # One request: the limiter waits out the timeout; the cache read and write that
            # follow are bypassed instead of waiting out two more.
            await limiter.acquire("client")
            assert await cache.get(key) is None
            await cache.set(key, b"during")
            assert (circuit.failures, circuit.bypassed, circuit.is_open) == (1, 2, True)
            # More requests inside the cooldown: nothing goes to Redis.
            for _ in range(5):
                await limiter.acquire("client")
                assert await cache.get(key) is None
            assert (circuit.failures, circuit.bypassed) == (1, 12)
            assert not await cache.healthy()  # answered at once: the circuit is open
            assert limiter.fallbacks == 6
            # After the cooldown one call probes (and times out); the others stay bypassed.
            await asyncio.sleep(COOLDOWN_S)
            results = await asyncio.gather(*(cache.get(key) for _ in range(4)))
            assert results == [None] * 4
            assert (circuit.failures, circuit.bypassed) == (2, 16)
        assert cache.stats.errors == 1 + 5 + 1 + 3  # every bypassed or failed lookup is counted
        await asyncio.sleep(COOLDOWN_S)
        # Resumed: the first call after the cooldown probes, succeeds and closes the circuit.
        assert await cache.get(key) == b"before"  # the write during the hang never reached it
        assert not circuit.is_open
        await limiter.acquire("client")
        assert limiter.fallbacks == 6  # decided in Redis again
        assert server.cli("exists", "ragattn:ratelimit:v1:client") == "1"
        assert await cache.healthy()
    finally:
        await cache.close()
        await limiter.close()


async def test_a_refused_write_does_not_open_the_circuit(redis_server: Callable[[], Any]) -> None:
    server = redis_server()
    cache = RedisCache(server.url, ttl_s=60, timeout_s=TIMEOUT_S, cooldown_s=30.0)
    limiter = RedisRateLimiter(600, server.url, timeout_s=TIMEOUT_S, cooldown_s=30.0)
    key = f"ragattn:test:{uuid.uuid4().hex}"
    try:
        await cache.set(key, b"stored")
        assert server.cli("config", "set", "maxmemory-policy", "noeviction") == "OK"
        assert server.cli("config", "set", "maxmemory", "1") == "OK"
        await cache.set(key + ":new", b"x" * 1000)  # OOM: Redis answered, and refused
        assert (cache.stats.errors, cache.stats.sets) == (1, 1)
        assert not cache.circuit.is_open and cache.circuit.failures == 0
        assert await cache.get(key) == b"stored"  # reads still go to Redis
        assert await cache.healthy()
        await cache.set(key + ":later", b"y")  # writes skipped for the cooldown: no new error
        assert (cache.stats.errors, cache.stats.sets) == (1, 1)
        assert server.cli("config", "set", "maxmemory", "0") == "OK"
        await limiter.acquire("client")  # the limiter was never cut off from Redis
        assert limiter.fallbacks == 0
    finally:
        await cache.close()
        await limiter.close()
