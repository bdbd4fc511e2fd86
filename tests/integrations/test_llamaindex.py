"""LlamaIndex postprocessors on the in-process engines and on a live service: same order, scores,
metadata and node identity, sync and async alike, also inside a query engine.

The compression postprocessor's default, one read, is compared with the engine's own
``rerank_and_compress`` on the same nodes; ``order="input"`` with the earlier compress-only
behaviour.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import SummaryIndex  # noqa: E402
from llama_index.core.callbacks import (  # noqa: E402
    CallbackManager,
    CBEventType,
    LlamaDebugHandler,
)
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402

from ragattn.errors import InvalidInputError  # noqa: E402
from ragattn.integrations.llamaindex import (  # noqa: E402
    RagattnCompressPostprocessor,
    RagattnRerankPostprocessor,
)
from ragattn.types import DEFAULT_BUDGET  # noqa: E402

pytestmark = pytest.mark.slow

KEPT = "ragattn_kept_spans"
RAW = "ragattn_raw_score"


def nodes(corpus: Any) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=i, metadata=dict(m)), score=0.5 - 0.1 * k)
        for k, (t, i, m) in enumerate(zip(corpus.texts, corpus.ids, corpus.metadata, strict=True))
    ]


def test_rerank_returns_the_same_nodes_best_first(
    engines: tuple[Any, Any], reranker: Any, corpus: Any
) -> None:
    inputs = nodes(corpus)
    post = RagattnRerankPostprocessor(reranker=engines[0], top_n=2)
    out = post.postprocess_nodes(inputs, query_str=corpus.query)
    want = reranker.rerank(corpus.query, list(corpus.texts), top_n=2)
    assert [n.node.node_id for n in out] == ["paris", "rhine"]
    for got, r in zip(out, want, strict=True):
        assert got.node is inputs[r.index].node  # identity: the very node object
        assert got.score == pytest.approx(r.relevance_score, abs=1e-9)
        assert got.node.metadata == corpus.metadata[r.index]
    again = asyncio.run(post.apostprocess_nodes(inputs, query_str=corpus.query))
    assert [(n.node, n.score) for n in again] == [(n.node, n.score) for n in out]


def expected_read(compressor: Any, corpus: Any, **kw: Any) -> Any:
    """The engine's own one read of the corpus: ``(RerankResults, CompressionResult)``."""
    return compressor.rerank_and_compress(corpus.query, list(corpus.texts), **kw)


def assert_read(
    out: list[NodeWithScore], inputs: list[NodeWithScore], pair: Any, *, drop_empty: bool = True
) -> None:
    """``out`` is the one read ``pair`` of ``inputs``: best first, copies with the kept text,
    ``score`` = relevance, raw score and kept spans in metadata, hidden from the LLM and
    embedding views; the input nodes unchanged."""
    ranked, compression = pair
    kept = {d.index: d for d in compression.documents}
    want = [r for r in ranked if kept[r.index].text or not drop_empty]
    assert [n.node.node_id for n in out] == [inputs[r.index].node.node_id for r in want]
    for got, r in zip(out, want, strict=True):
        node, source, doc = got.node, inputs[r.index].node, kept[r.index]
        assert node is not source and source.text == doc.document.text
        assert node.text == doc.text
        assert got.score == pytest.approx(r.relevance_score, abs=1e-9)
        assert node.metadata[RAW] == pytest.approx(r.raw_score, abs=1e-9)
        spans = node.metadata[KEPT]
        assert [(s["start"], s["end"], s["text"]) for s in spans] == [
            (s.start, s.end, s.text) for s in doc.kept_spans
        ]
        assert all(source.text[s["start"] : s["end"]] == s["text"] for s in spans)
        assert {k: v for k, v in node.metadata.items() if k not in (KEPT, RAW)} == source.metadata
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert KEPT not in node.get_content(metadata_mode=mode)
            assert RAW not in node.get_content(metadata_mode=mode)
    scores = [float(n.score or 0.0) for n in out]
    assert scores == sorted(scores, reverse=True) and all(0 <= x <= 1 for x in scores)


