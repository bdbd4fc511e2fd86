"""Cache isolation per API key (``RAGATTN_CACHE_SCOPE=key``).

By default the response cache is shared: identical requests from different keys share one entry,
which is what a single-tenant deployment wants. With ``RAGATTN_CACHE_SCOPE=key`` each API key gets
its own partition, so one tenant can never see (or time) another's hits: :class:`ApiKeyGuard
<api.auth.ApiKeyGuard>` records which key authenticated the request in a context variable, and
:class:`PartitionedCache` prefixes every cache key with a digest of that key (never the key
itself, so Redis holds no secret). Identical in-flight requests are shared only within a partition
too (:func:`current_partition`).
"""

from __future__ import annotations

import contextvars
import hashlib
from typing import Any

from ragattn.cache import Cache, CacheStats

_PARTITION: contextvars.ContextVar[str] = contextvars.ContextVar(
    "ragattn_cache_partition", default=""
)


def key_partition(api_key: str) -> str:
    """The partition name of an API key: a digest, stable across restarts and key order."""
    return "key-" + hashlib.sha256(api_key.encode()).hexdigest()[:32]


def set_partition(partition: str) -> None:
    """Record the partition of the request being handled (called by the API key guard)."""
    _PARTITION.set(partition)


def current_partition() -> str:
    """The partition of the request being handled (``""``: none, the shared cache)."""
    return _PARTITION.get()


class PartitionedCache:
    """A cache whose keys are prefixed with the current request's partition."""

    def __init__(self, inner: Cache) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.stats: CacheStats = inner.stats

    @staticmethod
    def _key(key: str) -> str:
        return f"{current_partition() or 'anonymous'}:{key}"

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(self._key(key))

    async def set(self, key: str, value: bytes) -> None:
        await self.inner.set(self._key(key), value)

    async def healthy(self) -> bool:
        return await self.inner.healthy()

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


__all__ = ["PartitionedCache", "current_partition", "key_partition", "set_partition"]
