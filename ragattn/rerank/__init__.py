"""Reranking: the :class:`Reranker` facade over the registry of scoring methods."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from ragattn.call_language import ENGLISH, call_language
from ragattn.contract import RerankVerbs, VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.facade import ProxyFacade
from ragattn.first_stage import check_first_stage_order
from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY, Proxy
from ragattn.rerank.base import DocScores
from ragattn.rerank.icr import AttentionMemo
from ragattn.rerank.registry import (
    DEFAULT_METHOD,
    METHODS,
    MULTILINGUAL_METHOD,
    RerankSpec,
    ScorerFactory,
    ScorerInputs,
)
from ragattn.types import Document, DocumentLike, RerankResult, RerankResults, as_documents
from ragattn.validation import check_query


class Reranker(ProxyFacade[ScorerFactory], RerankVerbs[RerankResults]):
    """Reranks candidate documents for a query with the attention of a small proxy LLM.

    The proxy's weights are loaded only for methods that run it (see :data:`METHODS`); for the
    others (``minilm``, ``fused-no-attention``) :attr:`proxy` loads them on first access.

    Args:
        proxy: a loaded :class:`Proxy` or a name/path for :func:`ragattn.proxy.load_proxy`
            (default: the packaged SmolLM2-135M).
        method: a key of :data:`METHODS` (default: the best measured configuration), or a
            method's spec (the lab's variants: :func:`ragattn.lab.registry.rerank_spec`).
        device: where the proxy runs: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``,
            ``"cuda"``, ``"cuda:N"`` or ``"mps"``; checked at once even when the method loads no
            proxy. A loaded ``proxy`` keeps its own device.
        dtype, threads: passed to :func:`load_proxy` when ``proxy`` is a name (``dtype="auto"``:
            bf16 where the device runs it natively, CUDA or a CPU with AVX-512 BF16 or AMX,
            else fp32; ``threads`` is applied even when no proxy is loaded).
        memo: share one all-heads capture between rerankers scoring the same lists (evaluations).
        multilingual: what ranks a call not in English (:func:`~ragattn.call_language.call_language`
            of the query and documents): ``"auto"`` (default) ranks it with
            :data:`MULTILINGUAL_METHOD` on Gemma-3-270M where this reranker is the default one
            (the packaged proxy and :data:`DEFAULT_METHOD`); a method or proxy of one's own ranks
            every language itself. A proxy (name, path or loaded) runs
            :data:`MULTILINGUAL_METHOD` for calls not in English; ``None``: this reranker ranks
            every language. The second reranker is built on the first such call (a method that
            runs no proxy loads none); if it cannot be built, this one ranks every language and a
            warning is logged. English calls are ranked by this reranker, whatever the setting.
            Results name the method that ranked (``RerankResults.method``).

    Raises:
        InvalidInputError: an unknown method (the message lists the valid ones).
        ModelLoadError: the proxy or a learned profile the method reads is missing.
        ConfigError: a device this machine does not have (the message lists the available ones).
    """

    def __init__(
        self,
        proxy: str | Proxy = DEFAULT_PROXY,
        *,
        method: str | RerankSpec = DEFAULT_METHOD,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        memo: AttentionMemo | None = None,
        multilingual: str | Proxy | None = "auto",
    ) -> None:
        self._bind(method, METHODS, proxy, device=device, dtype=dtype, threads=threads)
        self._start()
        inputs = ScorerInputs(proxy=self._proxy.loaded, proxy_name=self._proxy.name, memo=memo)
        self.scorer = self.spec.factory(inputs)
        default = self._proxy.name == DEFAULT_PROXY and method == DEFAULT_METHOD
        self.multilingual: str | Proxy | None = (
            (MULTILINGUAL_PROXY if default else None) if multilingual == "auto" else multilingual
        )
        self._like_this = partial(
            Reranker,
            method=MULTILINGUAL_METHOD,
            device=device,
            dtype=dtype,
            threads=threads,
            multilingual=None,
        )
        self._second: Reranker | None = None

    @property
    def multilingual_reranker(self) -> Reranker | None:
        """The reranker that ranks calls not in English, once a call has built it (None before,
        and where this one ranks every language)."""
        return self._second

    def engine_for(self, query: str, documents: Sequence[Document]) -> Reranker:
        """The reranker that ranks a call: this one for English (or where :attr:`multilingual`
        is None), else the multilingual one, built on the first such call; this one again, with
        a logged warning, where that cannot be built."""
        if self.multilingual is None:
            return self
        language = call_language(query, documents)
        if language == ENGLISH:
            return self
        return self._multilingual_engine(language)

    def score(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        first_stage_order: Sequence[int] | None = None,
    ) -> DocScores:
        """Scores aligned with ``documents`` (no sorting); see :meth:`rerank`."""
        query = check_query(query)
        docs = as_documents(documents)
        order = _check_order(first_stage_order, docs)
        return self.engine_for(query, docs).scorer.score(query, docs, order)

    def rerank(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        first_stage_order: Sequence[int] | None = None,
    ) -> RerankResults:
        """Rerank ``documents`` for ``query``.

        Args:
            query: the question or search query (non-empty).
            documents: strings, :class:`~ragattn.types.Document` s or mappings with ``text``
                (and optional ``id``, ``title``).
            top_n: return only the best ``top_n`` (default: all); at most ``len(documents)``.
            first_stage_order: the first stage's ranking (indices, best first), when the
                documents come from a retriever whose order should count. Default None: input
                position means nothing (as in Cohere's API and LangChain's compressors); methods
                that can use a rank prior (``fused``, ``fused-no-attention``) use it only when
                given, and listwise methods then place the best first-stage document nearest the
                query.

        Returns:
            Results in descending relevance; exact ties keep input order. ``index`` is the input
            position.

        Raises:
            InvalidInputError: empty query, no documents, a malformed document, or ``top_n < 1``.
        """
        args = VerbArgs(verb="rerank", top_n=top_n)
        docs = as_documents(documents)
        query = check_query(query)
        order = _check_order(first_stage_order, docs)
        return self.engine_for(query, docs)._ranked(query, docs, args, order)

    def rerank_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> RerankResults:
        """:meth:`rerank` of a checked call (see :class:`~ragattn.contract.RerankVerbs`)."""
        return self.engine_for(query, documents)._ranked(query, documents, args, None)

    def _ranked(
        self,
        query: str,
        docs: Sequence[Document],
        args: VerbArgs,
        order: list[int] | None,
    ) -> RerankResults:
        scores = self.scorer.score(query, docs, order)
        ranking = sorted(range(len(docs)), key=lambda i: (-scores.raw[i], i))
        results = [
            RerankResult(
                index=i,
                relevance_score=float(np.clip(scores.relevance[i], 0.0, 1.0)),
                raw_score=float(scores.raw[i]),
                document=docs[i],
            )
            for i in ranking[: args.top_n]
        ]
        return RerankResults(
            results, warnings=scores.warnings, method=self.method, windows=scores.windows
        )


def _check_order(
    first_stage_order: Sequence[int] | None, docs: Sequence[Document]
) -> list[int] | None:
    """``first_stage_order`` as a list, checked against the documents (which must be some).

    Raises:
        InvalidInputError: no documents, or an order that is no permutation of their indices.
    """
    if not docs:
        raise InvalidInputError("documents must hold at least one document")
    return check_first_stage_order(first_stage_order, len(docs))


__all__ = ["DEFAULT_METHOD", "METHODS", "MULTILINGUAL_METHOD", "Reranker"]
