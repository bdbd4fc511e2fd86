"""LangChain adapters on the in-process engines and on a live service: same order, scores,
metadata and document identity, sync and async alike, also inside ContextualCompressionRetriever.

The one read (the retriever's and the compressor's default) is compared with the engine's own
``rerank_and_compress`` on the same documents; the earlier step pipelines with ``rerank`` /
``compress``.
"""

from __future__ import annotations

import asyncio
import logging
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
from ragattn.types import DEFAULT_BUDGET  # noqa: E402

KEPT = "ragattn_kept_spans"
RAW = "ragattn_raw_score"

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


def expected_read(compressor: Any, corpus: Any, **kw: Any) -> Any:
    """The engine's own one read of the corpus: ``(RerankResults, CompressionResult)``."""
    return compressor.rerank_and_compress(corpus.query, list(corpus.texts), **kw)


def assert_read(
    out: list[Document], inputs: list[Document], pair: Any, *, drop_empty: bool = True
) -> None:
    """``out`` is the one read ``pair`` of ``inputs``: best first, each a copy with the kept
    text, the original metadata plus scores and kept spans that slice back to the input text."""
    ranked, compression = pair
    kept = {d.index: d for d in compression.documents}
    want = [r for r in ranked if kept[r.index].text or not drop_empty]
    assert [d.id for d in out] == [inputs[r.index].id for r in want]
    for got, r in zip(out, want, strict=True):
        source, doc = inputs[r.index], kept[r.index]
        assert got is not source and got.page_content == doc.text
        spans = got.metadata[KEPT]
        assert [(s["start"], s["end"], s["text"]) for s in spans] == [
            (s.start, s.end, s.text) for s in doc.kept_spans
        ]
        assert all(source.page_content[s["start"] : s["end"]] == s["text"] for s in spans)
        assert got.metadata == {
            **source.metadata,
            "relevance_score": pytest.approx(r.relevance_score, abs=1e-9),
            RAW: pytest.approx(r.raw_score, abs=1e-9),
            KEPT: spans,
        }
    scores = [d.metadata["relevance_score"] for d in out]
    assert scores == sorted(scores, reverse=True) and all(0 <= x <= 1 for x in scores)


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