def test_compress_one_read_ranks_prunes_and_scores(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """The default: one read, best first, kept text, relevance as the score, raw score and kept
    spans in metadata, as the engine's own ``rerank_and_compress``; one RERANKING event."""
    inputs = nodes(corpus)
    debug = LlamaDebugHandler()
    post = RagattnCompressPostprocessor(
        compressor=engines[1],
        ratio=0.5,
        drop_empty=False,
        callback_manager=CallbackManager([debug]),
    )
    out = post.postprocess_nodes(inputs, query_str=corpus.query)
    assert len(out) == 3
    assert_read(out, inputs, expected_read(compressor, corpus, ratio=0.5), drop_empty=False)
    assert [n.node.text for n in inputs] == list(corpus.texts)  # inputs untouched
    assert len(debug.get_event_pairs(CBEventType.RERANKING)) == 1
    again = asyncio.run(post.apostprocess_nodes(inputs, query_str=corpus.query))
    assert [(n.node.node_id, n.node.text, n.node.metadata, n.score) for n in again] == [
        (n.node.node_id, n.node.text, n.node.metadata, n.score) for n in out
    ]
    top = RagattnCompressPostprocessor(compressor=engines[1], ratio=0.5, top_n=2)
    pair = expected_read(compressor, corpus, ratio=0.5, top_n=2)
    assert_read(top.postprocess_nodes(inputs, query_str=corpus.query), inputs, pair)


def test_compress_in_input_order_keeps_node_ids_scores_and_spans(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """``order="input"``: the earlier compress-only behaviour (input order, scores kept)."""
    inputs = nodes(corpus)
    post = RagattnCompressPostprocessor(
        compressor=engines[1], ratio=0.5, order="input", drop_empty=False
    )
    out = post.postprocess_nodes(inputs, query_str=corpus.query)
    want = compressor.compress(corpus.query, list(corpus.texts), ratio=0.5)
    assert [n.node.node_id for n in out] == list(corpus.ids)
    assert [n.score for n in out] == [n.score for n in inputs]
    for got, source, w in zip(out, inputs, want.documents, strict=True):
        node = got.node
        assert node is not source.node and source.node.text == corpus.texts[w.index]
        assert node.text == w.text
        spans = node.metadata[KEPT]
        assert [(s["start"], s["end"], s["text"]) for s in spans] == [
            (s.start, s.end, s.text) for s in w.kept_spans
        ]
        assert {k: v for k, v in node.metadata.items() if k != KEPT} == source.node.metadata
        assert KEPT not in node.get_content(metadata_mode=MetadataMode.LLM)
        assert KEPT not in node.get_content(metadata_mode=MetadataMode.EMBED)
    again = asyncio.run(post.apostprocess_nodes(inputs, query_str=corpus.query))
    assert [(n.node.node_id, n.node.text, n.node.metadata, n.score) for n in again] == [
        (n.node.node_id, n.node.text, n.node.metadata, n.score) for n in out
    ]


def test_query_engine_reads_once(engines: tuple[Any, Any], compressor: Any, corpus: Any) -> None:
    """The one-read postprocessor alone in a query engine: the source nodes are its output."""
    inputs = nodes(corpus)
    engine = SummaryIndex([n.node for n in inputs]).as_query_engine(
        llm=MockLLM(),
        node_postprocessors=[
            RagattnCompressPostprocessor(compressor=engines[1], ratio=0.5, top_n=2)
        ],
    )
    response = engine.query(corpus.query)
    pair = expected_read(compressor, corpus, ratio=0.5, top_n=2)
    assert_read(response.source_nodes, inputs, pair)
    aresponse = asyncio.run(engine.aquery(corpus.query))
    assert [(n.node.node_id, n.node.text, n.score) for n in aresponse.source_nodes] == [
        (n.node.node_id, n.node.text, n.score) for n in response.source_nodes
    ]


def test_query_engine_reranks_and_compresses(
    engines: tuple[Any, Any], reranker: Any, compressor: Any, corpus: Any
) -> None:
    index = SummaryIndex([n.node for n in nodes(corpus)])
    engine = index.as_query_engine(
        llm=MockLLM(),
        node_postprocessors=[
            RagattnRerankPostprocessor(reranker=engines[0], top_n=2),
            RagattnCompressPostprocessor(compressor=engines[1], threshold=0.0, order="input"),
        ],
    )
    response = engine.query(corpus.query)
    ranked = reranker.rerank(corpus.query, list(corpus.texts), top_n=2)
    assert [n.node.node_id for n in response.source_nodes] == [corpus.ids[r.index] for r in ranked]
    assert [n.score for n in response.source_nodes] == pytest.approx(
        [r.relevance_score for r in ranked], abs=1e-9
    )
    assert all(len(n.node.metadata[KEPT]) == 2 for n in response.source_nodes)
    aresponse = asyncio.run(engine.aquery(corpus.query))
    assert [(n.node.node_id, n.score) for n in aresponse.source_nodes] == [
        (n.node.node_id, n.score) for n in response.source_nodes
    ]


def test_postprocessors_refuse_bad_input(reranker: Any, compressor: Any, corpus: Any) -> None:
    post = RagattnRerankPostprocessor(reranker=reranker)
    with pytest.raises(InvalidInputError, match=re.escape("a query is required")):
        post.postprocess_nodes(nodes(corpus))
    assert post.postprocess_nodes([], query_str=corpus.query) == []
    with pytest.raises(InvalidInputError, match=re.escape("give at most one budget")):
        RagattnCompressPostprocessor(compressor=compressor, ratio=0.3, target_tokens=10)
    with pytest.raises(InvalidInputError, match=re.escape("compressor must be a ragattn")):
        RagattnCompressPostprocessor(compressor=reranker, ratio=0.3)
    with pytest.raises(InvalidInputError, match=re.escape("top_n keeps the best nodes")):
        RagattnCompressPostprocessor(compressor=compressor, order="input", top_n=1)


def test_postprocessors_work_with_no_engine_argument(corpus: Any) -> None:
    """No engine: the shared in-process ``Reranker()`` / ``Compressor()`` (and no budget: every
    door's DEFAULT_BUDGET, ratio 0.2 at most 1,024 tokens)."""
    from ragattn import Reranker
    from ragattn.integrations import default_compressor

    inputs = nodes(corpus)
    out = RagattnRerankPostprocessor(top_n=2).postprocess_nodes(inputs, query_str=corpus.query)
    want = Reranker().rerank(corpus.query, list(corpus.texts), top_n=2)
    assert [n.node.node_id for n in out] == [corpus.ids[r.index] for r in want]
    assert [n.score for n in out] == [r.relevance_score for r in want]
    kept = RagattnCompressPostprocessor(drop_empty=False).postprocess_nodes(
        inputs, query_str=corpus.query
    )
    expect = expected_read(default_compressor(), corpus, budget=DEFAULT_BUDGET)
    assert_read(kept, inputs, expect, drop_empty=False)
    assert kept[0].node.node_id == "paris"  # the packaged default ranks the answer first


# ---- titles from metadata --------------------------------------------------------------------

TITLES = ("Banana", "Paris", 2024)
"""The nodes' ``metadata["title"]`` values: two titles and a number (not a title: untitled), so
titled and untitled nodes mix in one call."""


def titled_nodes(corpus: Any, key: str = "title") -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=i, metadata={**m, key: title}), score=0.5)
        for t, i, m, title in zip(corpus.texts, corpus.ids, corpus.metadata, TITLES, strict=True)
    ]


