"""Result caches: one async interface, an in-process LRU and Redis, plus the content-hash key.

A cache never changes an answer and never fails a request: every Redis problem (connection,
timeout, out of memory, protocol) is logged, counted in :class:`CacheStats` and treated as a miss.
Values are opaque bytes; callers serialize.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragattn._optional import require
from ragattn.errors import InvalidInputError
from ragattn.types import Document

logger = logging.getLogger(__name__)
T = TypeVar("T")

KEY_PREFIX = "ragattn:v1:"
"""Namespace and key-schema version; bump the version when the key layout changes."""


@dataclass(slots=True)
class CacheStats:
    """Counters every cache keeps: hits, misses, backend errors (also counted as misses), sets."""

    hits: int = 0
    misses: int = 0
    errors: int = 0
    sets: int = 0

    def snapshot(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "errors": self.errors, "sets": self.sets}


@runtime_checkable
class Cache(Protocol):
    """Async byte cache used by the service; ``get`` returns None on a miss or a backend failure."""

    name: str
    stats: CacheStats

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes) -> None: ...

    async def healthy(self) -> bool:
        """True when the backend works now; never raises (False = answers bypass the cache)."""
        ...

    async def close(self) -> None: ...


def _document_fields(doc: str | Document | Mapping[str, Any]) -> Any:
    if isinstance(doc, str):
        return doc
    if isinstance(doc, Document):
        return doc.to_dict()
    return dict(doc)


def cache_key(
    *,
    model: str,
    route: str,
    params: Mapping[str, Any],
    query: str,
    documents: Sequence[str | Document | Mapping[str, Any]],
) -> str:
    """The cache key of one request: sha256 over everything that can change the response.

    Args:
        model: model identity, including a weights and head-profile fingerprint, so a model or
            scoring change never serves an old answer.
        route: the endpoint family, e.g. ``"rerank:v2"``.
        params: every output-changing parameter with defaults filled in (keys are sorted here).
        query: the query text.
        documents: the documents in request order (order changes ``index`` values).

    Returns:
        ``"ragattn:v1:<64 hex digits>"``.

    Raises:
        InvalidInputError: a text holds a lone surrogate (not encodable as UTF-8).
    """
    payload = {
        "model": model,
        "route": route,
        "params": dict(params),
        "query": query,
        "documents": [_document_fields(d) for d in documents],
    }
    blob = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    try:
        data = blob.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: text no UTF-8 request can carry
        raise InvalidInputError(
            "the input holds a lone UTF-16 surrogate (e.g. '\\ud800'), which is not valid "
            "Unicode text; send valid UTF-8"
        ) from exc
    return KEY_PREFIX + hashlib.sha256(data).hexdigest()


async def cached_value(cache: Cache | None, key: str, decode: Callable[[bytes], T]) -> T | None:
    """The value stored under ``key``, or None: a miss, no cache, or an entry that no longer
    decodes (logged; the caller computes it again and overwrites it).

    The one read of every cached answer (the service's responses, the pipeline's generations).
    ``decode`` raises ``ValueError`` or ``TypeError`` on an entry it cannot read.
    """
    if cache is None:
        return None
    raw = await cache.get(key)
    if raw is None:
        return None
    try:
        return decode(raw)
    except (ValueError, TypeError) as exc:
        logger.warning("undecodable cache entry %s (%s); recomputing", key, exc)
        return None


def storing(
    cache: Cache | None,
    key: str,
    compute: Callable[[], Awaitable[T]],
    encode: Callable[[T], bytes],
) -> Callable[[], Awaitable[T]]:
    """``compute``, followed by storing its value under ``key``: the one write of every cached
    answer, to run once per key (e.g. through the service's request coalescing)."""

    async def fill() -> T:
        value = await compute()
        if cache is not None:
            await cache.set(key, encode(value))
        return value

    return fill


class MemoryCache:
    """An in-process LRU with a per-entry TTL; the embedded default, no extra service needed."""

    name = "memory"

    def __init__(self, *, max_items: int = 10_000, ttl_s: float = 86_400.0) -> None:
        if max_items < 1 or ttl_s <= 0:
            raise ValueError("max_items must be >= 1 and ttl_s > 0")
        self.max_items = max_items
        self.ttl_s = ttl_s
        self.stats = CacheStats()
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        # The service calls from one event loop, but library users may share one across threads.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    async def get(self, key: str) -> bytes | None:
        now = time.monotonic()
        with self._lock:
            entry = self._items.get(key)
            if entry is None or entry[0] <= now:
                if entry is not None:
                    del self._items[key]
                self.stats.misses += 1
                return None
            self._items.move_to_end(key)
            self.stats.hits += 1
            return entry[1]

    async def set(self, key: str, value: bytes) -> None:
        with self._lock:
            self._items[key] = (time.monotonic() + self.ttl_s, value)
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
            self.stats.sets += 1

    async def healthy(self) -> bool:
        return True

    async def close(self) -> None:
        with self._lock:
            self._items.clear()


class RedisCache:
    """Redis through redis-py's asyncio client; any Redis failure is a counted miss.

    Reads and writes fail independently: a full Redis (``maxmemory`` with ``noeviction``) refuses
    every SET yet still serves GETs, so a failed write must not stop the reads. Each operation kind
    has its own small circuit breaker: after a failure that kind is bypassed for ``cooldown_s``,
    so a hung or stopped Redis does not add its timeout to every request (bypassed lookups count
    as misses and errors). A connection error is retried once on a fresh connection: after a Redis
    restart the pooled connections are stale, and the first command on each would fail otherwise.
    """

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        ttl_s: int = 86_400,
        timeout_s: float = 1.0,
        cooldown_s: float = 1.0,
    ) -> None:
        self.url = url
        self.ttl_s = ttl_s
        self.cooldown_s = cooldown_s
        self.stats = CacheStats()
        self._down_until: dict[str, float] = {"read": 0.0, "write": 0.0}
        self._errors: tuple[type[BaseException], ...] = redis_errors()
        self._client = redis_client(url, timeout_s=timeout_s)

    def _available(self, kind: str) -> bool:
        return time.monotonic() >= self._down_until[kind]

    def _failed(self, kind: str, op: str, exc: BaseException) -> None:
        self.stats.errors += 1
        self._down_until[kind] = time.monotonic() + self.cooldown_s
        logger.warning(
            "redis %s failed (%s: %s); %ss bypassed for %.1fs",
            op,
            type(exc).__name__,
            exc,
            kind,
            self.cooldown_s,
        )

    async def get(self, key: str) -> bytes | None:
        if not self._available("read"):
            self.stats.errors += 1
            self.stats.misses += 1
            return None
        try:
            value = await self._client.get(key)
        except self._errors as exc:
            self._failed("read", "GET", exc)
            self.stats.misses += 1
            return None
        if value is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return bytes(value)

    async def set(self, key: str, value: bytes) -> None:
        if not self._available("write"):
            return
        try:
            await self._client.set(key, value, ex=self.ttl_s)
        except self._errors as exc:
            self._failed("write", "SET", exc)
            return
        self.stats.sets += 1

    async def ping(self) -> bool:
        """True when Redis answers now; never raises."""
        try:
            return bool(await self._client.ping())
        except self._errors:
            return False

    async def healthy(self) -> bool:
        """False while reads fail: the read breaker is open or a PING gets no answer in time.

        Failing writes alone (a full Redis) leave it healthy: cached answers are still served.
        """
        if not self._available("read"):
            return False
        try:
            return bool(await self._client.ping())
        except self._errors as exc:
            self._failed("read", "PING", exc)
            return False

    async def close(self) -> None:
        try:
            await self._client.aclose()
        except self._errors as exc:
            logger.warning("closing redis client failed: %s", exc)
        else:
            logger.info("redis cache closed")


