"""The two ways from retrieved candidates to the generator's context.

- :func:`one_read` (the default): the compressor's proxy reads every candidate with the question
  once; from that forward come both the ranking and the sentences kept under the budget, so
  evidence in a passage a reranker would have put below ``top_n`` still reaches the generator.
- :func:`two_pass`: the candidates arrive reranked and cut to ``top_n``; the compressor prunes
  those (or, without one, whole passages pass).

Both take the :class:`~ragattn.pipeline.results.Retrieval` the pipeline made and return a
:class:`~ragattn.pipeline.results.PreparedContext`; neither retrieves nor generates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragattn.contract import CompressEngine, VerbArgs
from ragattn.pipeline.options import PipelineOptions
from ragattn.pipeline.results import PreparedContext, Question, Retrieval, Source
from ragattn.pipeline.timing import Clock, StageTimings
from ragattn.proxy import Proxy
from ragattn.types import Document, KeptSpan

NOTHING_FOUND = "retrieval found no passage; the generator answers without context"


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts context tokens in ``tokenizer`` (a Hugging Face tokenizer), or in
    whitespace-separated words when there is none; ``name`` names the one that counted."""

    tokenizer: Any | None
    name: str

    @classmethod
    def resolve(cls, tokenizer: Any | None, *owners: Any) -> TokenCounter:
        """``tokenizer`` (a tokenizer or a :class:`~ragattn.proxy.Proxy`), else the proxy of the
        first owner that has one, else whitespace words."""
        if isinstance(tokenizer, Proxy):
            return cls(tokenizer.tokenizer, tokenizer.name)
        if tokenizer is not None:
            return cls(tokenizer, str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__)))
        for owner in owners:
            proxy = getattr(owner, "proxy", None)
            if proxy is not None:
                return cls(proxy.tokenizer, proxy.name)
        return cls(None, "whitespace")

    def count(self, text: str) -> int:
        """Tokens in ``text`` (0 for empty text)."""
        if not text:
            return 0
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def one_read(
    question: Question,
    found: Retrieval,
    opts: PipelineOptions,
    compressor: CompressEngine,
    counter: TokenCounter,
) -> PreparedContext:
    """One read ranks every candidate of ``found`` (first-stage order, not reranked, passed to
    the read as its ``first_stage_order``) and keeps their best sentences under ``opts.budget``;
    sources are the best ``opts.top_n`` (all by default), best first."""
    warnings = list(found.warnings)
    if not found.candidates:
        warnings.append(NOTHING_FOUND)
        return _nothing_found(question, found, warnings, counter)
    hits = [c.hit for c in found.candidates]
    docs = [c.document for c in found.candidates]
    clock = Clock()
    args = VerbArgs(
        verb="rerank_compress",
        top_n=opts.top_n,
        budget=opts.budget,
        tokenizer=counter.tokenizer,
        language=opts.language,
        first_stage_order=tuple(range(len(docs))),
    )
    ranked, result = compressor.rerank_and_compress_checked(question.text, docs, args)
    t_read = clock.lap()
    warnings.extend(ranked.warnings)
    warnings.extend(result.warnings)
    by_index = {d.index: d for d in result.documents}
    return PreparedContext(
        question=question.text,
        sources=tuple(
            Source.of_hit(
                hits[r.index],
                r.relevance_score,
                by_index[r.index].kept_spans,
                by_index[r.index].text,
            )
            for r in ranked
        ),
        flow="one_read",
        ranked_by=ranked.method or None,
        tokens_before=result.origin_tokens,
        tokens_after=result.compressed_tokens,
        tokenizer=counter.name,
        compressed=True,
        timings=StageTimings(retrieve=found.retrieve_s, read=t_read),
        warnings=tuple(warnings),
    )


def two_pass(
    question: Question,
    found: Retrieval,
    opts: PipelineOptions,
    compressor: CompressEngine | None,
    counter: TokenCounter,
) -> PreparedContext:
    """Compress the candidates of ``found`` (already reranked and cut to ``opts.top_n``) under
    ``opts.budget``; whole passages pass without a compressor or with ``opts.compress`` off."""
    warnings = list(found.warnings)
    if opts.top_n is not None and opts.top_n > opts.top_k:
        warnings.insert(
            0, f"top_n={opts.top_n} is more than top_k={opts.top_k}: at most top_k passages"
        )
    if not found.candidates:
        warnings.append(NOTHING_FOUND)
    clock = Clock()
    kept = [c.document for c in found.candidates]
    compressed = compressor is not None and opts.compress and bool(kept)
    t_compress = 0.0
    if compressor is not None and compressed:
        args = VerbArgs(
            verb="compress",
            budget=opts.budget,
            tokenizer=counter.tokenizer,
            language=opts.language,
        )
        result = compressor.compress_checked(question.text, kept, args)
        spans = [d.kept_spans for d in result.documents]
        kept_texts = [d.text for d in result.documents]
        before, after = result.origin_tokens, result.compressed_tokens
        warnings.extend(result.warnings)
        t_compress = clock.lap()
    else:
        spans = _whole(kept)
        kept_texts = [d.text for d in kept]
        before = after = counter.count("\n\n".join(d.text for d in kept))
    return PreparedContext(
        question=question.text,
        sources=tuple(
            Source.of_hit(c.hit, c.relevance_score, spans[n], kept_texts[n])
            for n, c in enumerate(found.candidates)
        ),
        flow="two_pass",
        ranked_by=found.ranked_by,
        tokens_before=before,
        tokens_after=after,
        tokenizer=counter.name,
        compressed=compressed,
        timings=StageTimings(retrieve=found.retrieve_s, rerank=found.rerank_s, compress=t_compress),
        warnings=tuple(warnings),
    )


def _whole(documents: Sequence[Document]) -> list[tuple[KeptSpan, ...]]:
    """Each document kept whole: one span over all of its text, score 1.0."""
    return [
        (KeptSpan(doc_index=n, start=0, end=len(d.text), score=1.0, text=d.text),)
        for n, d in enumerate(documents)
    ]


def _nothing_found(
    question: Question, found: Retrieval, warnings: Sequence[str], counter: TokenCounter
) -> PreparedContext:
    """The one-read context when retrieval found nothing: no sources, nothing read."""
    return PreparedContext(
        question=question.text,
        sources=(),
        flow="one_read",
        tokens_before=0,
        tokens_after=0,
        tokenizer=counter.name,
        compressed=False,
        timings=StageTimings(retrieve=found.retrieve_s),
        warnings=tuple(warnings),
    )


__all__ = ["NOTHING_FOUND", "TokenCounter", "one_read", "two_pass"]