def library_docs(corpus: Any, *, titled: bool = True) -> list[Any]:
    """The same documents as the library takes them: ``ragattn.Document`` with the titles."""
    from ragattn.types import Document

    return [
        Document(text=t, id=i, title=title if titled and isinstance(title, str) else None)
        for t, i, title in zip(corpus.texts, corpus.ids, TITLES, strict=True)
    ]


def test_a_title_in_metadata_reaches_the_read(
    engines: tuple[Any, Any], reranker: Any, compressor: Any, corpus: Any
) -> None:
    """Given ``node.metadata["title"]``, the postprocessors keep exactly what the library keeps
    for the same titled ``Document``s (kept text, spans, order, scores), through the service too;
    a number is no title; ``title_key=None`` reads none."""
    inputs = titled_nodes(corpus)
    titled = compressor.rerank_and_compress(corpus.query, library_docs(corpus), ratio=0.5)
    post = RagattnCompressPostprocessor(compressor=engines[1], ratio=0.5, drop_empty=False)
    out = post.postprocess_nodes(inputs, query_str=corpus.query)
    assert len(out) == 3
    assert_read(out, inputs, titled, drop_empty=False)
    assert [n.node.metadata["title"] for n in out] == [TITLES[r.index] for r in titled[0]]

    untitled = compressor.rerank_and_compress(
        corpus.query, library_docs(corpus, titled=False), ratio=0.5
    )
    blind = RagattnCompressPostprocessor(
        compressor=engines[1], ratio=0.5, drop_empty=False, title_key=None
    )
    assert_read(
        blind.postprocess_nodes(inputs, query_str=corpus.query), inputs, untitled, drop_empty=False
    )

    want = reranker.rerank(corpus.query, library_docs(corpus), top_n=None)
    rerank = RagattnRerankPostprocessor(reranker=engines[0], top_n=None)
    ranked = rerank.postprocess_nodes(inputs, query_str=corpus.query)
    assert [n.node.node_id for n in ranked] == [corpus.ids[r.index] for r in want]
    assert [n.score for n in ranked] == pytest.approx([r.relevance_score for r in want], abs=1e-9)


