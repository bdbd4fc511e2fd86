"""Issue 16 §10: identical requests give bit-identical bodies.

Whatever the batch a text is embedded in, whatever else runs concurrently, whichever process
answers: the same request gets the same bytes (``id`` aside). The embedder is the root cause it
guards: it used to pad batches, so a text's vector depended on its neighbours by ~1e-7.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

QUERY = "Which river flows through Paris?"
DOCS = [
    "The Seine flows through Paris and into the English Channel at Le Havre.",
    "Rome lies on the Tiber.",
    "Bananas are rich in potassium. They grow in tropical climates and are harvested green.",
    "The Rhine flows through Germany and the Netherlands before reaching the North Sea.",
    "Paris is the capital of France.",
]
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("/v2/rerank", {"query": QUERY, "documents": DOCS, "raw_scores": True}),
    ("/v2/rerank", {"query": "capital of France", "documents": DOCS[::-1], "raw_scores": True}),
    ("/v1/rerank", {"query": "potassium", "documents": DOCS[1:], "top_n": 2}),
    ("/v1/compress", {"query": QUERY, "documents": DOCS, "ratio": 0.5}),
    ("/v1/compress", {"query": "potassium", "documents": DOCS[2:], "target_tokens": 16}),
    ("/v1/rerank_compress", {"query": QUERY, "documents": DOCS, "ratio": 0.4, "top_n": 3}),
    # Two short documents alone: embedded in a batch padded (before the fix) to their own length,
    # not to the longest of DOCS; sent first, they would fill the cache with those vectors.
    ("/v2/rerank", {"query": "capital", "documents": [DOCS[1], DOCS[4]], "raw_scores": True}),
]


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` less what belongs to one computation: ``id``, and the seconds of a fresh read
    (``meta.stage_seconds``)."""
    out = {k: v for k, v in body.items() if k != "id"}
    if isinstance(out.get("meta"), dict):
        out["meta"] = {k: v for k, v in out["meta"].items() if k != "stage_seconds"}
    return out


def test_a_vector_does_not_depend_on_its_batch() -> None:
    from ragattn.embed import Embedder

    embedder = Embedder(cache_size=0)
    texts = [*DOCS, "short", "a much longer sentence about rivers, capitals and fruit " * 3]
    together = embedder.encode(texts)
    alone = np.stack([embedder.encode([t])[0] for t in texts])
    reversed_ = embedder.encode(texts[::-1])[::-1]
    assert together.tobytes() == alone.tobytes()
    assert together.tobytes() == reversed_.tobytes()
    cached = Embedder(cache_size=64)
    cached.encode(texts[:3])  # the LRU now holds vectors computed in another batch
    assert cached.encode(texts).tobytes() == together.tobytes()


async def _bodies(
    url: str, requests: list[tuple[str, dict[str, Any]]], *, concurrent: bool = False
) -> list[bytes]:
    async with httpx.AsyncClient(base_url=url, timeout=180) as c:
        if concurrent:
            resps = list(await asyncio.gather(*(c.post(p, json=b) for p, b in requests)))
        else:
            resps = [await c.post(p, json=b) for p, b in requests]
    assert all(r.status_code == 200 for r in resps), [r.text for r in resps]
    return [r.content for r in resps]


def _canonical(raw: bytes) -> bytes:
    import json

    return json.dumps(_strip(json.loads(raw)), sort_keys=True).encode()


async def test_two_server_processes_and_concurrency_answer_identically(
    spawn_server: Callable[..., Any],
) -> None:
    # No cache: every answer below is computed, none copied from another.
    first = spawn_server(name="first", cache_backend="none")
    second = spawn_server(name="second", cache_backend="none")
    serial = [_canonical(b) for b in await _bodies(first.url, REQUESTS)]
    concurrent = [_canonical(b) for b in await _bodies(first.url, REQUESTS * 2, concurrent=True)]
    # The other process sees the requests in the opposite order, so its embedding cache fills
    # from other batches first.
    reverse = [_canonical(b) for b in await _bodies(second.url, REQUESTS[::-1])][::-1]
    for i, (path, _) in enumerate(REQUESTS * 2):
        assert concurrent[i] == serial[i % len(REQUESTS)], path
    for i, (path, _) in enumerate(REQUESTS):
        assert reverse[i] == serial[i], path
