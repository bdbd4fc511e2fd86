"""Bearer API keys (deny by default) and per-client rate limiting, as app-level guards.

Every route needs a key when keys are configured, except handlers marked ``opt={"public": True}``
(``/health``, ``/ready``, ``/metrics``) and the OpenAPI pages under ``/schema``. A test walks every
registered route to keep it that way.

Rate limiting is an in-process token bucket per client. With API keys configured the client is
the key that authenticated the request (the key guard runs first, so an unknown token is a 401
and never gets a bucket of its own); without keys it is the peer address, and a bearer token a
client makes up is ignored. The peer address is the TCP peer unless the connection comes from one
of ``RAGATTN_TRUSTED_PROXIES``, whose ``X-Forwarded-For`` the server then applies (uvicorn's
proxy-headers support, configured in :mod:`api.server`); forwarded headers from anyone else are
ignored. The service runs one process that owns the model, so per-process counting is exact, and
Redis stays optional; a multi-process deployment would need a shared store.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ragattn_api.errors import RateLimitedError, UnauthorizedError
from ragattn_api.tenancy import key_partition, set_partition

PUBLIC_PREFIXES = ("/schema",)
_CLIENT_STATE = "ragattn.client"

# Guards are async on purpose: Litestar runs a sync guard in a worker thread, which cost about a
# millisecond per request (a thread hand-off) for a check that never blocks.


def is_public(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> bool:
    return bool(handler.opt.get("public")) or connection.scope["path"].startswith(PUBLIC_PREFIXES)


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class ApiKeyGuard:
    """Accepts a request whose Bearer token equals one of ``keys`` (constant-time compare)."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)
        self._partitions = tuple(key_partition(k) for k in keys)

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if not self._keys or is_public(connection, handler):
            return
        token = bearer_token(connection)
        if token is None:
            raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
        candidate = token.encode()
        # Compare against every key so timing does not reveal which one matched.
        matched = -1
        for position, key in enumerate(self._keys):
            if hmac.compare_digest(candidate, key):
                matched = position
        if matched < 0:
            raise UnauthorizedError("invalid API key")
        # The rate limiter keys on which configured key this is, never on the raw token.
        connection.scope.setdefault("state", {})[_CLIENT_STATE] = f"key:{matched}"
        set_partition(self._partitions[matched])  # the cache partition (RAGATTN_CACHE_SCOPE=key)


class RateLimiter:
    """Token bucket per client: ``per_minute`` requests, refilled continuously, bursts up to it."""

    def __init__(self, per_minute: int, *, max_clients: int = 10_000) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, client: str) -> None:
        """Take one token for ``client`` or raise :class:`RateLimitedError` with a Retry-After."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.pop(client, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - last) * self._rate)
            if tokens < 1.0:
                self._buckets[client] = (tokens, now)
                wait = (1.0 - tokens) / self._rate
                raise RateLimitedError(
                    f"rate limit of {self.per_minute} requests per minute exceeded; retry later",
                    retry_after_s=max(1, int(wait + 0.999)),
                )
            self._buckets[client] = (tokens - 1.0, now)
            while len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)


class RateLimitGuard:
    """Takes one token per request: per authenticated key, else per peer address."""

    def __init__(self, limiter: RateLimiter) -> None:
        self._limiter = limiter

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if is_public(connection, handler):
            return
        client = connection.scope.get("state", {}).get(_CLIENT_STATE)
        if client is None:
            client = "addr:" + (connection.client.host if connection.client else "unknown")
        self._limiter.acquire(client)


__all__ = ["ApiKeyGuard", "RateLimitGuard", "RateLimiter", "bearer_token", "is_public"]
