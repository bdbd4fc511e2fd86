"""Result caches: one async interface, an in-process LRU and Redis, plus the content-hash key.

A cache never changes an answer and never fails a request: every Redis problem (connection,
timeout, out of memory, protocol) is logged, counted in :class:`CacheStats` and treated as a miss.
Values are opaque bytes; callers serialize. Everything in a process that talks to one Redis (the
cache, the service's shared rate limit) goes through one :class:`RedisCircuit`, so a hung Redis
costs a request at most one timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

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


def _where(url: str) -> str:
    """``host:port`` (or the socket path) of a Redis URL, for logs: never its credentials."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 6379}" if parts.hostname else parts.path


class RedisCircuit:
    """The circuit breaker of one Redis, shared by everything in this process that talks to it:
    the cache's reads and writes and the service's shared rate limit.

    A hung Redis (stopped, not down: connections are accepted, commands never answered) costs
    every call the full timeout. With a breaker per call site a request paid it once per site,
    the rate limit, the cache read and the cache write: three timeouts. Here the first call that
    finds Redis unreachable (a timeout, a refused or broken connection) opens the circuit, and
    every caller then leaves Redis alone for ``cooldown_s`` (the call is *bypassed*: the cache
    misses, the rate limit decides per process). After the cooldown one call at a time is let
    through (the probe; the others stay bypassed for another cooldown unless it succeeds): its
    success closes the circuit, its failure opens it for another cooldown. So a request pays at
    most one timeout, and none while the circuit is open.

    An error that Redis answers with (a full ``noeviction`` Redis refusing a SET) shows Redis is
    reachable: it leaves the circuit closed, and the caller decides what to skip.

    Get the one for a URL from :meth:`of`; counters are this process's.
    """

    _circuits: ClassVar[weakref.WeakValueDictionary[tuple[str, float], RedisCircuit]] = (
        weakref.WeakValueDictionary()
    )
    _circuits_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str, *, cooldown_s: float = 1.0) -> None:
        self.url = url
        self.cooldown_s = cooldown_s
        self.failures = 0
        """Calls that found Redis unreachable (each opened the circuit or kept it open)."""
        self.bypassed = 0
        """Calls not sent to Redis because the circuit was open."""
        self._open = False
        self._retry_at = 0.0
        # One event loop calls in the service; library users may share a cache across threads.
        self._lock = threading.Lock()

    @classmethod
    def of(cls, url: str, *, cooldown_s: float = 1.0) -> RedisCircuit:
        """The circuit of the Redis at ``url`` in this process, made on first use and kept while
        anything holds it (a cache, a rate limiter, the service's metrics)."""
        key = (url, cooldown_s)
        with cls._circuits_lock:
            circuit = cls._circuits.get(key)
            if circuit is None:
                circuit = cls(url, cooldown_s=cooldown_s)
                cls._circuits[key] = circuit
            return circuit

    @property
    def is_open(self) -> bool:
        """True from a failure until a call succeeds again (Redis is bypassed meanwhile)."""
        return self._open

    def admit(self) -> bool:
        """Whether a call may go to Redis now; False (counted as bypassed) while the circuit is
        open, except for one probe per cooldown."""
        with self._lock:
            if not self._open:
                return True
            now = time.monotonic()
            if now >= self._retry_at:
                self._retry_at = now + self.cooldown_s  # this call probes; the rest wait
                return True
            self.bypassed += 1
            return False

    def unreachable(self, exc: BaseException) -> bool:
        """True for a failure that says Redis cannot be reached (it opens the circuit), False
        for an error Redis answered with."""
        return isinstance(exc, redis_unreachable_errors())

    def succeeded(self) -> None:
        """A call was answered: close the circuit."""
        if not self._open:  # the common case, without the lock
            return
        with self._lock:
            was_open, self._open = self._open, False
        if was_open:
            logger.info(
                "redis at %s answers again; the cache and the rate limit use it", _where(self.url)
            )

    def failed(self, what: str, exc: BaseException) -> None:
        """``what`` found Redis unreachable: open the circuit for ``cooldown_s``."""
        with self._lock:
            self.failures += 1
            self._retry_at = time.monotonic() + self.cooldown_s
            opened, self._open = not self._open, True
        log = logger.warning if opened else logger.debug
        log(
            "redis at %s unreachable (%s: %s: %s); the cache and the rate limit bypass it, "
            "tried again every %.1fs",
            _where(self.url),
            what,
            type(exc).__name__,
            exc,
            self.cooldown_s,
        )


