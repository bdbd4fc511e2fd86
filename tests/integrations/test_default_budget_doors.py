"""Issue 62, item 4: a call that names no budget gets :data:`~ragattn.types.DEFAULT_BUDGET` (a ratio
of 0.2 with a ceiling of 1,024 tokens) on every door: the library's verbs, the REST routes over a
live server (``/v1/compress``, ``/v1/rerank_compress``, the rerank routes' ``prune: {}``), the
SDK against that server, and an adapter. Each answer equals the explicit
``ratio=0.2, max_tokens=1024`` call's and differs from ``ratio=0.5`` (the compressing adapters'
old default), so a door that fell back to another default would fail here. The CLI's door
(``ragattn batch compress``) is tested in tests/unit/batch/test_batch.py, the pipeline's
(``ask``) in tests/unit/test_budget.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragattn.client import Client
from ragattn.types import DEFAULT_BUDGET, Budget

pytestmark = pytest.mark.slow

API_KEY = "integrations-test-key"
"""The live service's key (tests/integrations/conftest.py)."""

EXPLICIT = {"ratio": 0.2, "max_tokens": 1024}


def test_the_default_budget_is_a_fifth_at_most_1024_tokens() -> None:
    assert Budget(kind="ratio", value=0.2, max_tokens=1024) == DEFAULT_BUDGET
    assert DEFAULT_BUDGET.keywords() == EXPLICIT


def test_the_library_verbs_give_the_default_budget(compressor: Any, corpus: Any) -> None:
    texts = list(corpus.texts)
    default = compressor.compress(corpus.query, texts)
    assert default == compressor.compress(corpus.query, texts, **EXPLICIT)
    assert default == compressor.compress(corpus.query, texts, budget=DEFAULT_BUDGET)
    half = compressor.compress(corpus.query, texts, ratio=0.5)
    assert default.compressed_tokens < half.compressed_tokens
    assert default.compressed_tokens <= 0.2 * default.origin_tokens or len(default.kept_spans) == 1
    ranked, read = compressor.rerank_and_compress(corpus.query, texts)
    want = compressor.rerank_and_compress(corpus.query, texts, **EXPLICIT)
    assert (ranked, read) == want
    # a ceiling alone replaces the default's 1,024: the same as the explicit ratio 0.2 under it
    capped = compressor.compress(corpus.query, texts, max_tokens=8)
    assert capped == compressor.compress(corpus.query, texts, ratio=0.2, max_tokens=8)


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    resp = httpx.post(f"{url}{path}", json=body, headers=headers, timeout=300)
    assert resp.status_code == 200, resp.text
    return {k: v for k, v in resp.json().items() if k not in ("id", "meta")}


def test_the_rest_routes_give_the_default_budget(
    server_url: str, compressor: Any, corpus: Any
) -> None:
    texts = list(corpus.texts)
    want = compressor.compress(corpus.query, texts, **EXPLICIT)
    base = {"query": corpus.query, "documents": texts}
    none = _post(server_url, "/v1/compress", base)
    assert (none["compressed_text"], none["compressed_tokens"]) == (
        want.compressed_text,
        want.compressed_tokens,
    )
    assert none == _post(server_url, "/v1/compress", {**base, **EXPLICIT})
    half = _post(server_url, "/v1/compress", {**base, "ratio": 0.5})
    assert half["compressed_tokens"] > none["compressed_tokens"]
    # ``max_tokens`` alone: the default ratio under that ceiling
    alone = _post(server_url, "/v1/compress", {**base, "max_tokens": 8})
    assert alone == _post(server_url, "/v1/compress", {**base, "ratio": 0.2, "max_tokens": 8})

    _, read = compressor.rerank_and_compress(corpus.query, texts, **EXPLICIT)
    both = _post(server_url, "/v1/rerank_compress", base)
    assert both["compression"]["compressed_tokens"] == read.compressed_tokens
    assert both == _post(server_url, "/v1/rerank_compress", {**base, **EXPLICIT})

    pruned = httpx.post(
        f"{server_url}/v2/rerank",
        json={**base, "prune": {}},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=300,
    )
    assert pruned.status_code == 200, pruned.text
    explicit = httpx.post(
        f"{server_url}/v2/rerank",
        json={**base, "prune": EXPLICIT},
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=300,
    )
    assert pruned.json()["results"] == explicit.json()["results"]
    assert pruned.json()["meta"]["pruning"] == explicit.json()["meta"]["pruning"]


def test_the_sdk_sends_no_budget_and_gets_the_default(
    client: Client, compressor: Any, corpus: Any
) -> None:
    texts = list(corpus.texts)
    remote = client.compress(corpus.query, texts)
    assert remote == compressor.compress(corpus.query, texts, **EXPLICIT)
    assert remote == client.compress(corpus.query, texts, budget=DEFAULT_BUDGET)
    assert (
        remote.compressed_tokens < client.compress(corpus.query, texts, ratio=0.5).compressed_tokens
    )
    pair = client.rerank_and_compress(corpus.query, texts)
    assert pair == compressor.rerank_and_compress(corpus.query, texts, **EXPLICIT)
    pruned = client.rerank(corpus.query, texts, prune={})
    explicit = client.rerank(corpus.query, texts, prune=DEFAULT_BUDGET)
    assert [r.pruned_text for r in pruned] == [r.pruned_text for r in explicit]
    assert any(r.pruned_text for r in pruned)


def test_an_adapter_given_no_budget_keeps_the_default(compressor: Any, corpus: Any) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from ragattn.integrations.langchain import RagattnCompressor

    docs = [Document(page_content=t, id=i) for t, i in zip(corpus.texts, corpus.ids, strict=True)]
    default = RagattnCompressor(compressor=compressor)
    explicit = RagattnCompressor(compressor=compressor, **EXPLICIT)
    half = RagattnCompressor(compressor=compressor, ratio=0.5)
    got = default.compress_documents(docs, corpus.query)
    want = explicit.compress_documents(docs, corpus.query)
    assert [(d.id, d.page_content, d.metadata) for d in got] == [
        (d.id, d.page_content, d.metadata) for d in want
    ]
    kept = sum(len(d.page_content) for d in got)
    assert kept < sum(len(d.page_content) for d in half.compress_documents(docs, corpus.query))
