"""RAGPipeline: context orders, stage switches, token counts, the answer cache, missing indexes,
the local generator on the packaged proxy, and ``ragattn ask`` on an index built in tmp_path."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragattn.cache import MemoryCache
from ragattn.errors import InvalidInputError
from ragattn.generate import GeneratedAnswer, LocalGenerator
from ragattn.pipeline import (
    ORDERS,
    PipelineOptions,
    RAGPipeline,
    load_index,
    order_context,
)

CORPUS = [
    {
        "id": "eiffel",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower in Paris was completed "
        "in 1889. It was designed by Maurice Koechlin. It is 330 metres tall.",
    },
    {
        "id": "louvre",
        "title": "Louvre",
        "text": "The Louvre is a museum in Paris. It holds the "
        "Mona Lisa. The tower of the old fortress was demolished.",
    },
    {
        "id": "pisa",
        "title": "Pisa",
        "text": "The Leaning Tower stands in Pisa. Building began in "
        "1173. The tower leans because of soft ground.",
    },
    {
        "id": "banana",
        "title": "Banana",
        "text": "Bananas are sold in Paris markets. They are rich in potassium.",
    },
    {"id": "rhine", "title": "Rhine", "text": "The Rhine flows north. It reaches the North Sea."},
]
QUESTION = "When was the Eiffel Tower in Paris completed?"


class RecordingGenerator:
    """A deterministic generator that answers with the titles it was given, in order.

    It stands in for the model at the end of the pipeline (a collaborator, not the unit under
    test) so orderings and cache behaviour can be asserted exactly and quickly.
    """

    identity = "recording:v1"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, question: str, context_passages: Sequence[str]) -> GeneratedAnswer:
        self.calls.append(list(context_passages))
        titles = [p.split(":", 1)[0] for p in context_passages]
        return GeneratedAnswer(
            text=" | ".join(titles),
            prompt_tokens=sum(len(p.split()) for p in context_passages),
            completion_tokens=len(titles),
            seconds=0.001,
            model="recording",
        )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ragattn.retrieve import Index

    return Index.build(
        CORPUS, tmp_path_factory.mktemp("pipe") / "idx", dense=False, chunk_words=None
    )


@pytest.fixture(scope="module")
def bm25_order(index: Any) -> list[str]:
    return [h.doc_id for h in index.search(QUESTION, 5, mode="bm25")]


def opts(**kw: Any) -> PipelineOptions:
    return PipelineOptions(**{"top_k": 5, "top_n": 5, "mode": "bm25", **kw})


# --- orders -------------------------------------------------------------------------------


def test_orders_are_the_documented_arrangements() -> None:
    items = [1, 2, 3, 4, 5]
    assert order_context(items, "best_first") == [1, 2, 3, 4, 5]
    assert order_context(items, "best_last") == [5, 4, 3, 2, 1]
    assert order_context(items, "edges") == [1, 3, 5, 4, 2]
    assert order_context([1, 2, 3, 4], "edges") == [1, 3, 4, 2]
    assert order_context([1], "edges") == [1]
    assert order_context([], "best_last") == []
    with pytest.raises(
        InvalidInputError,
        match=re.escape(
            "unknown context order 'middle'; choose one of best_first, best_last, edges"
        ),
    ):
        order_context(items, "middle")  # type: ignore[arg-type]


@pytest.mark.parametrize("order", ORDERS)
def test_generator_sees_passages_in_the_chosen_order(
    index: Any, bm25_order: list[str], order: str
) -> None:
    gen = RecordingGenerator()
    result = RAGPipeline(index, generator=gen).ask(QUESTION, opts(order=order))
    titles = {d["id"]: d["title"] for d in CORPUS}
    expected = order_context([titles[i] for i in bm25_order], order)  # type: ignore[arg-type]
    assert [p.split(":", 1)[0] for p in gen.calls[0]] == expected
    assert result.answer.text == " | ".join(expected)
    by_position = sorted(result.sources, key=lambda s: s.context_position or 0)
    assert [s.title for s in by_position] == expected
    assert result.order == order


def test_options_are_validated() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("ratio must be in (0, 1], got 0.0")):
        PipelineOptions(ratio=0.0)
    with pytest.raises(InvalidInputError, match="top_n must be a positive integer"):
        PipelineOptions(top_n=0)
    with pytest.raises(InvalidInputError, match="unknown search mode"):
        PipelineOptions(mode="vector")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="unknown flow 'both'; choose one of one_read"):
        PipelineOptions(flow="both")  # type: ignore[arg-type]
    # the defaults follow the flow: one read keeps a fifth of every candidate's tokens
    assert (PipelineOptions().top_n, PipelineOptions().ratio) == (None, 0.2)
    two = PipelineOptions(flow="two_pass")
    assert (two.top_n, two.ratio) == (5, 0.5)
    assert PipelineOptions(flow="two_pass", ratio=0.3, top_n=2).params()["ratio"] == 0.3


# --- stages switched off ------------------------------------------------------------------


def test_only_retrieval_and_generation(index: Any, bm25_order: list[str]) -> None:
    result = RAGPipeline(index, generator=RecordingGenerator()).ask(QUESTION, opts(top_n=3))
    assert [s.id for s in result.sources] == bm25_order[:3]
    assert [s.retrieval_rank for s in result.sources] == [1, 2, 3]
    assert all(s.relevance_score is None for s in result.sources)
    assert all(s.kept_text == s.text for s in result.sources)
    assert result.tokens_before == result.tokens_after > 0
    assert result.tokenizer == "whitespace"
    assert result.timings.rerank == result.timings.compress == 0.0
    assert result.cache_hit is False


def test_empty_question_and_no_hits(index: Any) -> None:
    gen = RecordingGenerator()
    pipe = RAGPipeline(index, generator=gen)
    with pytest.raises(InvalidInputError, match="question must be a non-empty string"):
        pipe.ask("  ")
    result = pipe.ask("zyzzyva quux", opts())
    assert result.sources == ()
    assert gen.calls == [[]]
    assert result.warnings == ("retrieval found no passage; the generator answers without context",)


class RecordingEngine:
    """Wraps a real engine and records which of its verbs the pipeline calls (through the
    keyword methods or, as the pipeline does, the checked entries)."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.calls = engine, []  # type: list[str]

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.engine, name)
        verb = name.removesuffix("_checked")
        if verb in ("rerank", "compress", "rerank_and_compress"):

            def recorded(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(verb)
                return attribute(*args, **kwargs)

            return recorded
        return attribute


@pytest.mark.slow
def test_the_default_flow_is_one_read_of_every_candidate(index: Any, proxy: Any) -> None:
    """One call ranks and prunes every retrieved candidate: no reranker pass, no second read;
    the sources are the one read's ranking with its scores and kept spans, and the context
    holds exactly its kept sentences."""
    from ragattn.compress import Compressor
    from ragattn.rerank import Reranker

    reranker, compressor = RecordingEngine(Reranker(proxy)), RecordingEngine(Compressor(proxy))
    gen = RecordingGenerator()
    pipe = RAGPipeline(index, generator=gen, reranker=reranker, compressor=compressor)
    result = pipe.ask(QUESTION, PipelineOptions(top_k=5, mode="bm25"))
    assert (reranker.calls, compressor.calls) == ([], ["rerank_and_compress"])
    assert result.flow == "one_read" and result.ranked_by == "sentinel:document-probe"
    hits = index.search(QUESTION, 5, mode="bm25")
    docs = [{"id": h.doc_id, "text": h.text, "title": h.title} for h in hits]
    ranked, context = compressor.engine.rerank_and_compress(QUESTION, docs, ratio=0.2)
    assert [s.id for s in result.sources] == [r.document.id for r in ranked]
    assert [s.relevance_score for s in result.sources] == [r.relevance_score for r in ranked]
    assert result.sources[0].id == "eiffel"
    assert (result.tokens_before, result.tokens_after) == (
        context.origin_tokens,
        context.compressed_tokens,
    )
    assert result.tokens_after <= 0.2 * result.tokens_before
    kept = {(s.id, k.start, k.end) for s in result.sources for k in s.kept_spans}
    assert kept == {
        (hits[d.index].doc_id, k.start, k.end) for d in context.documents for k in d.kept_spans
    }
    for s in result.sources:
        for span in s.kept_spans:
            assert s.text[span.start : span.end] == span.text
    assert result.timings.read > 0 and result.timings.rerank == result.timings.compress == 0.0
    assert sum(bool(s.kept_text) for s in result.sources) == len(gen.calls[0])
    # top_n keeps the best n sources of the same read
    two = pipe.ask(QUESTION, PipelineOptions(top_k=5, top_n=2, mode="bm25"))
    assert [s.id for s in two.sources] == [s.id for s in result.sources[:2]]


@pytest.mark.slow
def test_two_pass_flow_reranks_then_compresses(index: Any, proxy: Any) -> None:
    from ragattn.compress import Compressor
    from ragattn.rerank import Reranker

    reranker, compressor = Reranker(proxy), Compressor(proxy)
    gen = RecordingGenerator()
    full = RAGPipeline(index, generator=gen, reranker=reranker, compressor=compressor)
    result = full.ask(QUESTION, opts(top_n=3, ratio=0.4, flow="two_pass"))
    assert result.flow == "two_pass" and result.ranked_by == "minilm"
    expected = reranker.rerank(
        QUESTION,
        [
            {"id": h.doc_id, "text": h.text, "title": h.title}
            for h in index.search(QUESTION, 5, mode="bm25")
        ],
        top_n=3,
    )
    assert [s.id for s in result.sources] == [r.document.id for r in expected]
    assert [s.relevance_score for s in result.sources] == [r.relevance_score for r in expected]
    assert result.sources[0].id == "eiffel"
    assert result.tokens_after < result.tokens_before
    assert result.tokenizer == proxy.name
    for s in result.sources:
        for span in s.kept_spans:
            assert s.text[span.start : span.end] == span.text
    # rerank on, compress off: whole passages in rerank order
    no_compress = RAGPipeline(index, generator=RecordingGenerator(), reranker=reranker)
    whole = no_compress.ask(QUESTION, opts(top_n=3))
    assert whole.flow == "two_pass"  # nothing to read once for without a compressor
    assert [s.id for s in whole.sources] == [s.id for s in result.sources]
    assert whole.tokens_before == whole.tokens_after == result.tokens_before
    # per-call switches override the configured stages
    off = full.ask(QUESTION, opts(top_n=3, rerank=False, compress=False))
    assert all(s.relevance_score is None for s in off.sources)
    assert off.tokens_before == off.tokens_after


# --- cache --------------------------------------------------------------------------------


def test_second_identical_call_is_a_cache_hit_with_an_equal_result(index: Any) -> None:
    gen = RecordingGenerator()
    pipe = RAGPipeline(index, generator=gen, cache=MemoryCache())
    first = pipe.ask(QUESTION, opts(top_n=3))
    second = pipe.ask(QUESTION, opts(top_n=3))
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert len(gen.calls) == 1
    assert second.answer == first.answer
    assert second.sources == first.sources
    assert (second.tokens_before, second.tokens_after) == (first.tokens_before, first.tokens_after)
    assert second.timings.generate == 0.0
    # another order is another prompt: a miss
    third = pipe.ask(QUESTION, opts(top_n=3, order="best_last"))
    assert third.cache_hit is False and len(gen.calls) == 2


def test_cache_off_always_generates(index: Any) -> None:
    gen = RecordingGenerator()
    pipe = RAGPipeline(index, generator=gen, cache=None)
    pipe.ask(QUESTION, opts())
    assert pipe.ask(QUESTION, opts()).cache_hit is False
    assert len(gen.calls) == 2


# --- missing index ------------------------------------------------------------------------


def test_no_index_explains_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=re.escape("ragattn index build --corpus")):
        RAGPipeline(None, generator=RecordingGenerator())
    with pytest.raises(InvalidInputError, match="no retrieval index given; build an index first"):
        load_index(None)
    with pytest.raises(InvalidInputError, match=re.escape(f"no index at {tmp_path / 'nope'}")):
        load_index(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="is not a ragattn index"):
        load_index(tmp_path / "empty")


