"""Issue 16 §1: size and token limits are enforced before a job reaches the model worker.

The model thread is held by a gated reranker for the whole test, so a refusal that arrives at all
was decided without it; the same oversized request is sent to every model route, ``/v1/retrieve``
and ``/v1/ask`` included.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

FIVE_MB = "Paris is the capital of France. " * 160_000  # 5.1 MB, one document
CORPUS = [
    {"id": "eiffel", "text": "The Eiffel Tower was completed on 31 March 1889 in Paris."},
    {"id": "pisa", "text": "The Leaning Tower stands in Pisa, a city in Italy."},
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("limits-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/v2/rerank", {"query": "capital?", "documents": [FIVE_MB]}),
    ("/v1/rerank", {"query": FIVE_MB, "documents": ["a"]}),
    ("/v1/compress", {"query": "capital?", "documents": [FIVE_MB], "ratio": 0.5}),
    ("/v1/rerank_compress", {"query": "capital?", "documents": [FIVE_MB], "ratio": 0.5}),
    ("/v1/retrieve", {"query": FIVE_MB, "mode": "bm25"}),
    ("/v1/ask", {"question": FIVE_MB, "mode": "bm25"}),
]


async def test_a_5mb_input_is_refused_while_the_model_thread_is_busy(
    production_server: Callable[..., Any], gated: Any, index_dir: Path
) -> None:
    with production_server(
        reranker=gated, cache_backend="none", index_dir=str(index_dir), max_body_bytes=20_000_000
    ) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as c:
            # A small request takes the model thread and keeps it until the gate opens.
            held = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            seconds: dict[str, float] = {}
            for route, body in ROUTES:
                started = time.perf_counter()
                resp = await c.post(route, json=body)
                seconds[route] = time.perf_counter() - started
                assert resp.status_code == 413, (route, resp.text)
                assert resp.json()["error_type"] == "input_too_large"
                message = resp.json()["message"]
                assert "RAGATTN_MAX_TOKENS_PER_DOC" in message or (
                    "RAGATTN_MAX_QUERY_TOKENS" in message
                ), message
            assert not held.done(), "the held request finished: the refusals proved nothing"
            gated.gate.set()
            assert (await held).status_code == 200
    # Refused without tokenizing 5 MB (~7 s here): in the time it takes to send and parse it.
    assert max(seconds.values()) < 1.0, seconds


async def test_a_long_query_within_the_character_bound_is_counted_off_the_model_thread(
    production_server: Callable[..., Any], gated: Any
) -> None:
    """A query whose token lower bound (characters, and which bytes the vocabulary joins) is
    within the limit needs a token count; it is counted on the tokenizer thread: refused with its
    exact token count while the model thread is still held. ``word`` × 100 has 100 tokens and a
    bound of about 34."""
    with production_server(reranker=gated, cache_backend="none", max_query_tokens=64) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as c:
            held = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            resp = await c.post(
                "/v2/rerank", json={"query": " ".join(["word"] * 100), "documents": ["a"]}
            )
            assert not held.done()
            gated.gate.set()
            await held
    assert resp.status_code == 413
    assert resp.json()["message"].startswith("query has 100 tokens; the limit is 64")
