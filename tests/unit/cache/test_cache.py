from __future__ import annotations

import time

import pytest

from ragattn.cache import KEY_PREFIX, Cache, MemoryCache, NullCache, cache_key
from ragattn.types import Document

pytestmark = pytest.mark.anyio  # on asyncio (``anyio_backend`` in tests/conftest.py)


def _key(**overrides: object) -> str:
    base: dict[str, object] = {
        "model": "smollm2-135m@abc",
        "route": "rerank:v2",
        "params": {"top_n": 3, "return_documents": False},
        "query": "capital of France",
        "documents": ["Paris is the capital.", "Berlin is in Germany."],
    }
    base.update(overrides)
    return cache_key(**base)  # type: ignore[arg-type]


def test_key_is_a_prefixed_sha256() -> None:
    key = _key()
    assert key.startswith(KEY_PREFIX)
    digest = key[len(KEY_PREFIX) :]
    assert len(digest) == 64 and int(digest, 16) >= 0


def test_key_ignores_parameter_order_but_not_document_order() -> None:
    assert _key(params={"return_documents": False, "top_n": 3}) == _key()
    assert _key(documents=["Berlin is in Germany.", "Paris is the capital."]) != _key()


@pytest.mark.parametrize(
    "change",
    [
        {"model": "smollm2-135m@def"},
        {"route": "rerank:v1"},
        {"params": {"top_n": 2, "return_documents": False}},
        {"query": "capital of france"},
        {"documents": ["Paris is the capital.", "Berlin is in Germany!"]},
        {"documents": ["Paris is the capital."]},
    ],
)
def test_every_input_changes_the_key(change: dict[str, object]) -> None:
    assert _key(**change) != _key()


def test_document_objects_and_ids_count() -> None:
    plain = _key(documents=[Document(text="a")])
    with_id = _key(documents=[Document(text="a", id="7")])
    as_mapping = _key(documents=[{"text": "a", "id": "7", "title": None, "metadata": {}}])
    assert plain != with_id
    assert with_id == as_mapping


def test_backends_satisfy_the_protocol() -> None:
    assert isinstance(MemoryCache(), Cache)
    assert isinstance(NullCache(), Cache)


async def test_memory_cache_roundtrip_and_counters() -> None:
    cache = MemoryCache(max_items=4, ttl_s=60)
    assert await cache.get("a") is None
    await cache.set("a", b"1")
    assert await cache.get("a") == b"1"
    assert cache.stats.snapshot() == {"hits": 1, "misses": 1, "errors": 0, "sets": 1}


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_items=2, ttl_s=60)
    await cache.set("a", b"1")
    await cache.set("b", b"2")
    assert await cache.get("a") == b"1"  # a is now the most recent
    await cache.set("c", b"3")
    assert await cache.get("b") is None
    assert await cache.get("a") == b"1"
    assert await cache.get("c") == b"3"
    assert len(cache) == 2


async def test_memory_cache_expires_entries() -> None:
    cache = MemoryCache(max_items=2, ttl_s=0.05)
    await cache.set("a", b"1")
    time.sleep(0.06)
    assert await cache.get("a") is None
    assert len(cache) == 0


async def test_null_cache_never_stores() -> None:
    cache = NullCache()
    await cache.set("a", b"1")
    assert await cache.get("a") is None
    assert cache.stats.misses == 1


def test_memory_cache_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="max_items must be >= 1"):
        MemoryCache(max_items=0)
