"""Per-client rate limiting: a token bucket in this process, or one in Redis shared by replicas.

Both limiters grant ``per_minute`` requests per client, refilled continuously (``per_minute / 60``
tokens a second) and bursting up to ``per_minute``; a request finding less than one token is a 429
``rate_limited`` whose ``Retry-After`` is the whole seconds until one token is back. The client is
:func:`ragattn_api.auth.client_id` (the API key's digest, else the peer address).

- :class:`RateLimiter` counts in this process: exact for one replica, but N replicas behind a load
  balancer grant N times the limit.
- :class:`RedisRateLimiter` (used with ``RAGATTN_CACHE_BACKEND=redis``) keeps each bucket in Redis
  and updates it in one Lua script, so every replica on that Redis draws from the same bucket and
  the check-and-take is atomic. The script reads Redis's own clock (``TIME``), so replicas with
  skewed clocks still agree. A bucket left alone for 60 s is full again, which is what a missing
  key means, so each key expires after 61 s idle: idle clients cost Redis nothing.

When Redis fails (connection refused, timeout, any ``RedisError``) the Redis limiter fails open to
its own per-process bucket: the request is limited as on one replica, never refused because Redis
is down and never let through unlimited. The outage is logged once (and its recovery), each
request decided that way is counted (``ragattn_rate_limit_events_total{event="fallback"}``), and
an unreachable Redis opens the process's :class:`~ragattn.cache.RedisCircuit` for that Redis,
shared with the result cache: neither sends it anything for ``cooldown_s``, so a hung Redis costs
a request at most one timeout, whichever of them met it first. During an outage the global limit
is N replicas x ``per_minute``, as it was before Redis was shared.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ragattn.cache import RedisCircuit, redis_client, redis_errors
from ragattn.settings import Settings
from ragattn_api.auth import client_id, is_public
from ragattn_api.errors import RateLimitedError

logger = logging.getLogger(__name__)

KEY_PREFIX = "ragattn:ratelimit:v1:"
"""Namespace and layout version of the Redis buckets (a hash: ``tokens``, ``at`` in seconds)."""
IDLE_TTL_MS = 61_000
"""A bucket is full 60 s after its last use (any ``per_minute``); one second more, then it goes."""

# KEYS[1]: the client's bucket. ARGV: capacity (requests), refill (tokens per second), TTL (ms).
# Returns {1, "0"} when a token was taken, else {0, "<seconds until one token>"}: Redis truncates a
# Lua number to an integer, so the wait travels as a string.
TOKEN_BUCKET_LUA = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = capacity
  at = now
end
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local granted = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  granted = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {granted, string.format('%.17g', wait)}
"""


def _refused(per_minute: int, wait_s: float) -> RateLimitedError:
    return RateLimitedError(
        f"rate limit of {per_minute} requests per minute exceeded; retry later",
        retry_after_s=max(1, math.ceil(wait_s)),
    )


class Limiter(Protocol):
    """What :class:`RateLimitGuard` needs: take one token or raise :class:`RateLimitedError`."""

    per_minute: int

    async def acquire(self, client: str) -> None: ...

    async def close(self) -> None: ...