def redis_client(url: str, *, timeout_s: float) -> Any:
    """A ``redis.asyncio.Redis`` for ``url`` with the service's failure rules (the cache's and the
    shared rate limit's): ``timeout_s`` for connecting and for each command, and one immediate
    retry on connection errors only (a stale pooled connection after a Redis restart); a timeout
    is not retried, as it would double the wait on a hung Redis. No connection is made until the
    first command, which binds the pool to the running event loop.

    Raises:
        MissingDependencyError: redis-py is not installed (the ``redis`` extra).
    """
    redis_asyncio = require("redis.asyncio", extra="redis")
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return redis_asyncio.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        health_check_interval=0,
    )


def redis_errors() -> tuple[type[BaseException], ...]:
    """Every exception a Redis call through :func:`redis_client` can raise on a Redis failure."""
    from redis.exceptions import RedisError

    # RedisError covers ConnectionError, TimeoutError, OutOfMemoryError and every ResponseError;
    # OSError and asyncio's TimeoutError can escape from the socket layer during reconnects.
    return (RedisError, OSError, asyncio.TimeoutError)


class NullCache:
    """The ``none`` backend: every lookup is a miss; nothing is stored."""

    name = "none"

    def __init__(self) -> None:
        self.stats = CacheStats()

    async def get(self, key: str) -> bytes | None:
        self.stats.misses += 1
        return None

    async def set(self, key: str, value: bytes) -> None:
        return None

    async def healthy(self) -> bool:
        return True

    async def close(self) -> None:
        return None


__all__ = [
    "KEY_PREFIX",
    "Cache",
    "CacheStats",
    "MemoryCache",
    "NullCache",
    "RedisCache",
    "cache_key",
    "cached_value",
    "redis_client",
    "redis_errors",
    "storing",
]
