"""LangChain adapters on the in-process engines and on a live service: same order, scores,
metadata and document identity, sync and async alike, also inside ContextualCompressionRetriever."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_classic.retrievers import ContextualCompressionRetriever  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from ragattn.errors import InvalidInputError  # noqa: E402
from ragattn.integrations.langchain import (  # noqa: E402
    RagattnCompressor,
    RagattnRerank,
    RagattnRetriever,
)

pytestmark = pytest.mark.slow


class ListRetriever(BaseRetriever):
    """A first stage that returns fixed documents, in a fixed (deliberately poor) order."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(self.documents)


def lc_docs(corpus: Any) -> list[Document]:
    return [
        Document(page_content=t, id=i, metadata=dict(m))
        for t, i, m in zip(corpus.texts, corpus.ids, corpus.metadata, strict=True)
    ]


def expected_rerank(reranker: Any, corpus: Any, top_n: int | None) -> Any:
    return reranker.rerank(corpus.query, list(corpus.texts), top_n=top_n)


def test_rerank_order_scores_metadata_and_identity(
    engines: tuple[Any, Any], reranker: Any, corpus: Any
) -> None:
    inputs = lc_docs(corpus)
    snapshot = [d.model_copy(deep=True) for d in inputs]
    adapter = RagattnRerank(reranker=engines[0], top_n=2)
    out = adapter.compress_documents(inputs, corpus.query)
    want = expected_rerank(reranker, corpus, 2)
    assert [d.id for d in out] == ["paris", "rhine"] == [corpus.ids[r.index] for r in want]
    for got, r in zip(out, want, strict=True):
        source = inputs[r.index]
        assert got is not source and got.page_content == source.page_content
        assert got.metadata == {
            **source.metadata,
            "relevance_score": pytest.approx(r.relevance_score, abs=1e-9),
            "ragattn_raw_score": pytest.approx(r.raw_score, abs=1e-9),
        }
    assert inputs == snapshot  # inputs untouched
    assert asyncio.run(adapter.acompress_documents(inputs, corpus.query)) == out


def test_rerank_inside_contextual_compression_retriever(
    engines: tuple[Any, Any], corpus: Any
) -> None:
    retriever = ContextualCompressionRetriever(
        base_compressor=RagattnRerank(reranker=engines[0], top_n=None),
        base_retriever=ListRetriever(documents=lc_docs(corpus)),
    )
    out = retriever.invoke(corpus.query)
    assert [d.id for d in out] == ["paris", "rhine", "fruit"]
    scores = [d.metadata["relevance_score"] for d in out]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert asyncio.run(retriever.ainvoke(corpus.query)) == out
    assert (
        ContextualCompressionRetriever(
            base_compressor=RagattnRerank(reranker=engines[0]),
            base_retriever=ListRetriever(documents=[]),
        ).invoke(corpus.query)
        == []
    )


