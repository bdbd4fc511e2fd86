"""Issue 16 §10: identical requests give identical bytes, except the fields named below.

Whatever the batch a text is embedded in, whatever else runs concurrently, whichever process
answers: the same request gets the same bytes. docs/service.md ("Identical requests, identical
bytes") names what may differ, and this test asserts exactly that ("Hardening, round six": the
page promised identical bytes while fresh answers carry ``meta.stage_seconds``): in the body the
top-level ``id`` (a UUID minted per response) and the numbers of ``meta.stage_seconds`` (seconds
of the computation; its stage names and their order are identical); in the headers ``date`` and
``content-length`` (the seconds are not all printed with the same number of digits). Every other
byte of the body and every other header is identical. The embedder is the root cause it guards:
it used to pad batches, so a text's vector depended on its neighbours by ~1e-7.
"""

from __future__ import annotations

import asyncio
import re
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


_ID = re.compile(rb'^\{"id":"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"')
_STAGE_SECONDS = re.compile(rb'"stage_seconds":\{[^{}]*\}')
_SECONDS = re.compile(rb'":(?:\d+(?:\.\d+)?(?:e-?\d+)?)')
VARYING_HEADERS = frozenset({"date", "content-length"})
"""The only headers two answers to one request may differ in (docs/service.md)."""


def _masked(raw: bytes) -> bytes:
    """``raw`` with exactly what docs/service.md lets differ blanked, byte for byte otherwise:
    the top-level ``id`` (which must be there, a UUID 4) and each number in ``stage_seconds``."""
    masked, found = _ID.subn(b'{"id":"-"', raw)
    assert found == 1, raw[:200]
    return _STAGE_SECONDS.sub(lambda m: _SECONDS.sub(b'":0', m.group(0)), masked)


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


async def _answers(
    url: str, requests: list[tuple[str, dict[str, Any]]], *, concurrent: bool = False
) -> list[tuple[bytes, dict[str, str]]]:
    """Each request's body, masked (:func:`_masked`), and its headers but the varying ones."""
    async with httpx.AsyncClient(base_url=url, timeout=180) as c:
        if concurrent:
            resps = list(await asyncio.gather(*(c.post(p, json=b) for p, b in requests)))
        else:
            resps = [await c.post(p, json=b) for p, b in requests]
    assert all(r.status_code == 200 for r in resps), [r.text for r in resps]
    return [
        (
            _masked(r.content),
            {k: v for k, v in r.headers.items() if k.lower() not in VARYING_HEADERS},
        )
        for r in resps
    ]


async def test_two_server_processes_and_concurrency_answer_identically(
    spawn_server: Callable[..., Any],
) -> None:
    # No cache: every answer below is computed, none copied from another.
    first = spawn_server(name="first", cache_backend="none")
    second = spawn_server(name="second", cache_backend="none")
    serial = await _answers(first.url, REQUESTS)
    concurrent = await _answers(first.url, REQUESTS * 2, concurrent=True)
    # The other process sees the requests in the opposite order, so its embedding cache fills
    # from other batches first.
    reverse = (await _answers(second.url, REQUESTS[::-1]))[::-1]
    for i, (path, _) in enumerate(REQUESTS * 2):
        assert concurrent[i] == serial[i % len(REQUESTS)], path
    for i, (path, _) in enumerate(REQUESTS):
        assert reverse[i] == serial[i], path
    # The fields that may differ are there to differ: a fresh compress answer has its seconds.
    assert b'"stage_seconds":{"sentences":0,' in serial[3][0], serial[3][0][-400:]