def test_a_query_engine_reads_titles_by_callable(
    engines: tuple[Any, Any], compressor: Any, corpus: Any
) -> None:
    """``title_key`` as a callable of the node, inside a query engine: its source nodes are the
    library's one read of the titled documents."""
    inputs = titled_nodes(corpus, key="heading")
    post = RagattnCompressPostprocessor(
        compressor=engines[1], ratio=0.5, top_n=2, title_key=lambda n: n.metadata.get("heading")
    )
    engine = SummaryIndex([n.node for n in inputs]).as_query_engine(
        llm=MockLLM(), node_postprocessors=[post]
    )
    response = engine.query(corpus.query)
    pair = compressor.rerank_and_compress(corpus.query, library_docs(corpus), ratio=0.5, top_n=2)
    assert_read(response.source_nodes, inputs, pair)


GERMAN = "Er kam am 12. Mai nach Hause zurück. Dann schlief er lange."
GERMAN_SENTENCES = ["Er kam am 12. Mai nach Hause zurück.", "Dann schlief er lange."]
"""Two sentences under German rules; English rules end one after "am 12."."""


def test_the_language_reaches_the_read(engines: tuple[Any, Any]) -> None:
    _, compressor = engines
    german = [NodeWithScore(node=TextNode(text=GERMAN, id_="g"), score=0.5)]
    for order in ("input", "rank"):
        post = RagattnCompressPostprocessor(
            compressor=compressor, ratio=1.0, order=order, language="de"
        )
        (out,) = post.postprocess_nodes(german, query_str="Wann kam er nach Hause?")
        assert [s["text"] for s in out.node.metadata[KEPT]] == GERMAN_SENTENCES, order
    with pytest.raises(InvalidInputError, match=re.escape("unknown language 'xx'; valid: auto")):
        RagattnCompressPostprocessor(compressor=compressor, language="xx")