def test_compressor_keeps_spans_and_identity(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    inputs = lc_docs(corpus)
    adapter = RagattnCompressor(compressor=engines[1], ratio=0.5, drop_empty=False)
    out = adapter.compress_documents(inputs, corpus.query)
    want = compressor.compress(corpus.query, list(corpus.texts), ratio=0.5)
    assert [d.id for d in out] == list(corpus.ids)
    for got, source, w in zip(out, inputs, want.documents, strict=True):
        assert got.page_content == w.text
        spans = got.metadata.pop("ragattn_kept_spans")
        assert got.metadata == source.metadata
        assert [(s["start"], s["end"]) for s in spans] == [(s.start, s.end) for s in w.kept_spans]
        assert all(source.page_content[s["start"] : s["end"]] == s["text"] for s in spans)
        assert [s["score"] for s in spans] == pytest.approx([s.score for s in w.kept_spans])
    assert asyncio.run(adapter.acompress_documents(inputs, corpus.query)) == (
        adapter.compress_documents(inputs, corpus.query)
    )
    dropping = RagattnCompressor(compressor=engines[1], ratio=0.5)
    kept_ids = [corpus.ids[d.index] for d in want.documents if d.text]
    assert [d.id for d in dropping.compress_documents(inputs, corpus.query)] == kept_ids


def test_retriever_reranks_then_compresses(
    engines: tuple[Any, Any], reranker: Any, compressor: Any, corpus: Any
) -> None:
    retriever = RagattnRetriever.from_engines(
        ListRetriever(documents=lc_docs(corpus)),
        reranker=engines[0],
        compressor=engines[1],
        top_n=2,
        threshold=0.0,  # keep every sentence: the retriever's own steps stay visible
    )
    out = retriever.invoke(corpus.query)
    ranked = expected_rerank(reranker, corpus, 2)
    assert [d.id for d in out] == [corpus.ids[r.index] for r in ranked]
    for got, r in zip(out, ranked, strict=True):
        assert got.page_content == corpus.texts[r.index]
        assert got.metadata["relevance_score"] == pytest.approx(r.relevance_score, abs=1e-9)
        spans = got.metadata["ragattn_kept_spans"]
        assert len(spans) == 2  # both sentences kept at threshold 0
        assert all(corpus.texts[r.index][s["start"] : s["end"]] == s["text"] for s in spans)
        assert got.metadata["source"] == corpus.metadata[r.index]["source"]
    assert asyncio.run(retriever.ainvoke(corpus.query)) == out


def test_adapters_refuse_bad_configuration(reranker: Any, compressor: Any) -> None:
    with pytest.raises(InvalidInputError, match=re.escape("give exactly one budget")):
        RagattnCompressor(compressor=compressor, ratio=0.5, threshold=0.2)
    with pytest.raises(InvalidInputError, match=re.escape("reranker must be a ragattn Reranker")):
        RagattnRerank(reranker=compressor)
    with pytest.raises(InvalidInputError, match=re.escape("top_n must be a positive integer")):
        RagattnRerank(reranker=reranker, top_n=0)


def test_adapters_work_with_no_engine_argument(corpus: Any) -> None:
    """As ``CohereRerank()`` does, the adapters run with their defaults: the shared in-process
    ``Reranker()`` / ``Compressor()``, built on the first call, and a 0.5 ratio budget."""
    from ragattn import Compressor, Reranker
    from ragattn.integrations import default_compressor, default_reranker

    inputs = lc_docs(corpus)
    want = Reranker().rerank(corpus.query, list(corpus.texts), top_n=3)
    out = RagattnRerank().compress_documents(inputs, corpus.query)
    assert [d.id for d in out] == [corpus.ids[r.index] for r in want]
    assert [d.metadata["relevance_score"] for d in out] == [r.relevance_score for r in want]
    assert isinstance(default_reranker(), Reranker)
    assert default_reranker() is default_reranker()  # one shared engine per process

    compressed = RagattnCompressor().compress_documents(inputs, corpus.query)
    expect = Compressor().compress(corpus.query, list(corpus.texts), ratio=0.5)
    assert [d.page_content for d in compressed] == [d.text for d in expect.documents if d.text]
    assert isinstance(default_compressor(), Compressor)

    retriever = RagattnRetriever(base_retriever=ListRetriever(documents=inputs))
    assert [d.id for d in retriever.invoke(corpus.query)] == [d.id for d in out]
    built = RagattnRetriever.from_engines(ListRetriever(documents=inputs))
    assert [d.id for d in built.invoke(corpus.query)] == [d.id for d in out]


def test_an_async_client_engine_serves_both_paths(
    server_url: str, reranker: Any, corpus: Any
) -> None:
    from ragattn.client import AsyncClient

    engine = AsyncClient(server_url, api_key="integrations-test-key", timeout_s=300)
    adapter = RagattnRerank(reranker=engine, top_n=None)
    inputs = lc_docs(corpus)

    async def run_async() -> Any:
        try:
            return await adapter.acompress_documents(inputs, corpus.query)
        finally:
            await engine.aclose()

    async_out = asyncio.run(run_async())
    sync_out = adapter.compress_documents(inputs, corpus.query)  # through the sync twin
    want = expected_rerank(reranker, corpus, None)
    assert [d.id for d in sync_out] == [corpus.ids[r.index] for r in want]
    assert [d.metadata["relevance_score"] for d in sync_out] == pytest.approx(
        [r.relevance_score for r in want], abs=1e-9
    )
    assert async_out == sync_out