def test_compressor_in_input_order_keeps_spans_and_identity(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """``order="input"``: the earlier compress-only behaviour (input order, no scores)."""
    inputs = lc_docs(corpus)
    adapter = RagattnCompressor(compressor=engines[1], ratio=0.5, order="input", drop_empty=False)
    out = adapter.compress_documents(inputs, corpus.query)
    want = compressor.compress(corpus.query, list(corpus.texts), ratio=0.5)
    assert [d.id for d in out] == list(corpus.ids)
    for got, source, w in zip(out, inputs, want.documents, strict=True):
        assert got.page_content == w.text
        spans = got.metadata.pop(KEPT)
        assert got.metadata == source.metadata
        assert [(s["start"], s["end"]) for s in spans] == [(s.start, s.end) for s in w.kept_spans]
        assert all(source.page_content[s["start"] : s["end"]] == s["text"] for s in spans)
        assert [s["score"] for s in spans] == pytest.approx([s.score for s in w.kept_spans])
    assert asyncio.run(adapter.acompress_documents(inputs, corpus.query)) == (
        adapter.compress_documents(inputs, corpus.query)
    )
    dropping = RagattnCompressor(compressor=engines[1], ratio=0.5, order="input")
    kept_ids = [corpus.ids[d.index] for d in want.documents if d.text]
    assert [d.id for d in dropping.compress_documents(inputs, corpus.query)] == kept_ids


def test_compressor_one_read_ranks_prunes_and_scores(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """The default: one read, best first, kept text, scores and spans, as the engine's own
    ``rerank_and_compress``; ``top_n`` ranks all and keeps the best."""
    inputs = lc_docs(corpus)
    snapshot = [d.model_copy(deep=True) for d in inputs]
    adapter = RagattnCompressor(compressor=engines[1], ratio=0.5, drop_empty=False)
    out = adapter.compress_documents(inputs, corpus.query)
    assert len(out) == 3
    assert_read(out, inputs, expected_read(compressor, corpus, ratio=0.5), drop_empty=False)
    assert inputs == snapshot  # inputs untouched
    assert asyncio.run(adapter.acompress_documents(inputs, corpus.query)) == out
    top = RagattnCompressor(compressor=engines[1], ratio=0.5, top_n=2)
    pair = expected_read(compressor, corpus, ratio=0.5, top_n=2)
    assert_read(top.compress_documents(inputs, corpus.query), inputs, pair)


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


def test_retriever_one_read_returns_at_most_k_best_first(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    inputs = lc_docs(corpus)
    retriever = RagattnRetriever(
        base_retriever=ListRetriever(documents=inputs), compressor=engines[1], k=2, ratio=0.5
    )
    out = retriever.invoke(corpus.query)
    assert_read(out, inputs, expected_read(compressor, corpus, ratio=0.5, top_n=2))
    assert asyncio.run(retriever.ainvoke(corpus.query)) == out
    one = retriever.invoke(corpus.query, k=1)  # LangChain passes invoke's k through
    assert len(one) == 1
    assert_read(one, inputs, expected_read(compressor, corpus, ratio=0.5, top_n=1))
    assert asyncio.run(retriever.ainvoke(corpus.query, k=1)) == one
    with pytest.raises(InvalidInputError, match=re.escape("k must be a positive integer")):
        retriever.invoke(corpus.query, k=0)
    empty = RagattnRetriever(base_retriever=ListRetriever(documents=[]), compressor=engines[1])
    assert empty.invoke(corpus.query) == [] == asyncio.run(empty.ainvoke(corpus.query))


def test_retriever_leaves_out_documents_with_nothing_kept_or_keeps_their_best_sentence(
    engines: tuple[Any, Any], compressor: Any, corpus: Any, caplog: pytest.LogCaptureFixture
) -> None:
    inputs = lc_docs(corpus)
    base = ListRetriever(documents=inputs)
    ranked, compression = pair = expected_read(compressor, corpus, ratio=0.2, top_n=3)
    empty = [d.index for d in compression.documents if not d.text]
    assert empty  # a fifth of the tokens: some of the three keep nothing
    with caplog.at_level(logging.INFO, logger="ragattn.integrations"):
        out = RagattnRetriever(
            base_retriever=base, compressor=engines[1], k=3, keep_best_sentence=False
        ).invoke(corpus.query)
    assert len(out) == 3 - len(empty)
    assert_read(out, inputs, pair)
    assert f"(input positions {empty}); they are left out" in caplog.text

    filled = RagattnRetriever(base_retriever=base, compressor=engines[1], k=3)  # the default
    full = filled.invoke(corpus.query)
    assert [d.id for d in full] == [corpus.ids[r.index] for r in ranked]
    kept = {d.index: d for d in compression.documents}
    for got, r in zip(full, ranked, strict=True):
        doc = kept[r.index]
        assert got.metadata["relevance_score"] == pytest.approx(r.relevance_score, abs=1e-9)
        if doc.text:
            assert got.page_content == doc.text
            continue
        scores = doc.sentence_scores
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        start, end = doc.sentence_spans[best]
        assert got.page_content == corpus.texts[r.index][start:end]
        assert got.metadata[KEPT] == [
            {
                "start": start,
                "end": end,
                "score": pytest.approx(scores[best], abs=1e-9),
                "text": got.page_content,
            }
        ]
    assert asyncio.run(filled.ainvoke(corpus.query)) == full


def test_retriever_steps_keep_the_earlier_pipelines(
    engines: tuple[Any, Any], reranker: Any, corpus: Any
) -> None:
    """Given ``rerank`` and/or ``compress`` steps, the retriever runs them instead of the one
    read, and returns at most ``k`` of their documents."""
    inputs = lc_docs(corpus)
    base = ListRetriever(documents=inputs)
    rerank_only = RagattnRetriever(
        base_retriever=base, rerank=RagattnRerank(reranker=engines[0], top_n=None), k=2
    )
    ranked = expected_rerank(reranker, corpus, None)
    out = rerank_only.invoke(corpus.query)
    assert [d.id for d in out] == [corpus.ids[r.index] for r in ranked[:2]]
    assert [d.page_content for d in out] == [corpus.texts[r.index] for r in ranked[:2]]
    assert [d.id for d in rerank_only.invoke(corpus.query, k=1)] == [corpus.ids[ranked[0].index]]
    compress_only = RagattnRetriever(
        base_retriever=base,
        compress=RagattnCompressor(compressor=engines[1], threshold=0.0, order="input"),
    )
    out = compress_only.invoke(corpus.query)
    assert [d.id for d in out] == list(corpus.ids)  # the base retriever's order
    assert [d.page_content for d in out] == list(corpus.texts)  # threshold 0 keeps every sentence


def test_adapters_refuse_bad_configuration(reranker: Any, compressor: Any) -> None:
    with pytest.raises(InvalidInputError, match=re.escape("give at most one budget")):
        RagattnCompressor(compressor=compressor, ratio=0.5, threshold=0.2)
    with pytest.raises(InvalidInputError, match=re.escape("reranker must be a ragattn Reranker")):
        RagattnRerank(reranker=compressor)
    with pytest.raises(InvalidInputError, match=re.escape("top_n must be a positive integer")):
        RagattnRerank(reranker=reranker, top_n=0)
    with pytest.raises(InvalidInputError, match=re.escape("top_n keeps the best documents")):
        RagattnCompressor(compressor=compressor, order="input", top_n=2)
    base = ListRetriever(documents=[])
    with pytest.raises(InvalidInputError, match=re.escape("k must be a positive integer")):
        RagattnRetriever(base_retriever=base, k=0)
    with pytest.raises(InvalidInputError, match=re.escape("give at most one budget")):
        RagattnRetriever(base_retriever=base, ratio=0.2, target_tokens=50)
    with pytest.raises(InvalidInputError, match=re.escape("ratio is the fraction of tokens")):
        RagattnRetriever(base_retriever=base, ratio=1.5)
    with pytest.raises(
        InvalidInputError,
        match=re.escape("compressor must be a ragattn Compressor, Client or AsyncClient "),
    ):
        RagattnRetriever(base_retriever=base, compressor=reranker)
    with pytest.raises(InvalidInputError, match=re.escape("ratio configure the one read")):
        RagattnRetriever(base_retriever=base, rerank=RagattnRerank(reranker=reranker), ratio=0.3)


def test_adapters_work_with_no_engine_argument(corpus: Any) -> None:
    """As ``CohereRerank()`` does, the adapters run with their defaults: the shared in-process
    ``Reranker()`` / ``Compressor()``, built on the first call; the compressor's one read and the
    retriever's (with ``k=4``) under every door's DEFAULT_BUDGET (ratio 0.2, at most 1,024)."""
    from ragattn import Compressor, Reranker
    from ragattn.integrations import default_compressor, default_reranker

    inputs = lc_docs(corpus)
    want = Reranker().rerank(corpus.query, list(corpus.texts), top_n=3)
    out = RagattnRerank().compress_documents(inputs, corpus.query)
    assert [d.id for d in out] == [corpus.ids[r.index] for r in want]
    assert [d.metadata["relevance_score"] for d in out] == [r.relevance_score for r in want]
    assert isinstance(default_reranker(), Reranker)
    assert default_reranker() is default_reranker()  # one shared engine per process

    engine = default_compressor()
    assert isinstance(engine, Compressor)
    compressed = RagattnCompressor().compress_documents(inputs, corpus.query)
    assert_read(compressed, inputs, expected_read(engine, corpus, budget=DEFAULT_BUDGET))
    assert compressed[0].id == "paris"  # the packaged default ranks the answer first

    # The retriever's default: one read, k=4, a fifth of the tokens.
    ranked, _ = pair = expected_read(engine, corpus, budget=DEFAULT_BUDGET, top_n=4)
    got = RagattnRetriever(base_retriever=ListRetriever(documents=inputs)).invoke(corpus.query)
    assert [d.id for d in got] == [inputs[r.index].id for r in ranked]  # k=4 come back
    budget_only = RagattnRetriever(
        base_retriever=ListRetriever(documents=inputs), keep_best_sentence=False
    ).invoke(corpus.query)
    assert_read(budget_only, inputs, pair)
    assert got[0].id == "paris"
    assert "capital" in got[0].page_content
    built = RagattnRetriever.from_engines(ListRetriever(documents=inputs))  # a rerank step
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


def test_an_async_client_engine_serves_the_one_read(
    server_url: str, compressor: Any, corpus: Any
) -> None:
    from ragattn.client import AsyncClient

    engine = AsyncClient(server_url, api_key="integrations-test-key", timeout_s=300)
    inputs = lc_docs(corpus)
    retriever = RagattnRetriever(
        base_retriever=ListRetriever(documents=inputs), compressor=engine, k=2, ratio=0.5
    )

    async def run_async() -> Any:
        try:
            return await retriever.ainvoke(corpus.query)
        finally:
            await engine.aclose()

    async_out = asyncio.run(run_async())
    sync_out = retriever.invoke(corpus.query)  # through the sync twin
    assert_read(sync_out, inputs, expected_read(compressor, corpus, ratio=0.5, top_n=2))
    assert async_out == sync_out


# ---- titles from metadata --------------------------------------------------------------------

TITLES = ("Banana", "Paris", 2024)
"""The corpus' ``metadata["title"]`` values: two titles and a number (not a title: untitled),
so titled and untitled documents mix in one call."""


def titled_docs(corpus: Any, key: str = "title") -> list[Document]:
    return [
        Document(page_content=t, id=i, metadata={**m, key: title})
        for t, i, m, title in zip(corpus.texts, corpus.ids, corpus.metadata, TITLES, strict=True)
    ]


def library_docs(corpus: Any, *, titled: bool = True) -> list[Any]:
    """The same documents as the library takes them: ``ragattn.Document`` with the titles."""
    from ragattn.types import Document as RagattnDocument

    return [
        RagattnDocument(text=t, id=i, title=title if titled and isinstance(title, str) else None)
        for t, i, title in zip(corpus.texts, corpus.ids, TITLES, strict=True)
    ]


def test_a_title_in_metadata_reaches_the_read(
    engines: tuple[Any, Any], reranker: Any, compressor: Any, corpus: Any
) -> None:
    """Given ``metadata["title"]``, the adapters keep exactly what the library keeps for the same
    titled ``Document``s (kept text, spans, order, scores), through the service too; a number is
    no title; ``title_key=None`` reads none."""
    inputs = titled_docs(corpus)
    titled = compressor.rerank_and_compress(corpus.query, library_docs(corpus), ratio=0.5)
    out = RagattnCompressor(compressor=engines[1], ratio=0.5, drop_empty=False).compress_documents(
        inputs, corpus.query
    )
    assert len(out) == 3
    assert_read(out, inputs, titled, drop_empty=False)
    assert [d.metadata["title"] for d in out] == [TITLES[r.index] for r in titled[0]]

    untitled = compressor.rerank_and_compress(
        corpus.query, library_docs(corpus, titled=False), ratio=0.5
    )
    blind = RagattnCompressor(compressor=engines[1], ratio=0.5, drop_empty=False, title_key=None)
    assert_read(blind.compress_documents(inputs, corpus.query), inputs, untitled, drop_empty=False)

    want = reranker.rerank(corpus.query, library_docs(corpus), top_n=None)
    ranked = RagattnRerank(reranker=engines[0], top_n=None).compress_documents(inputs, corpus.query)
    assert [d.id for d in ranked] == [corpus.ids[r.index] for r in want]
    assert [d.metadata["relevance_score"] for d in ranked] == pytest.approx(
        [r.relevance_score for r in want], abs=1e-9
    )


def test_titles_change_the_default_read(proxy: Any, corpus: Any) -> None:
    """With the default method (whose document relevance reads ``title + text``), the titles from
    metadata change the read: the adapter equals the library on the titled documents, and its
    scores differ from the same adapter reading no titles."""
    from ragattn.compress import Compressor

    engine = Compressor(proxy)  # the default method, on the session's proxy
    inputs = titled_docs(corpus)
    titled = engine.rerank_and_compress(corpus.query, library_docs(corpus), ratio=0.5)
    out = RagattnCompressor(compressor=engine, ratio=0.5, drop_empty=False).compress_documents(
        inputs, corpus.query
    )
    assert_read(out, inputs, titled, drop_empty=False)
    blind = RagattnCompressor(compressor=engine, ratio=0.5, drop_empty=False, title_key=None)
    untitled = blind.compress_documents(inputs, corpus.query)
    assert [d.metadata[RAW] for d in out] != [d.metadata[RAW] for d in untitled]


def test_the_retriever_reads_titles_by_key_or_callable(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """``title_key`` names another metadata key, or computes the title from the document; the
    one read then equals the library's on the titled documents, sync and async."""
    inputs = titled_docs(corpus, key="heading")
    titled = compressor.rerank_and_compress(corpus.query, library_docs(corpus), ratio=0.5, top_n=2)
    for title_key in ("heading", lambda d: d.metadata.get("heading")):
        retriever = RagattnRetriever(
            base_retriever=ListRetriever(documents=inputs),
            compressor=engines[1],
            k=2,
            ratio=0.5,
            keep_best_sentence=False,
            title_key=title_key,
        )
        out = retriever.invoke(corpus.query)
        assert_read(out, inputs, titled)
        assert asyncio.run(retriever.ainvoke(corpus.query)) == out


def test_the_title_key_belongs_to_the_one_read_or_to_each_step(reranker: Any) -> None:
    base = ListRetriever(documents=[])
    with pytest.raises(InvalidInputError, match=re.escape("title_key configure the one read")):
        RagattnRetriever(
            base_retriever=base, rerank=RagattnRerank(reranker=reranker), title_key="name"
        )
    built = RagattnRetriever.from_engines(base, reranker=reranker, title_key="name")
    assert built.rerank is not None and built.rerank.title_key == "name"


GERMAN = "Er kam am 12. Mai nach Hause zurück. Dann schlief er lange."
GERMAN_SENTENCES = ["Er kam am 12. Mai nach Hause zurück.", "Dann schlief er lange."]
"""Two sentences under German rules; English rules end one after "am 12."."""


def test_the_language_reaches_the_read(engines: tuple[Any, Any], reranker: Any) -> None:
    _, compressor = engines
    query = "Wann kam er nach Hause?"
    docs = [Document(page_content=GERMAN, id="g")]
    for order in ("input", "rank"):
        adapter = RagattnCompressor(compressor=compressor, ratio=1.0, order=order, language="de")
        (out,) = adapter.compress_documents(docs, query)
        assert [s["text"] for s in out.metadata[KEPT]] == GERMAN_SENTENCES, order
    base = ListRetriever(documents=docs)
    retriever = RagattnRetriever(
        base_retriever=base, compressor=compressor, ratio=1.0, language="de"
    )
    (got,) = retriever.invoke(query)
    assert [s["text"] for s in got.metadata[KEPT]] == GERMAN_SENTENCES
    steps = RagattnRetriever.from_engines(base, compressor=compressor, ratio=1.0, language="de")
    (step,) = steps.invoke(query)
    assert [s["text"] for s in step.metadata[KEPT]] == GERMAN_SENTENCES
    (english,) = RagattnCompressor(
        compressor=compressor, ratio=1.0, language="en"
    ).compress_documents(docs, query)
    assert [s["text"] for s in english.metadata[KEPT]] != GERMAN_SENTENCES
    with pytest.raises(InvalidInputError, match=re.escape("unknown language 'xx'; valid: auto")):
        RagattnCompressor(compressor=compressor, language="xx")
    with pytest.raises(InvalidInputError, match=re.escape("unknown language 'xx'; valid: auto")):
        RagattnRetriever(base_retriever=base, compressor=compressor, language="xx")
    with pytest.raises(InvalidInputError, match=re.escape("language configure the one read")):
        RagattnRetriever(
            base_retriever=base, rerank=RagattnRerank(reranker=reranker), language="de"
        )
