"""What the pipeline's stages hand on: the checked question, the retrieval, the prepared context
and the final result with its sources.

All are frozen: a stage builds a new value, never edits the one it was given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragattn.generate import GeneratedAnswer
from ragattn.pipeline.options import DEFAULT_FLOW, ContextOrder, Flow, order_context
from ragattn.pipeline.timing import StageTimings
from ragattn.retrieve.corpus import Hit
from ragattn.types import Document, KeptSpan


def hit_document(hit: Hit) -> Document:
    """The :class:`Document` a reranker or compressor scores for a retrieval hit."""
    return Document(text=hit.text, id=hit.doc_id, title=hit.title)


@dataclass(frozen=True, slots=True)
class Question:
    """A question already checked (non-empty, within the limits) by
    :meth:`RAGPipeline.check_question`: every stage takes it as it is.

    The service checks a question on its tokenizer thread, then hands this to the pipeline, so no
    stage tokenizes it a second time.
    """

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One retrieved passage after the (optional) rerank.

    Attributes:
        hit: the index's hit (id, first-stage score and rank, full text).
        document: the passage as scored: the hit's text, cut to ``limits.max_tokens_per_doc``.
        relevance_score: the reranker's score in [0, 1]; ``None`` when reranking was off.
    """

    hit: Hit
    document: Document
    relevance_score: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrieval:
    """The result of :meth:`RAGPipeline.retrieve`: candidates best first, at most ``top_n``.

    Attributes:
        candidates: rerank order (or first-stage order when not reranked).
        reranked: the reranker ordered them.
        ranked_by: the reranker's method when it did (its results' ``method``), else None.
        warnings: truncations and the reranker's warnings.
        retrieve_s / rerank_s: wall-clock seconds of each stage.
    """

    candidates: tuple[Candidate, ...]
    reranked: bool
    ranked_by: str | None = None
    warnings: tuple[str, ...] = ()
    retrieve_s: float = 0.0
    rerank_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One passage that reached the generator's candidate list (after reranking).

    Attributes:
        id: the document (chunk) id in the index.
        title: its title, if any.
        text: the full passage text.
        retrieval_score: first-stage score (units of the search mode: RRF sum, BM25, cosine).
        retrieval_rank: 1-based first-stage rank.
        relevance_score: the reranker's score in [0, 1]; ``None`` when reranking was off.
        kept_spans: sentences the compressor kept (character spans of ``text``); all of the text
            as one span when compression was off.
        kept_text: the text the generator saw for this passage (empty: nothing kept).
        context_position: 1-based position in the generator's context; ``None`` when nothing of
            the passage was kept.
    """

    id: str
    title: str | None
    text: str
    retrieval_score: float
    retrieval_rank: int
    relevance_score: float | None
    kept_spans: tuple[KeptSpan, ...]
    kept_text: str
    context_position: int | None = None

    @classmethod
    def of_hit(
        cls,
        hit: Hit,
        relevance: float | None,
        spans: Sequence[KeptSpan],
        kept_text: str,
    ) -> Source:
        """The source for a retrieval ``hit`` with its score and what the compressor kept."""
        return cls(
            id=str(hit.doc_id),
            title=hit.title,
            text=hit.text,
            retrieval_score=float(hit.score),
            retrieval_rank=int(hit.rank),
            relevance_score=relevance,
            kept_spans=tuple(spans),
            kept_text=kept_text,
        )

    def passage(self, *, compressed: bool = True) -> str:
        """The passage as given to the generator: ``"title: text"`` (or the text alone)."""
        body = self.kept_text if compressed else self.text
        if not body.strip():
            return ""
        return f"{self.title}: {body}" if self.title else body


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedContext:
    """Retrieval, reranking and compression for one question: the generator's candidate passages.

    ``sources`` are best first (the one read's ranking, the reranker's, or first-stage order).
    Token counts are of the passage texts joined by a blank line, in ``tokenizer``. ``flow`` is
    the flow that ran (``one_read`` falls back to ``two_pass`` without a compressor), and
    ``ranked_by`` the method that ordered the sources (None: first-stage order).
    """

    question: str
    sources: tuple[Source, ...]
    flow: Flow = DEFAULT_FLOW
    ranked_by: str | None = None
    tokens_before: int
    tokens_after: int
    tokenizer: str
    compressed: bool
    timings: StageTimings
    warnings: tuple[str, ...] = ()

    def context(self, order: ContextOrder, *, compressed: bool = True) -> list[Source]:
        """The sources whose passage is non-empty, arranged by ``order``."""
        kept = [s for s in self.sources if s.passage(compressed=compressed)]
        return order_context(kept, order)

    def passages(self, order: ContextOrder, *, compressed: bool = True) -> list[str]:
        """The generator's context passages in ``order`` (compressed text unless told not to)."""
        context = self.context(order, compressed=compressed)
        return [s.passage(compressed=compressed) for s in context]


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineResult:
    """An answer with where it came from and what each stage cost.

    Attributes:
        question: the question asked.
        answer: the generator's answer (from the cache on a hit: equal to the fresh one).
        sources: the candidates, best first, with scores and kept spans.
        flow: the flow that ran (:data:`FLOWS`).
        ranked_by: the method that ordered the sources (e.g. ``sentinel:document-probe`` for
            one read, ``minilm`` for the reranker); None: the first-stage order.
        order: the context order the generator saw.
        tokens_before / tokens_after: context tokens before and after compression (``tokenizer``).
        tokenizer: the tokenizer that counted (the proxy's, or ``whitespace`` without any).
        timings: seconds per stage.
        cache_hit: the answer came from the cache.
        warnings: truncations, window splits and pipeline notes, in stage order.
    """

    question: str
    answer: GeneratedAnswer
    sources: tuple[Source, ...]
    flow: Flow
    ranked_by: str | None
    order: ContextOrder
    tokens_before: int
    tokens_after: int
    tokenizer: str
    timings: StageTimings
    cache_hit: bool
    warnings: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """Fraction of context tokens kept (after / before; 1.0 for an empty context)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (nested dataclasses too), plus the derived ``ratio``."""
        out = dataclasses.asdict(self)
        out["ratio"] = self.ratio
        return out


__all__ = [
    "Candidate",
    "PipelineResult",
    "PreparedContext",
    "Question",
    "Retrieval",
    "Source",
    "hit_document",
]
