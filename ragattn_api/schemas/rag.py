"""Retrieval and RAG wire formats: ``/v1/retrieve`` and ``/v1/ask``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from msgspec import Struct

from ragattn_api.schemas.common import (
    Count,
    Fraction,
    KeptSpanOut,
    Language,
    SearchMode,
    Text,
    TokenCount,
    finite,
)

if TYPE_CHECKING:
    from ragattn.pipeline import PipelineResult


class RetrieveRequest(Struct, kw_only=True):
    """First-stage retrieval from the configured index, optionally reranked by the proxy.

    ``mode`` omitted: ``hybrid`` when the index has dense vectors, else ``bm25``."""

    query: Text
    k: Count = 10
    mode: SearchMode | None = None
    rerank: bool = False
    top_n: Count | None = None
    return_documents: bool = True


class RetrievedOut(Struct, omit_defaults=True):
    """One hit: its corpus id, retrieval score/rank, and with ``rerank`` the proxy's relevance."""

    doc_id: str
    retrieval_score: float
    retrieval_rank: int
    relevance_score: float | None = None
    text: str | None = None
    title: str | None = None


class RetrieveResponse(Struct):
    id: str
    results: list[RetrievedOut]
    mode: str
    reranked: bool
    model: str
    warnings: list[str]


class AskRequest(Struct, kw_only=True):
    """``POST /v1/ask``: answer a question over the configured index (RAG end to end).

    ``flow`` is ``one_read`` (one proxy read of the ``top_k`` candidates ranks them and keeps
    their best sentences) or ``two_pass`` (rerank, keep ``top_n``, compress those); omitted, it
    is ``one_read``, or ``two_pass`` when ``rerank`` or ``compress`` is false. ``top_n`` and
    ``ratio`` default by flow: every candidate and 0.2 for one read, 5 and 0.5 for two passes.
    ``max_context_tokens`` is the most context tokens kept whatever the ratio gives: default 1,024
    under the default ratio (so the context stops growing with ``top_k``: 20 candidates of ~128
    tokens keep 512 tokens, 100 keep 1,024, not 2,560), none when ``ratio`` is sent.
    ``order`` is the context order for the generator (``best_first``, ``best_last``, ``edges``;
    default: the library's measured default). ``rerank`` / ``compress`` switch those stages off.
    Every option is honoured by the flow that runs or refused (400, naming the option and the
    flow): ``"flow": "one_read"`` with ``"rerank": false`` or ``"compress": false`` (the one read
    ranks and prunes in one pass), ``ratio``, ``max_context_tokens`` or a ``language`` other
    than ``auto`` with ``"compress": false`` (:class:`~ragattn.pipeline.PipelineOptions` holds
    the rule).
    ``language`` is the passages' language for the compressor's sentence splitting: ``auto``
    (default, by each passage's script) or an ISO 639-1 code.
    """

    question: Text
    flow: Literal["one_read", "two_pass"] | None = None
    top_k: Count = 20
    top_n: Count | None = None
    ratio: Fraction | None = None
    max_context_tokens: TokenCount | None = None
    order: Literal["best_first", "best_last", "edges"] | None = None
    mode: SearchMode | None = None
    rerank: bool = True
    compress: bool = True
    language: Language = "auto"
    return_text: bool = False


class AskSourceOut(Struct, omit_defaults=True):
    """One reranked passage: scores, its place in the generator's context, and what was kept."""

    id: str
    retrieval_score: float
    retrieval_rank: int
    kept_spans: list[KeptSpanOut]
    title: str | None = None
    relevance_score: float | None = None
    context_position: int | None = None
    text: str | None = None
    kept_text: str | None = None


class AskTimingsOut(Struct):
    """Seconds per pipeline stage; ``read`` is the one read that ranks and prunes (``rerank``
    and ``compress`` are 0 then)."""

    retrieve: float
    rerank: float
    compress: float
    read: float
    cache: float
    generate: float
    total: float


class AskResponse(Struct):
    """The answer, its sources (best first), context tokens before/after compression
    (``tokenizer``'s tokens), generator token usage, per-stage timings and whether the answer came
    from the cache; ``flow`` is the flow that ran and ``ranked_by`` the method that ordered the
    sources (null: first-stage order)."""

    id: str
    answer: str
    model: str
    flow: str
    ranked_by: str | None
    order: str
    sources: list[AskSourceOut]
    tokens_before: int
    tokens_after: int
    ratio: float
    tokenizer: str
    prompt_tokens: int | None
    completion_tokens: int | None
    timings: AskTimingsOut
    cache_hit: bool
    warnings: list[str]

    @classmethod
    def from_result(cls, result: PipelineResult, *, id: str, return_text: bool) -> AskResponse:
        sources = [
            AskSourceOut(
                id=s.id,
                title=s.title,
                retrieval_score=finite(s.retrieval_score, "retrieval_score"),
                retrieval_rank=s.retrieval_rank,
                relevance_score=s.relevance_score,
                context_position=s.context_position,
                kept_spans=[
                    KeptSpanOut(start=k.start, end=k.end, score=k.score, text=k.text)
                    for k in s.kept_spans
                ],
                text=s.text if return_text else None,
                kept_text=s.kept_text if return_text else None,
            )
            for s in result.sources
        ]
        t = result.timings
        return cls(
            id=id,
            answer=result.answer.text,
            model=result.answer.model,
            flow=result.flow,
            ranked_by=result.ranked_by,
            order=result.order,
            sources=sources,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            ratio=result.ratio,
            tokenizer=result.tokenizer,
            prompt_tokens=result.answer.prompt_tokens,
            completion_tokens=result.answer.completion_tokens,
            timings=AskTimingsOut(
                retrieve=t.retrieve,
                rerank=t.rerank,
                compress=t.compress,
                read=t.read,
                cache=t.cache,
                generate=t.generate,
                total=t.total,
            ),
            cache_hit=result.cache_hit,
            warnings=list(result.warnings),
        )


__all__ = [
    "AskRequest",
    "AskResponse",
    "AskSourceOut",
    "AskTimingsOut",
    "RetrieveRequest",
    "RetrieveResponse",
    "RetrievedOut",
]
