"""Issue 59 §2: a document's title counts against the limits, as its text does.

The proxy reads each title before its text, but only texts were counted: 30 documents of four
words with 50,000-word titles were admitted and held the model thread for 30 s. Here the same
shape, scaled down to a small budget: over it only because of the titles, it is refused on every
model route while another request holds the model thread, without a tokenizer pass; and the
per-document limit counts a title with its text.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SENTENCE = "Paris is the capital of France and lies on the Seine. "
TITLE = SENTENCE * 8  # about 100 proxy tokens
ROUTES = [
    ("/v2/rerank", {}),
    ("/v1/rerank", {}),
    ("/v1/compress", {"ratio": 0.5}),
    ("/v1/rerank_compress", {"ratio": 0.5}),
]


def _tokenize_jobs(metrics: str) -> float:
    """How many jobs the tokenizer thread has run (``ragattn_model_seconds{task="tokenize"}``)."""
    found = re.search(r'^ragattn_model_seconds_count\{task="tokenize"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


async def test_titles_over_the_budget_are_refused_before_the_request_is_queued(
    production_server: Callable[..., Any], gated: Any
) -> None:
    titled = {
        "query": "capital?",
        "documents": [{"text": "four words of text", "title": TITLE}] * 30,
    }
    with production_server(reranker=gated, cache_backend="none", max_request_tokens=1024) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            held = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 60)
            before = _tokenize_jobs((await c.get("/metrics")).text)
            for route, extra in ROUTES:
                resp = await c.post(route, json={**titled, **extra})
                assert resp.status_code == 413, (route, resp.text)
                assert resp.json()["error_type"] == "input_too_large"
                message = resp.json()["message"]
                assert "the request has at least" in message, message
                assert "the limit is 1024 per request" in message, message
            # Refused by the lower bound: the tokenizer thread never saw the titles.
            assert _tokenize_jobs((await c.get("/metrics")).text) == before
            assert not held.done(), "the held request finished: the refusals proved nothing"
            gated.gate.set()
            assert (await held).status_code == 200
            # The same documents without their titles fit: the titles alone took it over.
            untitled = {**titled, "documents": [{"text": "four words of text"}] * 30}
            assert (await c.post("/v2/rerank", json=untitled)).status_code == 200
            # The same words sent as text are refused alike.
            as_text = {**titled, "documents": [TITLE + "\nfour words of text"] * 30}
            assert (await c.post("/v2/rerank", json=as_text)).status_code == 413


async def test_the_per_document_limit_counts_the_title_with_the_text(
    production_server: Callable[..., Any], proxy: Any
) -> None:
    def tokens(text: str) -> int:
        return len(proxy.tokenizer(text, add_special_tokens=False)["input_ids"])

    title = (SENTENCE * 3).strip()  # a title is read stripped
    text = SENTENCE * 4
    limit = tokens(text) + tokens(title) // 2  # the text fits alone, not with its title
    with production_server(cache_backend="none", max_tokens_per_doc=limit) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            plain = {"query": "capital?", "documents": [text], "return_documents": True}
            assert (await c.post("/v2/rerank", json=plain)).status_code == 200
            titled = {**plain, "documents": [{"text": text, "title": title}]}
            for route, extra in ROUTES:
                resp = await c.post(route, json={**titled, **extra})
                assert resp.status_code == 413, (route, resp.text)
                message = resp.json()["message"]
                size = tokens(title) + tokens(text)
                assert message.startswith(f"documents[0] has {size} tokens; the limit is {limit}")
                assert "its title and text together (RAGATTN_MAX_TOKENS_PER_DOC)" in message
            # Truncated instead: the text gives way, the title is kept whole.
            cap = limit - 4
            resp = await c.post("/v2/rerank", json={**titled, "max_tokens_per_doc": cap})
            assert resp.status_code == 200, resp.text
            answer = resp.json()
            kept = answer["results"][0]["document"]["text"]
            assert text.startswith(kept) and tokens(title) + tokens(kept) == cap
            assert (
                f"documents[0] truncated from {size} to {cap} tokens "
                f"(max_tokens_per_doc; its {tokens(title)}-token title kept)"
            ) in answer["meta"]["warnings"]
            # A title alone at the limit is refused by name: a title is never cut.
            long_title = {**plain, "documents": [{"text": "a", "title": SENTENCE * 40}]}
            resp = await c.post("/v2/rerank", json={**long_title, "max_tokens_per_doc": cap})
            assert resp.status_code == 413, resp.text
            assert resp.json()["message"].startswith("documents[0].title has "), resp.text
