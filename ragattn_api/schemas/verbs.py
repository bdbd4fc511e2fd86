"""Wire formats of the model routes: rerank (Cohere v1/v2, Jina and TEI requests, Cohere's
response shape), ``/v1/compress`` (LLMLingua's aliases accepted) and ``/v1/rerank_compress``."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct
from msgspec.structs import replace

from ragattn.contract import default_budget
from ragattn.errors import InvalidInputError, ModelOutputError
from ragattn.types import (
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    RerankResults,
)
from ragattn_api.schemas.common import (
    Cap,
    Count,
    DocumentIn,
    Fraction,
    Index,
    Int32,
    KeptSpanOut,
    Language,
    Text,
    TokenCount,
    finite,
    kept_spans,
    one_top_n,
    to_documents,
)


class PruneIn(Struct, kw_only=True, forbid_unknown_fields=True):
    """The rerank routes' ``prune`` object: at most one budget for the kept sentences of the
    returned results, counted together (one budget across all of them, in proxy tokens); none
    (``{}``): :data:`~ragattn.types.DEFAULT_BUDGET`, as every door gives a call without one.

    ``ratio`` is the fraction of tokens kept, in (0, 1]; ``target_tokens`` the most tokens kept;
    ``threshold`` the lowest keep score kept, in [0, 1]: the compress route's budgets, without its
    LLMLingua aliases; ``max_tokens`` (optional, with ``ratio`` only) caps a ratio at that many
    tokens (alone: the default budget's ceiling instead of its 1,024). ``language`` (optional) is
    the documents' language for sentence splitting, as on the
    compress route: ``auto`` (default) or an ISO 639-1 code. Unlike the top-level fields
    (Cohere's, whose unknown siblings are ignored with a warning) an unknown key in here is a
    400: the object is ours, and a misspelt budget must not pass.
    """

    ratio: Fraction | None = None
    target_tokens: TokenCount | None = None
    threshold: Annotated[float, Meta(ge=0, le=1)] | None = None
    max_tokens: TokenCount | None = None
    language: Language = "auto"

    def budget(self) -> Budget:
        """The one :class:`~ragattn.types.Budget` named here, or the default one
        (:func:`~ragattn.contract.default_budget`: a ``max_tokens`` alone replaces its ceiling).

        Raises:
            InvalidInputError: more than one budget, or ``max_tokens`` beside ``target_tokens``
                or ``threshold``.
        """
        if (self.ratio, self.target_tokens, self.threshold) == (None, None, None):
            return default_budget(self.max_tokens)
        try:
            budget = Budget.from_args(self.ratio, self.target_tokens, self.threshold)
        except InvalidInputError as exc:
            raise InvalidInputError(
                "send at most one budget in 'prune': ratio, target_tokens or threshold"
            ) from exc
        return _capped(budget, self.max_tokens)


def _capped(budget: Budget, max_tokens: int | None) -> Budget:
    """``budget`` with the token ceiling ``max_tokens`` (None: as it is).

    Raises:
        InvalidInputError: a ceiling on a budget that is not a ratio (the message names both).
    """
    if max_tokens is None:
        return budget
    return Budget(kind=budget.kind, value=budget.value, max_tokens=max_tokens)


class RerankRequest(Struct, kw_only=True):
    """Cohere v1/v2 rerank request, TEI's ``texts``, and the ``top_k``, ``return_text`` aliases.

    Exactly one of ``documents`` and ``texts``; at most one of ``top_n`` and its alias ``top_k``.
    ``method`` (ours, optional) picks a ``ragattn.rerank.METHODS`` name for this request; ``model``
    stays Cohere's field, accepted and ignored: Cohere clients always send one of Cohere's model
    names, which must not change or break the ranking. ``prune`` (ours, optional) asks for each
    result's kept sentences under one budget, ranked and pruned from the compressor's one read
    (:meth:`resolved_prune`); it excludes ``method``. ``max_tokens_per_doc`` (Cohere's) cuts each
    longer document's text so that its title and text have at most that many proxy tokens, with
    a warning; above ``RAGATTN_MAX_TOKENS_PER_DOC`` it changes nothing.
    """

    query: Text
    documents: Annotated[list[str | DocumentIn], Meta(min_length=1)] | None = None
    texts: Annotated[list[str], Meta(min_length=1)] | None = None
    model: str | None = None
    top_n: Count | None = None
    top_k: Count | None = None
    return_documents: bool | None = None
    return_text: bool | None = None
    max_tokens_per_doc: Cap | None = None
    max_chunks_per_doc: Cap | None = None
    rank_fields: Annotated[list[Literal["text"]], Meta(min_length=1, max_length=1)] | None = None
    raw_scores: bool = False
    priority: Int32 | None = None
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
        return one_top_n(self.top_n, self.top_k)

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
    ``prune`` (a request without it gets exactly Cohere's keys), ``added`` only where the pruned
    text repeats a fence or a table header (:class:`AddedTextOut`, as a compressed document's)."""

    index: int
    relevance_score: float
    document: RerankDocumentOut | None = None
    raw_score: float | None = None
    pruned_text: str | None = None
    kept_spans: list[KeptSpanOut] | None = None
    added: list[AddedTextOut] | None = None


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


StageSecondsOut = dict[str, float]
"""Where a fresh answer's time went: each stage of the compressor's read (``sentences``,
``candidates``, ``cut``, ``forward``, ``documents``, ``selection``, ``ranking``, ``assembly``; see
:mod:`ragattn.compress.read`) and its wall-clock seconds on the model thread, in the order the
stages ran. Only in an answer computed for this request: a cache hit has none."""


def stage_seconds(result: CompressionResult) -> StageSecondsOut | None:
    """``result.stage_seconds`` on the wire (None when it has none), to the microsecond."""
    if not result.stage_seconds:
        return None
    return {name: round(float(seconds), 6) for name, seconds in result.stage_seconds}


class RerankMeta(Struct, omit_defaults=True):
    """Cohere's ``meta``; ``pruning`` only when the request sent ``prune``, ``stage_seconds``
    (:data:`StageSecondsOut`) only with ``prune`` and only in a fresh answer."""

    api_version: ApiVersion
    billed_units: BilledUnits
    warnings: list[str]
    pruning: PruningOut | None = None
    stage_seconds: StageSecondsOut | None = None


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
        one document per result) each result also carries its ``pruned_text`` and ``kept_spans``
        (and ``added`` where its text repeats a fence or a header),
        ``meta.pruning`` the token counts, ``meta.warnings`` the compression's warnings and
        ``method`` the ranking method (``result.method``)."""
        kept = {d.index: d for d in pruned.documents} if pruned is not None else {}
        if pruned is not None and sorted(kept) != sorted(r.index for r in result):
            raise ModelOutputError("the pruned documents are not the ranked ones")
        items = []
        for r in result:
            score = finite(r.relevance_score, "relevance_score")
            doc = kept.get(r.index)
            items.append(
                RerankResultOut(
                    index=r.index,
                    relevance_score=score,
                    document=RerankDocumentOut(text=r.document.text) if return_documents else None,
                    raw_score=finite(r.raw_score, "raw_score") if raw_scores else None,
                    pruned_text=doc.text if doc is not None else None,
                    kept_spans=kept_spans(doc) if doc is not None else None,
                    added=added_texts(doc) if doc is not None else None,
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
                stage_seconds=stage_seconds(pruned) if pruned is not None else None,
            ),
            model=model,
            method=result.method if pruned is not None else None,
        )


def _pruning(result: CompressionResult) -> PruningOut:
    return PruningOut(
        origin_tokens=result.origin_tokens,
        compressed_tokens=result.compressed_tokens,
        ratio=finite(result.ratio, "ratio"),
        tokenizer=result.tokenizer,
    )


class CompressRequest(Struct, kw_only=True):
    """Compress documents (or one ``context``) for a query under at most one budget (none:
    :data:`~ragattn.types.DEFAULT_BUDGET`, as every door gives a call without one).

    ``rate`` and ``target_token`` are LLMLingua's names for ``ratio`` and ``target_tokens``.
    ``max_tokens`` (optional, with ``ratio`` only) is a ceiling on a ratio: the most tokens kept
    whatever the ratio gives; alone, the default budget's ceiling instead of its 1,024.
    ``language`` (optional) is the documents' language for sentence
    splitting: ``auto`` (default, by each text's script) or an ISO 639-1 code
    (:data:`~ragattn_api.schemas.common.Language`). ``first_stage_order`` (optional) lists the
    documents' indices in the caller's retriever order, best first, when they come ranked: the
    read weighs each document's relevance with that order by ``RAGATTN_COMPRESS_FIRST_STAGE_PRIOR``
    (default 0: checked, not read; a permutation of the indices, else a 422 ``invalid_order``;
    without it no position is read as a rank). ``max_tokens_per_doc`` (optional, the rerank
    routes' field) truncates: each document longer than that many proxy tokens, its title and
    text together, has its text cut (never its title) with a warning, instead of a 413; above
    ``RAGATTN_MAX_TOKENS_PER_DOC`` it changes nothing.
    """

    query: Text
    documents: Annotated[list[str | DocumentIn], Meta(min_length=1)] | None = None
    context: str | Annotated[list[str], Meta(min_length=1)] | None = None
    max_tokens_per_doc: Cap | None = None
    ratio: Fraction | None = None
    rate: Fraction | None = None
    target_tokens: TokenCount | None = None
    target_token: TokenCount | None = None
    threshold: Annotated[float, Meta(ge=0, le=1)] | None = None
    max_tokens: TokenCount | None = None
    method: str | None = None
    keep_order: bool = True
    language: Language = "auto"
    first_stage_order: list[Index] | None = None

    def resolved_documents(self) -> list[Document]:
        """The documents from ``documents`` or ``context`` (exactly one of them)."""
        if self.documents is not None and self.context is not None:
            raise InvalidInputError("send either 'documents' or 'context', not both")
        if self.documents is None and self.context is None:
            raise InvalidInputError("'documents' (or 'context') is required")
        if self.context is not None:
            return to_documents([self.context] if isinstance(self.context, str) else self.context)
        return to_documents(self.documents or [])

    def resolved_budget(self) -> Budget:
        """At most one of ratio / target_tokens / threshold, aliases folded in, as the one checked
        :class:`~ragattn.types.Budget` the library takes (:meth:`Budget.from_args` holds the
        rule), capped at ``max_tokens`` when given (a ratio only); none: the default budget
        (:func:`~ragattn.contract.default_budget`), its ceiling ``max_tokens`` when given."""
        if self.ratio is not None and self.rate is not None:
            raise InvalidInputError("send 'ratio' or its alias 'rate', not both")
        if self.target_tokens is not None and self.target_token is not None:
            raise InvalidInputError("send 'target_tokens' or its alias 'target_token', not both")
        ratio = self.ratio if self.ratio is not None else self.rate
        target = self.target_tokens if self.target_tokens is not None else self.target_token
        if (ratio, target, self.threshold) == (None, None, None):
            return default_budget(self.max_tokens)
        try:
            budget = Budget.from_args(ratio, target, self.threshold)
        except InvalidInputError as exc:
            raise InvalidInputError(
                "send at most one budget: ratio (or rate), target_tokens or threshold"
            ) from exc
        return _capped(budget, self.max_tokens)


class AddedTextOut(Struct):
    """A fence or table header the library repeated into a compressed Markdown document's
    ``text`` so that it stays valid Markdown (never a kept span): ``kind`` (``fence`` or
    ``table_header``), the ``text`` inserted at code point ``offset`` of the document's ``text``,
    and the ``[source_start, source_end)`` range of the input document it repeats."""

    kind: str
    text: str
    offset: int
    source_start: int
    source_end: int


class CompressedDocumentOut(Struct, omit_defaults=True):
    """One compressed document; ``added`` only where its text repeats a fence or a header."""

    index: int
    text: str
    kept_spans: list[KeptSpanOut]
    sentence_scores: list[float]
    added: list[AddedTextOut] | None = None


class CompressMeta(Struct, omit_defaults=True):
    """``/v1/compress``'s ``meta``: ``stage_seconds`` (:data:`StageSecondsOut`)."""

    stage_seconds: StageSecondsOut | None = None


class CompressResponse(Struct, omit_defaults=True):
    """Compressed text per document and joined; token counts in ``tokenizer``'s tokens.

    ``ratio`` is compressed_tokens / origin_tokens (the fraction kept). ``meta`` only in a fresh
    answer (a cache hit has none).
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
    meta: CompressMeta | None = None

    @classmethod
    def from_result(
        cls, result: CompressionResult, *, id: str, model: str, warnings: list[str]
    ) -> CompressResponse:
        seconds = stage_seconds(result)
        return cls(
            id=id,
            model=model,
            warnings=[*warnings, *result.warnings],
            meta=CompressMeta(stage_seconds=seconds) if seconds is not None else None,
            **_compression(result),
        )


def _compression(result: CompressionResult) -> dict[str, Any]:
    """The fields a compression's wire forms share (all but ``warnings``), checked finite."""
    return {
        "compressed_text": result.compressed_text,
        "documents": compressed_documents(result),
        "origin_tokens": result.origin_tokens,
        "compressed_tokens": result.compressed_tokens,
        "ratio": finite(result.ratio, "ratio"),
        "tokenizer": result.tokenizer,
        "method": result.method,
    }


def compressed_documents(result: CompressionResult) -> list[CompressedDocumentOut]:
    return [
        CompressedDocumentOut(
            index=d.index,
            text=d.text,
            kept_spans=kept_spans(d),
            sentence_scores=[finite(x, "sentence_score") for x in d.sentence_scores],
            added=added_texts(d),
        )
        for d in result.documents
    ]


def added_texts(document: CompressedDocument) -> list[AddedTextOut] | None:
    """A compressed document's repeated fences and headers on the wire; None (the key left
    out) when it repeats none."""
    return [
        AddedTextOut(
            kind=a.kind,
            text=a.text,
            offset=a.offset,
            source_start=a.source_start,
            source_end=a.source_end,
        )
        for a in document.added
    ] or None


class RerankCompressRequest(CompressRequest, kw_only=True):
    """One scoring pass for both: rank the documents, then compress the best ``top_n`` of them."""

    top_n: Count | None = None
    top_k: Count | None = None
    return_documents: bool = False

    def resolved_top_n(self) -> int | None:
        return one_top_n(self.top_n, self.top_k)


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
            raw_scores=True,
            warnings=warnings,
        )
        return cls(
            id=id,
            results=rerank.results,
            compression=CompressionOut(
                warnings=list(compressed.warnings), **_compression(compressed)
            ),
            meta=replace(rerank.meta, stage_seconds=stage_seconds(compressed)),
            model=model,
            method=ranked.method,
        )


__all__ = [
    "AddedTextOut",
    "ApiVersion",
    "BilledUnits",
    "CompressMeta",
    "CompressRequest",
    "CompressResponse",
    "CompressedDocumentOut",
    "CompressionOut",
    "PruneIn",
    "PruningOut",
    "RerankCompressRequest",
    "RerankCompressResponse",
    "RerankDocumentOut",
    "RerankMeta",
    "RerankRequest",
    "RerankResponse",
    "RerankResultOut",
    "StageSecondsOut",
    "added_texts",
    "compressed_documents",
    "stage_seconds",
]
