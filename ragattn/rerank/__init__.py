"""Reranking: the :class:`Reranker` facade over the registry of scoring methods."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragattn.contract import RerankVerbs, VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.facade import ProxyFacade
from ragattn.first_stage import check_first_stage_order
from ragattn.proxy import DEFAULT_PROXY, Proxy
from ragattn.rerank.base import DocScores
from ragattn.rerank.icr import AttentionMemo
from ragattn.rerank.registry import (
    DEFAULT_METHOD,
    METHODS,
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
    ) -> None:
        self._bind(method, METHODS, proxy, device=device, dtype=dtype, threads=threads)
        self._start()
        inputs = ScorerInputs(proxy=self._proxy.loaded, proxy_name=self._proxy.name, memo=memo)
        self.scorer = self.spec.factory(inputs)

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
        return self.scorer.score(query, docs, _check_order(first_stage_order, docs))

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
        return self._ranked(query, docs, args, _check_order(first_stage_order, docs))

    def rerank_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> RerankResults:
        """:meth:`rerank` of a checked call (see :class:`~ragattn.contract.RerankVerbs`)."""
        return self._ranked(query, documents, args, None)

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


__all__ = ["DEFAULT_METHOD", "METHODS", "Reranker"]