class RateLimiter:
    """Token bucket per client in this process; ``max_clients`` buckets, least recently used go."""

    def __init__(self, per_minute: int, *, max_clients: int = 10_000) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        # The guard calls from one event loop; library users may share a limiter across threads.
        self._lock = threading.Lock()

    def take(self, client: str) -> None:
        """Take one token for ``client`` or raise :class:`RateLimitedError` with a Retry-After."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.pop(client, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - last) * self._rate)
            if tokens < 1.0:
                self._buckets[client] = (tokens, now)
                raise _refused(self.per_minute, (1.0 - tokens) / self._rate)
            self._buckets[client] = (tokens - 1.0, now)
            while len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)

    async def acquire(self, client: str) -> None:
        self.take(client)

    async def close(self) -> None:
        return None


class RedisRateLimiter:
    """Token bucket per client in Redis, shared by every replica; per-process while Redis fails.

    The client is made on first use, in the event loop that serves requests, and dropped by
    :meth:`close` (the app's shutdown), so an app started again in another loop reconnects.
    """

    def __init__(
        self,
        per_minute: int,
        url: str,
        *,
        timeout_s: float = 1.0,
        cooldown_s: float = 1.0,
        prefix: str = KEY_PREFIX,
        circuit: RedisCircuit | None = None,
    ) -> None:
        self.per_minute = per_minute
        self.url = url
        self.prefix = prefix
        self.fallback = RateLimiter(per_minute)
        self.fallbacks = 0
        """Requests decided by the per-process bucket because Redis failed or was bypassed."""
        self.circuit = (
            circuit if circuit is not None else RedisCircuit.of(url, cooldown_s=cooldown_s)
        )
        self._timeout_s = timeout_s
        self._errors = redis_errors()
        self._client: Any = None
        self._script: Any = None
        self._down = False

    def _bucket(self) -> Any:
        if self._script is None:
            self._client = redis_client(self.url, timeout_s=self._timeout_s)
            self._script = self._client.register_script(TOKEN_BUCKET_LUA)
        return self._script

    async def acquire(self, client: str) -> None:
        if self.circuit.admit():
            try:
                granted, wait = await self._bucket()(
                    keys=[self.prefix + client],
                    args=[self.per_minute, self.per_minute / 60.0, IDLE_TTL_MS],
                )
            except self._errors as exc:
                self._failed(exc)
            else:
                self.circuit.succeeded()
                if self._down:
                    self._down = False
                    logger.info("redis rate limit recovered; the limit is global again")
                if not int(granted):
                    raise _refused(self.per_minute, float(wait))
                return
        elif not self._down:  # the cache met the failure first
            self._down = True
            logger.warning("redis is bypassed; limiting per process until it answers")
        self.fallbacks += 1
        self.fallback.take(client)

    def _failed(self, exc: BaseException) -> None:
        if self.circuit.unreachable(exc):
            self.circuit.failed("rate limit", exc)
        if not self._down:
            self._down = True
            logger.warning(
                "redis rate limit failed (%s: %s); limiting per process until it answers "
                "(retried every %.1fs)",
                type(exc).__name__,
                exc,
                self.circuit.cooldown_s,
            )

    async def close(self) -> None:
        client, self._client, self._script = self._client, None, None
        if client is None:
            return
        try:
            await client.aclose()
        except self._errors as exc:
            logger.warning("closing the rate limit's redis client failed: %s", exc)


@dataclass(slots=True)
class RateLimitStats:
    """Decisions of the guard: requests granted and refused (each also counted by status)."""

    granted: int = 0
    refused: int = 0


class RateLimitGuard:
    """Takes one token per non-public request: per authenticated key, else per peer address."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.stats = RateLimitStats()

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if is_public(connection, handler):
            return
        try:
            await self.limiter.acquire(client_id(connection))
        except RateLimitedError:
            self.stats.refused += 1
            raise
        self.stats.granted += 1

    async def close(self) -> None:
        """Close the limiter's Redis client, if any (the app's shutdown)."""
        await self.limiter.close()


class _RateLimitCollector(Collector):
    def __init__(self, guard: RateLimitGuard) -> None:
        self._guard = guard

    def collect(self) -> Iterator[CounterMetricFamily]:
        events = CounterMetricFamily(
            "ragattn_rate_limit_events",
            "Rate limit decisions of this replica; fallback: decided per process, Redis failing",
            labels=["event"],
        )
        events.add_metric(["granted"], self._guard.stats.granted)
        events.add_metric(["refused"], self._guard.stats.refused)
        events.add_metric(["fallback"], getattr(self._guard.limiter, "fallbacks", 0))
        yield events


def rate_limit_guard(
    settings: Settings, *, registry: CollectorRegistry | None = None
) -> RateLimitGuard | None:
    """The rate limit guard ``settings`` ask for, or None (``RAGATTN_RATE_LIMIT_PER_MINUTE=0``).

    Shared through Redis with ``RAGATTN_CACHE_BACKEND=redis`` (same URL, timeout, cooldown and
    circuit as the cache, its own connection pool), else per process. With ``registry`` its
    counters are exported there.
    """
    per_minute = settings.rate_limit_per_minute
    if per_minute <= 0:
        return None
    limiter: Limiter
    if settings.cache_backend == "redis" and settings.redis_url:
        limiter = RedisRateLimiter(
            per_minute,
            settings.redis_url,
            timeout_s=settings.redis_timeout_s,
            cooldown_s=settings.redis_cooldown_s,
        )
    else:
        limiter = RateLimiter(per_minute)
    guard = RateLimitGuard(limiter)
    if registry is not None:
        registry.register(_RateLimitCollector(guard))
    return guard


__all__ = [
    "IDLE_TTL_MS",
    "KEY_PREFIX",
    "Limiter",
    "RateLimitGuard",
    "RateLimitStats",
    "RateLimiter",
    "RedisRateLimiter",
    "rate_limit_guard",
]