class RedisCache:
    """Redis through redis-py's asyncio client; any Redis failure is a counted miss.

    An unreachable Redis opens the process's :class:`RedisCircuit` for this Redis, shared with
    the rate limit: reads and writes then bypass it for the cooldown (bypassed lookups count as
    misses and errors), so a hung Redis costs a request at most one timeout. A write that Redis
    refuses (``maxmemory`` with ``noeviction``) stops only the writes for the cooldown: a full
    Redis still serves its GETs. A connection error is retried once on a fresh connection: after
    a Redis restart the pooled connections are stale, and the first command on each would fail
    otherwise.
    """

    name = "redis"

    def __init__(
        self,
        url: str,
        *,
        ttl_s: int = 86_400,
        timeout_s: float = 1.0,
        cooldown_s: float = 1.0,
        circuit: RedisCircuit | None = None,
    ) -> None:
        self.url = url
        self.ttl_s = ttl_s
        self.cooldown_s = cooldown_s
        self.stats = CacheStats()
        self.circuit = (
            circuit if circuit is not None else RedisCircuit.of(url, cooldown_s=cooldown_s)
        )
        self._writes_refused_until = 0.0
        self._errors: tuple[type[BaseException], ...] = redis_errors()
        self._client = redis_client(url, timeout_s=timeout_s)

    def _failed(self, op: str, exc: BaseException) -> None:
        self.stats.errors += 1
        if self.circuit.unreachable(exc):
            self.circuit.failed(f"cache {op}", exc)
            return
        if op == "SET":  # e.g. OOM: Redis answers, but refuses to store; reads still work
            self._writes_refused_until = time.monotonic() + self.cooldown_s
        logger.warning(
            "redis %s refused (%s: %s)%s",
            op,
            type(exc).__name__,
            exc,
            f"; writes skipped for {self.cooldown_s:.1f}s" if op == "SET" else "",
        )

    async def get(self, key: str) -> bytes | None:
        if not self.circuit.admit():
            self.stats.errors += 1
            self.stats.misses += 1
            return None
        try:
            value = await self._client.get(key)
        except self._errors as exc:
            self._failed("GET", exc)
            self.stats.misses += 1
            return None
        self.circuit.succeeded()
        if value is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return bytes(value)

    async def set(self, key: str, value: bytes) -> None:
        if time.monotonic() < self._writes_refused_until or not self.circuit.admit():
            return
        try:
            await self._client.set(key, value, ex=self.ttl_s)
        except self._errors as exc:
            self._failed("SET", exc)
            return
        self.circuit.succeeded()
        self.stats.sets += 1

    async def ping(self) -> bool:
        """True when Redis answers now; never raises (and never consults the circuit)."""
        try:
            return bool(await self._client.ping())
        except self._errors:
            return False

    async def healthy(self) -> bool:
        """False while Redis is unreachable: the circuit is open, or a PING gets no answer in time.

        Refused writes alone (a full Redis) leave it healthy: cached answers are still served.
        """
        if not self.circuit.admit():
            return False
        try:
            answered = bool(await self._client.ping())
        except self._errors as exc:
            self._failed("PING", exc)
            return False
        self.circuit.succeeded()
        return answered

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


def redis_unreachable_errors() -> tuple[type[BaseException], ...]:
    """The failures of :func:`redis_errors` that say Redis cannot be reached now (no answer in
    time, a refused or broken connection, a Redis still loading its data), as opposed to an error
    Redis answered with (``OutOfMemoryError``, any other ``ResponseError``)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)


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
    "RedisCircuit",
    "cache_key",
    "cached_value",
    "redis_client",
    "redis_errors",
    "redis_unreachable_errors",
    "storing",
]
