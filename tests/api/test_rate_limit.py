"""The token buckets of :mod:`ragattn_api.rate_limit`: the per-process one and the Lua one in Redis.

Both grant ``per_minute`` in a burst and answer Retry-After in whole seconds until one token is
back. The Redis one is driven against a real Redis: two limiters (two replicas) share one bucket,
clients are independent, a bucket refills on Redis's clock up to the limit, an idle bucket expires,
and a stopped Redis falls back to the per-process bucket (counted, logged once) until it answers.
No model is loaded.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio

from ragattn.settings import Settings
from ragattn_api.errors import RateLimitedError
from ragattn_api.rate_limit import (
    IDLE_TTL_MS,
    RateLimiter,
    RedisRateLimiter,
    rate_limit_guard,
)

pytestmark = pytest.mark.anyio

LIMIT = 6  # 0.1 token a second: a burst never earns a token back within a test


async def _granted(limiter: Any, client: str, n: int) -> list[int | None]:
    """``None`` per granted request, the Retry-After (s) per refused one."""
    out: list[int | None] = []
    for _ in range(n):
        try:
            await limiter.acquire(client)
        except RateLimitedError as exc:
            out.append(exc.retry_after_s)
        else:
            out.append(None)
    return out


@pytest.fixture
def prefix() -> str:
    """A key namespace of this test alone on the session's Redis."""
    return f"ragattn:test:ratelimit:{uuid.uuid4().hex}:"


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Any]:
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def limiters(redis_url: str, prefix: str) -> AsyncIterator[Callable[[], RedisRateLimiter]]:
    made: list[RedisRateLimiter] = []

    def make() -> RedisRateLimiter:
        made.append(RedisRateLimiter(LIMIT, redis_url, prefix=prefix))
        return made[-1]

    yield make
    for limiter in made:
        await limiter.close()


async def test_the_in_process_bucket_grants_the_limit_then_retry_after() -> None:
    got = await _granted(RateLimiter(LIMIT), "addr:10.0.0.1", LIMIT + 2)
    assert got == [None] * LIMIT + [10, 10]  # (1 - ~0 tokens) / 0.1 per second


@pytest.mark.redis
async def test_the_redis_bucket_has_the_same_semantics(
    limiters: Callable[[], RedisRateLimiter],
) -> None:
    limiter = limiters()
    assert await _granted(limiter, "addr:10.0.0.1", LIMIT + 2) == [None] * LIMIT + [10, 10]
    assert limiter.fallbacks == 0


@pytest.mark.redis
async def test_two_replicas_draw_from_one_bucket_and_clients_are_independent(
    limiters: Callable[[], RedisRateLimiter],
) -> None:
    a, b = limiters(), limiters()
    got = []
    for i in range(2 * LIMIT):
        got += await _granted(a if i % 2 == 0 else b, "key-one", 1)
    assert got == [None] * LIMIT + [10] * LIMIT  # one limit, not one per replica
    assert await _granted(b, "key-two", LIMIT + 1) == [None] * LIMIT + [10]


async def _set_bucket(raw: Any, key: str, tokens: float, age_s: float) -> None:
    seconds, micros = await raw.time()
    now = seconds + micros / 1e6
    await raw.hset(key, mapping={"tokens": repr(tokens), "at": repr(now - age_s)})


@pytest.mark.redis
async def test_a_bucket_refills_on_redis_time_up_to_the_limit(
    limiters: Callable[[], RedisRateLimiter], raw: Any, prefix: str
) -> None:
    limiter = limiters()
    await _set_bucket(raw, prefix + "half", tokens=0.0, age_s=30.0)  # 30 s x 0.1/s = 3 tokens
    assert await _granted(limiter, "half", 4) == [None, None, None, 10]
    await _set_bucket(raw, prefix + "idle", tokens=0.0, age_s=3600.0)  # capped at the limit
    assert await _granted(limiter, "idle", LIMIT + 1) == [None] * LIMIT + [10]


@pytest.mark.redis
async def test_retry_after_is_the_whole_seconds_until_one_token(
    limiters: Callable[[], RedisRateLimiter], raw: Any, prefix: str
) -> None:
    await _set_bucket(raw, prefix + "c", tokens=0.5, age_s=0.0)
    assert await _granted(limiters(), "c", 1) == [5]  # 0.5 token missing at 0.1 per second


@pytest.mark.redis
async def test_an_idle_bucket_expires_and_comes_back_full(
    limiters: Callable[[], RedisRateLimiter], raw: Any, prefix: str
) -> None:
    limiter = limiters()
    assert await _granted(limiter, "c", LIMIT + 1) == [None] * LIMIT + [10]
    ttl = await raw.pttl(prefix + "c")
    assert IDLE_TTL_MS - 5_000 < ttl <= IDLE_TTL_MS
    # Full 60 s after its last use, so expiring it then changes nothing; expire it now instead.
    await raw.pexpire(prefix + "c", 1)
    await asyncio.sleep(0.05)
    assert await raw.exists(prefix + "c") == 0
    assert await _granted(limiter, "c", LIMIT + 1) == [None] * LIMIT + [10]


@pytest.mark.redis
async def test_a_stopped_redis_falls_back_to_the_process_bucket_until_it_answers(
    redis_server: Callable[[], Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_server()
    limiter = RedisRateLimiter(LIMIT, server.url, timeout_s=0.5, cooldown_s=0.2)
    try:
        assert await _granted(limiter, "c", 2) == [None, None]  # two tokens spent in Redis
        server.stop()
        with caplog.at_level(logging.WARNING, logger="ragattn_api.rate_limit"):
            # Fail open, not unlimited: a fresh per-process bucket of the same limit.
            assert await _granted(limiter, "c", LIMIT + 1) == [None] * LIMIT + [10]
            await asyncio.sleep(0.3)  # past the cooldown: Redis is tried again, still down
            assert await _granted(limiter, "c", 1) == [10]
        assert limiter.fallbacks == LIMIT + 2
        failures = [r for r in caplog.records if "limiting per process" in r.getMessage()]
        assert len(failures) == 1  # once per outage, not per request
        server.start()  # same port, empty
        await asyncio.sleep(0.3)
        assert await _granted(limiter, "c", LIMIT + 1) == [None] * LIMIT + [10]
        assert limiter.fallbacks == LIMIT + 2  # decided in Redis again
        assert server.cli("exists", "ragattn:ratelimit:v1:c") == "1"
    finally:
        await limiter.close()


def test_the_guard_is_global_only_with_the_redis_backend() -> None:
    assert rate_limit_guard(Settings()) is None
    memory = rate_limit_guard(Settings(rate_limit_per_minute=LIMIT))
    assert memory is not None and type(memory.limiter) is RateLimiter
    shared = rate_limit_guard(
        Settings(
            rate_limit_per_minute=LIMIT, cache_backend="redis", redis_url="redis://127.0.0.1:1/0"
        )
    )
    assert shared is not None and type(shared.limiter) is RedisRateLimiter
