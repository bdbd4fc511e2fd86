"""Wire formats: msgspec Structs for every request and response body.

Rerank requests accept a superset of Cohere v1/v2, Jina and TEI fields; responses are Cohere's
shape. Library results are converted with ``from_result``; the library knows nothing of JSON.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

from msgspec import Meta, Struct

from ragattn.errors import InvalidInputError, ModelOutputError
from ragattn.types import (
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    RerankResults,
)

if TYPE_CHECKING:
    from ragattn.pipeline import PipelineResult

PositiveInt = Annotated[int, Meta(ge=1)]
NOT_SPACE = (
    r"[^\t\n\r\u000b\u000c\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a"
    r"\u2028\u2029\u202f\u205f\u3000\ufeff]"
)
"""One character that is whitespace neither to Python (``str.isspace``) nor to JSON Schema's
ECMA-262 ``\\s``: spelled out, because the two disagree (``\\x1f`` is space to Python only,
``\\ufeff`` to ECMA-262 only), and the document must accept exactly what the server does."""
Text = Annotated[str, Meta(min_length=1, pattern=NOT_SPACE)]
"""A query or question: at least one character that is not whitespace."""
SearchMode = Literal["hybrid", "bm25", "dense"]
"""A search mode; omitted: ``hybrid`` when the index has dense vectors, else ``bm25``."""
Fraction = Annotated[float, Meta(gt=0, le=1)]
"""A ratio of tokens kept: in (0, 1]."""


class DocumentIn(Struct, kw_only=True):
    """A document object: ``text`` is required; ``id``, ``title`` and ``metadata`` are kept."""

    text: str
    id: str | int | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = None

    def to_document(self) -> Document:
        return Document(
            text=self.text,
            id=None if self.id is None else str(self.id),
            title=self.title,
            metadata=self.metadata or {},
        )


def to_documents(values: list[str | DocumentIn]) -> list[Document]:
    return [Document(text=v) if isinstance(v, str) else v.to_document() for v in values]


class PruneIn(Struct, kw_only=True, forbid_unknown_fields=True):
    """The rerank routes' ``prune`` object: exactly one budget for the kept sentences of the
    returned results, counted together (one budget across all of them, in proxy tokens).

    ``ratio`` is the fraction of tokens kept, in (0, 1]; ``target_tokens`` the most tokens kept;
    ``threshold`` the lowest keep score kept, in [0, 1]: the compress route's budgets, without its
    LLMLingua aliases. Unlike the top-level fields (Cohere's, whose unknown siblings are ignored
    with a warning) an unknown key in here is a 400: the object is ours, and a misspelt budget
    must not pass.
    """

    ratio: Fraction | None = None
    target_tokens: PositiveInt | None = None
    threshold: Annotated[float, Meta(ge=0, le=1)] | None = None

    def budget(self) -> Budget:
        """The one :class:`~ragattn.types.Budget` named here.

        Raises:
            InvalidInputError: none or more than one budget.
        """
        try:
            return Budget.from_args(self.ratio, self.target_tokens, self.threshold)
        except InvalidInputError as exc:
            raise InvalidInputError(
                "send exactly one budget in 'prune': ratio, target_tokens or threshold"
            ) from exc


class RerankRequest(Struct, kw_only=True):
    """Cohere v1/v2 rerank request, TEI's ``texts``, and the ``top_k``, ``return_text`` aliases.

    Exactly one of ``documents`` and ``texts``; at most one of ``top_n`` and its alias ``top_k``.
    ``method`` (ours, optional) picks a ``ragattn.rerank.METHODS`` name for this request; ``model``
    stays Cohere's field, accepted and ignored: Cohere clients always send one of Cohere's model
    names, which must not change or break the ranking. ``prune`` (ours, optional) asks for each
    result's kept sentences under one budget, ranked and pruned from the compressor's one read
    (:meth:`resolved_prune`); it excludes ``method``.
    """

    query: Text
    documents: Annotated[list[str | DocumentIn], Meta(min_length=1)] | None = None
    texts: Annotated[list[str], Meta(min_length=1)] | None = None
    model: str | None = None
    top_n: PositiveInt | None = None
    top_k: PositiveInt | None = None
    return_documents: bool | None = None
    return_text: bool | None = None
    max_tokens_per_doc: PositiveInt | None = None
    max_chunks_per_doc: PositiveInt | None = None
    rank_fields: Annotated[list[Literal["text"]], Meta(min_length=1, max_length=1)] | None = None
    raw_scores: bool = False
    priority: int | None = None
    method: str | None = None
    prune: PruneIn | None = None

    def resolved_documents(self) -> list[Document]:
        """The candidates from ``documents`` or ``texts`` (exactly one of them)."""
        if self.documents is not None and self.texts is not None:
            raise InvalidInputError("send either 'documents' or 'texts', not both")
        if self.documents is None and self.texts is None:
            raise InvalidInputError("'documents' is required (a list of strings or {text} objects)")
        return to_documents(
            self.documents if self.documents is not None else list(self.texts or [])
        )

    def resolved_top_n(self) -> int | None:
        return _one_top_n(self.top_n, self.top_k)

    def resolved_return_documents(self) -> bool:
        return bool(self.return_documents or self.return_text)

    def resolved_prune(self) -> Budget | None:
        """The pruning budget (``None``: no ``prune``, the plain rerank).

        Raises:
            InvalidInputError: not exactly one budget in ``prune``, or ``prune`` with ``method``
                (with ``prune`` the compressor's method ranks; a rerank method cannot also).
        """
        if self.prune is None:
            return None
        if self.method is not None:
            raise InvalidInputError(
                "send 'prune' or 'method', not both: with 'prune' the compressor's one read "
                "ranks and prunes (the response's 'method' names it)"
            )
        return self.prune.budget()


class RerankDocumentOut(Struct):
    text: str


class RerankResultOut(Struct, omit_defaults=True):
    """One ranked document; ``pruned_text`` and ``kept_spans`` only when the request sent
    ``prune`` (a request without it gets exactly Cohere's keys)."""

    index: int
    relevance_score: float
    document: RerankDocumentOut | None = None
    raw_score: float | None = None
    pruned_text: str | None = None
    kept_spans: list[KeptSpanOut] | None = None


class ApiVersion(Struct):
    version: str


class BilledUnits(Struct):
    search_units: int
    input_tokens: int


class PruningOut(Struct):
    """Token counts of a pruned rerank, in ``tokenizer``'s tokens: ``origin_tokens`` of the
    returned results' texts together, ``compressed_tokens`` of their kept sentences together;
    ``ratio`` is compressed / origin (the fraction kept)."""

    origin_tokens: int
    compressed_tokens: int
    ratio: float
    tokenizer: str


class RerankMeta(Struct, omit_defaults=True):
    """Cohere's ``meta``; ``pruning`` only when the request sent ``prune``."""

    api_version: ApiVersion
    billed_units: BilledUnits
    warnings: list[str]
    pruning: PruningOut | None = None


class RerankResponse(Struct, omit_defaults=True):
    """Cohere's rerank response; ``model`` is an extra key naming the proxy that scored, and
    ``method`` one naming the method that ranked, present only when the request named one or sent
    ``prune`` (a request with neither gets exactly Cohere's shape plus ``model``)."""

    id: str
    results: list[RerankResultOut]
    meta: RerankMeta
    model: str
    method: str | None = None

    @classmethod
    def from_result(
        cls,
        result: RerankResults,
        *,
        id: str,
        api_version: str,
        model: str,
        input_tokens: int,
        return_documents: bool,
        raw_scores: bool,
        warnings: list[str],
        pruned: CompressionResult | None = None,
    ) -> RerankResponse:
        """The wire response of ``result``; with ``pruned`` (the compression of the same call,
        one document per result) each result also carries its ``pruned_text`` and ``kept_spans``,
        ``meta.pruning`` the token counts, ``meta.warnings`` the compression's warnings and
        ``method`` the ranking method (``result.method``)."""
        kept = {d.index: d for d in pruned.documents} if pruned is not None else {}
        if pruned is not None and sorted(kept) != sorted(r.index for r in result):
            raise ModelOutputError("the pruned documents are not the ranked ones")
        items = []
        for r in result:
            score = _finite(r.relevance_score, "relevance_score")
            doc = kept.get(r.index)
            items.append(
                RerankResultOut(
                    index=r.index,
                    relevance_score=score,
                    document=RerankDocumentOut(text=r.document.text) if return_documents else None,
                    raw_score=_finite(r.raw_score, "raw_score") if raw_scores else None,
                    pruned_text=doc.text if doc is not None else None,
                    kept_spans=_kept_spans(doc) if doc is not None else None,
                )
            )
        n_docs = max((r.index for r in result), default=-1) + 1
        return cls(
            id=id,
            results=items,
            meta=RerankMeta(
                api_version=ApiVersion(version=api_version),
                billed_units=BilledUnits(
                    search_units=max(1, math.ceil(n_docs / 100)), input_tokens=input_tokens
                ),
                warnings=[
                    *warnings,
                    *result.warnings,
                    *(pruned.warnings if pruned is not None else ()),
                ],
                pruning=_pruning(pruned) if pruned is not None else None,
            ),
            model=model,
            method=result.method if pruned is not None else None,
        )


def _pruning(result: CompressionResult) -> PruningOut:
    return PruningOut(
        origin_tokens=result.origin_tokens,
        compressed_tokens=result.compressed_tokens,
        ratio=_finite(result.ratio, "ratio"),
        tokenizer=result.tokenizer,
    )


def _kept_spans(document: CompressedDocument) -> list[KeptSpanOut]:
    return [
        KeptSpanOut(start=s.start, end=s.end, score=_finite(s.score, "score"), text=s.text)
        for s in document.kept_spans
    ]


def _one_top_n(top_n: int | None, top_k: int | None) -> int | None:
    if top_n is not None and top_k is not None:
        raise InvalidInputError("send top_n or its alias top_k, not both")
    return top_n if top_n is not None else top_k


def _finite(value: float, name: str) -> float:
    if not math.isfinite(value):
        # One bad number must fail this request only, loudly, never serialize as NaN.
        raise ModelOutputError(f"the model produced a non-finite {name}")
    return float(value)


class CompressRequest(Struct, kw_only=True):
    """Compress documents (or one ``context``) for a query under exactly one budget.

    ``rate`` and ``target_token`` are LLMLingua's names for ``ratio`` and ``target_tokens``.
    """

    query: Text
    documents: Annotated[list[str | DocumentIn], Meta(min_length=1)] | None = None
    context: str | Annotated[list[str], Meta(min_length=1)] | None = None
    ratio: Fraction | None = None
    rate: Fraction | None = None
    target_tokens: PositiveInt | None = None
    target_token: PositiveInt | None = None
    threshold: Annotated[float, Meta(ge=0, le=1)] | None = None
    method: str | None = None
    keep_order: bool = True

    def resolved_documents(self) -> list[Document]:
        if self.documents is not None and self.context is not None:
            raise InvalidInputError("send either 'documents' or 'context', not both")
        if self.documents is None and self.context is None:
            raise InvalidInputError("'documents' (or 'context') is required")
        if self.context is not None:
            ctx = [self.context] if isinstance(self.context, str) else self.context
            return [Document(text=t) for t in ctx]
        return to_documents(self.documents or [])

    def resolved_budget(self) -> Budget:
        """Exactly one of ratio / target_tokens / threshold, aliases folded in, as the one checked
        :class:`~ragattn.types.Budget` the library takes (:meth:`Budget.from_args` holds the
        rule)."""
        if self.ratio is not None and self.rate is not None:
            raise InvalidInputError("send 'ratio' or its alias 'rate', not both")
        if self.target_tokens is not None and self.target_token is not None:
            raise InvalidInputError("send 'target_tokens' or its alias 'target_token', not both")
        ratio = self.ratio if self.ratio is not None else self.rate
        target = self.target_tokens if self.target_tokens is not None else self.target_token
        try:
            return Budget.from_args(ratio, target, self.threshold)
        except InvalidInputError as exc:
            raise InvalidInputError(
                "send exactly one budget: ratio (or rate), target_tokens or threshold"
            ) from exc


class KeptSpanOut(Struct):
    """A kept sentence: ``[start, end)`` in Unicode code points of its document's ``text`` as
    sent (``text[start:end]`` in Python is ``text``), and its keep score in [0, 1]."""

    start: int
    end: int
    score: float
    text: str


class CompressedDocumentOut(Struct):
    index: int
    text: str
    kept_spans: list[KeptSpanOut]
    sentence_scores: list[float]


class CompressResponse(Struct):
    """Compressed text per document and joined; token counts in ``tokenizer``'s tokens.

    ``ratio`` is compressed_tokens / origin_tokens (the fraction kept).
    """

    id: str
    compressed_text: str
    documents: list[CompressedDocumentOut]
    origin_tokens: int
    compressed_tokens: int
    ratio: float
    tokenizer: str
    method: str
    model: str
    warnings: list[str]

    @classmethod
    def from_result(
        cls, result: CompressionResult, *, id: str, model: str, warnings: list[str]
    ) -> CompressResponse:
        return cls(
            id=id,
            compressed_text=result.compressed_text,
            documents=compressed_documents(result),
            origin_tokens=result.origin_tokens,
            compressed_tokens=result.compressed_tokens,
            ratio=_finite(result.ratio, "ratio"),
            tokenizer=result.tokenizer,
            method=result.method,
            model=model,
            warnings=[*warnings, *result.warnings],
        )


def compressed_documents(result: CompressionResult) -> list[CompressedDocumentOut]:
    return [
        CompressedDocumentOut(
            index=d.index,
            text=d.text,
            kept_spans=_kept_spans(d),
            sentence_scores=[_finite(x, "sentence_score") for x in d.sentence_scores],
        )
        for d in result.documents
    ]


class RerankCompressRequest(CompressRequest, kw_only=True):
    """One scoring pass for both: rank the documents, then compress the best ``top_n`` of them."""

    top_n: PositiveInt | None = None
    top_k: PositiveInt | None = None
    return_documents: bool = False

    def resolved_top_n(self) -> int | None:
        return _one_top_n(self.top_n, self.top_k)


class CompressionOut(Struct):
    """The compression part of ``/v1/rerank_compress``: documents in rank order, input indices."""

    compressed_text: str
    documents: list[CompressedDocumentOut]
    origin_tokens: int
    compressed_tokens: int
    ratio: float
    tokenizer: str
    method: str
    warnings: list[str]


class RerankCompressResponse(Struct):
    """Cohere-style ``results`` for the ranking plus the compressed context of the kept ones;
    ``method`` names the method that ranked (the library's ``RerankResults.method``, e.g.
    ``sentinel:document-probe``), ``compression.method`` the one that compressed."""

    id: str
    results: list[RerankResultOut]
    compression: CompressionOut
    meta: RerankMeta
    model: str
    method: str

    @classmethod
    def from_result(
        cls,
        ranked: RerankResults,
        compressed: CompressionResult,
        *,
        id: str,
        model: str,
        input_tokens: int,
        return_documents: bool,
        warnings: list[str],
    ) -> RerankCompressResponse:
        rerank = RerankResponse.from_result(
            ranked,
            id=id,
            api_version="1",
            model=model,
            input_tokens=input_tokens,
            return_documents=return_documents,
            raw_scores=False,
            warnings=warnings,
        )
        return cls(
            id=id,
            results=rerank.results,
            compression=CompressionOut(
                compressed_text=compressed.compressed_text,
                documents=compressed_documents(compressed),
                origin_tokens=compressed.origin_tokens,
                compressed_tokens=compressed.compressed_tokens,
                ratio=_finite(compressed.ratio, "ratio"),
                tokenizer=compressed.tokenizer,
                method=compressed.method,
                warnings=list(compressed.warnings),
            ),
            meta=rerank.meta,
            model=model,
            method=ranked.method,
        )


class RetrieveRequest(Struct, kw_only=True):
    """First-stage retrieval from the configured index, optionally reranked by the proxy.

    ``mode`` omitted: ``hybrid`` when the index has dense vectors, else ``bm25``."""

    query: Text
    k: PositiveInt = 10
    mode: SearchMode | None = None
    rerank: bool = False
    top_n: PositiveInt | None = None
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

    ``flow`` is ``one_read`` (default: one proxy read of the ``top_k`` candidates ranks them and
    keeps their best sentences) or ``two_pass`` (rerank, keep ``top_n``, compress those).
    ``top_n`` and ``ratio`` default by flow: every candidate and 0.2 for one read, 5 and 0.5 for
    two passes. ``order`` is the context order for the generator (``best_first``, ``best_last``,
    ``edges``; default: the library's measured default). ``rerank`` / ``compress`` switch those
    stages off (without compression the flow is two passes).
    """

    question: Text
    flow: Literal["one_read", "two_pass"] = "one_read"
    top_k: PositiveInt = 20
    top_n: PositiveInt | None = None
    ratio: Fraction | None = None
    order: Literal["best_first", "best_last", "edges"] | None = None
    mode: SearchMode | None = None
    rerank: bool = True
    compress: bool = True
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
                retrieval_score=_finite(s.retrieval_score, "retrieval_score"),
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


class HealthResponse(Struct, omit_defaults=True):
    """Alive; once the proxy is loaded also where it runs: ``device`` (``cpu``, ``cuda:0``,
    ``mps``) and the weights' ``dtype`` (``float32``, ``bfloat16``); both absent while loading."""

    status: str
    device: str | None = None
    dtype: str | None = None


class ReadyResponse(Struct):
    """Ready to serve; ``degraded`` is true while the cache backend (Redis) is unreachable or
    failing: requests are still answered, just without the cache. ``device`` and ``dtype`` say
    where and in which precision the proxy runs. ``busy`` is true while the model thread has work
    (a new request waits behind ``queue_depth`` jobs, of at most ``queue_size``); a full queue
    makes ``/ready`` a 503."""

    status: str
    model: str
    rerank_method: str
    cache: str
    degraded: bool = False
    device: str = ""
    dtype: str = ""
    busy: bool = False
    queue_depth: int = 0
    queue_size: int = 0


class ErrorResponse(Struct):
    """The body of every 4xx/5xx response."""

    error_type: str
    message: str


__all__ = [
    "AskRequest",
    "AskResponse",
    "CompressRequest",
    "CompressResponse",
    "DocumentIn",
    "ErrorResponse",
    "HealthResponse",
    "PruneIn",
    "PruningOut",
    "ReadyResponse",
    "RerankCompressRequest",
    "RetrieveRequest",
    "RetrieveResponse",
    "RerankCompressResponse",
    "RerankRequest",
    "RerankResponse",
]
