"""Client and AsyncClient against a live service equal the in-process engines exactly."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from ragattn.client import AsyncClient, Client, ServiceError
from ragattn.errors import InvalidInputError
from ragattn.types import Document

pytestmark = pytest.mark.slow

API_KEY = "integrations-test-key"


def docs(corpus: Any) -> list[Document]:
    return [
        Document(text=t, id=i, metadata=m)
        for t, i, m in zip(corpus.texts, corpus.ids, corpus.metadata, strict=True)
    ]


def test_rerank_equals_in_process(
    client: Client, server_url: str, reranker: Any, corpus: Any
) -> None:
    inputs = docs(corpus)
    local = reranker.rerank(corpus.query, inputs, top_n=2)
    remote = client.rerank(corpus.query, inputs, top_n=2)

    async def run() -> Any:
        async with AsyncClient(server_url, api_key=API_KEY, timeout_s=300) as ac:
            return await ac.rerank(corpus.query, inputs, top_n=2)

    remote_async = asyncio.run(run())
    assert [r.index for r in local] == [1, 2]  # Paris answers the question
    assert remote == local and remote_async == local  # index, both scores, document
    assert all(r.document is inputs[r.index] for r in (*remote, *remote_async))
    assert remote.warnings == local.warnings == ()


def test_compress_equals_in_process(
    client: Client, server_url: str, compressor: Any, corpus: Any
) -> None:
    inputs = docs(corpus)
    local = compressor.compress(corpus.query, inputs, ratio=0.5)
    remote = client.compress(corpus.query, inputs, ratio=0.5)

    async def run() -> Any:
        async with AsyncClient(server_url, api_key=API_KEY, timeout_s=300) as ac:
            return await ac.compress(corpus.query, inputs, ratio=0.5)

    # Every field: text, spans, sentence scores and spans, token counts, tokenizer, method.
    assert remote == local
    assert asyncio.run(run()) == local
    for d in remote.documents:
        assert d.document is inputs[d.index]
        assert all(d.document.text[s.start : s.end] == s.text for s in d.kept_spans)


def test_server_errors_arrive_typed(client: Client, server_url: str, corpus: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        client.rerank("   ", list(corpus.texts))
    err: Any = info.value
    assert (err.error_type, err.status_code) == ("invalid_request", 400)
    with pytest.raises(InvalidInputError, match=re.escape("send at most one budget")):
        client.compress(corpus.query, list(corpus.texts), ratio=0.5, threshold=0.5)
    with Client(server_url) as anonymous, pytest.raises(ServiceError) as info:
        anonymous.rerank(corpus.query, list(corpus.texts))
    err = info.value
    assert (err.error_type, err.status_code) == ("unauthorized", 401)


def test_rerank_and_compress_equals_in_process(
    client: Client, server_url: str, compressor: Any, corpus: Any
) -> None:
    if not hasattr(compressor, "rerank_and_compress"):
        pytest.skip("this Compressor has no rerank_and_compress")
    inputs = docs(corpus)
    local = compressor.rerank_and_compress(corpus.query, inputs, top_n=2, ratio=0.5)
    remote = client.rerank_and_compress(corpus.query, inputs, top_n=2, ratio=0.5)

    async def run() -> Any:
        async with AsyncClient(server_url, api_key=API_KEY, timeout_s=300) as ac:
            return await ac.rerank_and_compress(corpus.query, inputs, top_n=2, ratio=0.5)

    assert remote == local and asyncio.run(run()) == local
    ranked, compressed = remote
    assert [d.index for d in compressed.documents] == [r.index for r in ranked]
    assert all(r.document is inputs[r.index] for r in ranked)