# --- the local generator on the packaged proxy ----------------------------------------------


@pytest.mark.slow
def test_local_generator_is_greedy_bounded_and_deterministic(proxy: Any) -> None:
    import torch

    from ragattn.generate import build_messages

    gen = LocalGenerator(proxy, max_new_tokens=12)
    question = "When was the Eiffel Tower completed?"
    passages = ["Eiffel Tower: The Eiffel Tower was completed in 1889."]
    a = gen.generate(question, passages)
    b = gen.generate(question, passages)
    assert a == dataclasses.replace(b, seconds=a.seconds)
    # independent reference: argmax decoding by hand, one full forward per step, no KV cache
    tok = proxy.tokenizer
    text = tok.apply_chat_template(
        [m.to_dict() for m in build_messages(question, passages)],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    out: list[int] = []
    with torch.inference_mode():
        for _ in range(12):
            logits = proxy.model(torch.tensor([ids + out])).logits[0, -1]
            out.append(int(logits.argmax()))
            if out[-1] == tok.eos_token_id:
                break
    assert a.text == tok.decode(out, skip_special_tokens=True).strip()
    assert a.prompt_tokens == len(ids)
    assert a.completion_tokens == len([t for t in out if t != tok.eos_token_id]) <= 12
    assert a.text and a.model == "smollm2-135m"


@pytest.mark.slow
def test_full_pipeline_with_the_local_generator(index: Any, proxy: Any) -> None:
    from ragattn.compress import Compressor
    from ragattn.rerank import Reranker

    generator = LocalGenerator(proxy, max_new_tokens=16)
    pipe = RAGPipeline(
        index,
        generator=generator,
        reranker=Reranker(proxy),
        compressor=Compressor(proxy),
        cache=MemoryCache(),
    )
    first = pipe.ask(QUESTION, opts(top_n=2, order="edges"))
    second = pipe.ask(QUESTION, opts(top_n=2, order="edges"))
    passages = pipe.prepare(QUESTION, opts(top_n=2)).passages("edges")
    assert first.answer.text == generator.generate(QUESTION, passages).text
    assert first.answer.text
    assert first.sources[0].id == "eiffel" and first.sources[0].context_position == 1
    assert first.tokens_after <= first.tokens_before
    assert second.cache_hit and second.answer == first.answer


# --- CLI ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_ragattn_ask_cli(tmp_path: Path) -> None:
    from ragattn.cli import app
    from ragattn.retrieve import Index

    Index.build(CORPUS, tmp_path / "idx", dense=False, chunk_words=None)
    runner = CliRunner()
    args = ["ask", QUESTION, "--index", str(tmp_path / "idx"), "--mode", "bm25", "--top-k", "4"]
    result = runner.invoke(app, [*args, "--top-n", "2", "--max-tokens", "16", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert "answer:" in result.output
    assert "│ 1   │ eiffel │ Eiffel Tower" in result.output  # context position 1, ranked first
    assert "one_read, ranked by sentinel:document-probe" in result.output
    assert "read " in result.output and "(rank and prune)" in result.output
    assert "ratio" in result.output and "generate" in result.output
    two = runner.invoke(app, [*args, "--flow", "two_pass", "--max-tokens", "8", "--threads", "1"])
    assert two.exit_code == 0, two.output
    assert "two_pass, ranked by minilm" in two.output and "rerank" in two.output
    bad = runner.invoke(app, [*args, "--flow", "both"])
    assert bad.exit_code == 2 and "--flow must be one of one_read, two_pass" in bad.output


def test_ragattn_ask_cli_without_index(tmp_path: Path) -> None:
    from ragattn.cli import app

    runner = CliRunner()
    missing = runner.invoke(app, ["ask", QUESTION, "--index", str(tmp_path / "nope")])
    none = runner.invoke(app, ["ask", QUESTION])
    for result in (missing, none):
        assert result.exit_code == 2
        assert "ragattn index build --corpus" in result.output
