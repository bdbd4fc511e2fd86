"""LangChain adapters: attention reranking and sentence compression as document compressors.

- :class:`RagattnRerank` (a ``BaseDocumentCompressor``) reorders documents best first, keeps
  ``top_n``, and writes ``metadata["relevance_score"]`` (in [0, 1]) and
  ``metadata["ragattn_raw_score"]`` (method units).
- :class:`RagattnCompressor` replaces each document's ``page_content`` by its kept sentences and
  writes ``metadata["ragattn_kept_spans"]``: ``[{start, end, score, text}]``, character offsets
  into the text it received.
- :class:`RagattnRetriever` (a ``BaseRetriever``) wraps any retriever with either or both.

Every engine works: in process (``Reranker`` / ``Compressor``) or the service (``Client`` /
``AsyncClient``). ``acompress_documents`` / ``ainvoke`` are native: they await the service, or
run in-process work in a worker thread. Output documents are copies of the inputs with the same
``id``, the same original metadata plus the keys above; inputs are never modified.

Use inside ``ContextualCompressionRetriever`` (``langchain-classic``)::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    retriever = ContextualCompressionRetriever(
        base_compressor=RagattnRerank(reranker=Reranker(), top_n=3), base_retriever=base
    )
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragattn._optional import require

require("langchain_core", extra="langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import BaseDocumentCompressor  # noqa: E402
from langchain_core.documents import Document as LCDocument  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

from ragattn.contract import VerbArgs  # noqa: E402
from ragattn.integrations import (  # noqa: E402
    KEPT_SPANS_KEY,
    RAW_SCORE_KEY,
    Engine,
    check_top_n,
    compress_args,
    kept_spans_metadata,
)
from ragattn.types import CompressionResult, Document, RerankResults  # noqa: E402


def _to_ragattn(documents: Sequence[LCDocument]) -> list[Document]:
    return [Document(text=d.page_content, id=d.id) for d in documents]


class RagattnRerank(BaseDocumentCompressor):
    """Rerank documents with a ragattn engine; best first, ``top_n`` kept.

    Args:
        reranker: a ``Reranker`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Reranker()``, loaded on the first call.
        top_n: documents to keep (default 3, LangChain's usual); None keeps all.

    Raises:
        InvalidInputError: a wrong engine or ``top_n``; at call time, an empty query.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Any = None
    top_n: int | None = 3
    _engine: Engine = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_top_n(self.top_n)
        self._engine = Engine(self.reranker, role="reranker")

    def _documents(
        self, documents: Sequence[LCDocument], results: RerankResults
    ) -> list[LCDocument]:
        out = []
        for r in results:
            source = documents[r.index]
            metadata = {
                **source.metadata,
                "relevance_score": r.relevance_score,
                RAW_SCORE_KEY: r.raw_score,
            }
            out.append(source.model_copy(update={"metadata": metadata}))
        return out

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """Rerank ``documents`` for ``query``; ``[]`` for no documents."""
        if not documents:
            return []
        results = self._engine.rerank(query, _to_ragattn(documents), top_n=self.top_n)
        return self._documents(documents, results)

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """The async twin of :meth:`compress_documents`; the same result."""
        if not documents:
            return []
        results = await self._engine.arerank(query, _to_ragattn(documents), top_n=self.top_n)
        return self._documents(documents, results)


class RagattnCompressor(BaseDocumentCompressor):
    """Prune each document to the sentences that answer the query, under one budget.

    The budget covers all documents of a call together (they are compressed as one context).

    Args:
        compressor: a ``Compressor`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Compressor()``, loaded on the first call.
        ratio: fraction of tokens to keep, in (0, 1] (default 0.5 when no budget is set); or
        target_tokens: keep at most this many tokens (the engine's tokenizer); or
        threshold: keep sentences whose keep score is at least this, in [0, 1].
        drop_empty: leave out documents with no kept sentence (default); False keeps them with
            empty ``page_content``. Order is always the input order.

    Raises:
        InvalidInputError: more than one budget, or a wrong engine.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    compressor: Any = None
    ratio: float | None = None
    target_tokens: int | None = None
    threshold: float | None = None
    drop_empty: bool = True
    _engine: Engine = PrivateAttr()
    _args: VerbArgs = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._args = compress_args(self.ratio, self.target_tokens, self.threshold)
        self._engine = Engine(self.compressor, role="compressor")

    def _documents(
        self, documents: Sequence[LCDocument], result: CompressionResult
    ) -> list[LCDocument]:
        out = []
        for d in result.documents:
            if self.drop_empty and not d.text:
                continue
            source = documents[d.index]
            metadata = {**source.metadata, KEPT_SPANS_KEY: kept_spans_metadata(result, d.index)}
            out.append(source.model_copy(update={"page_content": d.text, "metadata": metadata}))
        return out

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """Compress ``documents`` for ``query``; ``[]`` for no documents."""
        if not documents:
            return []
        result = self._engine.compress(query, _to_ragattn(documents), self._args)
        return self._documents(documents, result)

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """The async twin of :meth:`compress_documents`; the same result."""
        if not documents:
            return []
        result = await self._engine.acompress(query, _to_ragattn(documents), self._args)
        return self._documents(documents, result)


class RagattnRetriever(BaseRetriever):
    """Any retriever, then ragattn rerank, then compression (either step may be left out).

    Args:
        base_retriever: the first stage.
        rerank: a :class:`RagattnRerank`, or None.
        compress: a :class:`RagattnCompressor` (applied to the reranked documents), or None.
            With neither, the retriever reranks with the in-process default ``RagattnRerank()``.

    Build one from engines with :meth:`from_engines`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_retriever: BaseRetriever
    rerank: RagattnRerank | None = None
    compress: RagattnCompressor | None = None

    def __init__(self, **data: Any) -> None:
        if data.get("rerank") is None and data.get("compress") is None:
            data["rerank"] = RagattnRerank()
        super().__init__(**data)

    @classmethod
    def from_engines(
        cls,
        base_retriever: BaseRetriever,
        *,
        reranker: Any = None,
        compressor: Any = None,
        top_n: int | None = 3,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
    ) -> RagattnRetriever:
        """Rerank with ``reranker`` and/or compress with ``compressor`` (in-process engines or
        one ``Client`` for both); ``top_n`` and the budget as in the adapters. With neither engine,
        rerank with the in-process default."""
        if reranker is None and compressor is None:
            return cls(base_retriever=base_retriever, rerank=RagattnRerank(top_n=top_n))
        return cls(
            base_retriever=base_retriever,
            rerank=None if reranker is None else RagattnRerank(reranker=reranker, top_n=top_n),
            compress=None
            if compressor is None
            else RagattnCompressor(
                compressor=compressor, ratio=ratio, target_tokens=target_tokens, threshold=threshold
            ),
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        docs: Sequence[LCDocument] = self.base_retriever.invoke(
            query, config={"callbacks": run_manager.get_child()}
        )
        if self.rerank is not None:
            docs = self.rerank.compress_documents(docs, query, callbacks=run_manager.get_child())
        if self.compress is not None:
            docs = self.compress.compress_documents(docs, query, callbacks=run_manager.get_child())
        return list(docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[LCDocument]:
        docs: Sequence[LCDocument] = await self.base_retriever.ainvoke(
            query, config={"callbacks": run_manager.get_child()}
        )
        if self.rerank is not None:
            docs = await self.rerank.acompress_documents(
                docs, query, callbacks=run_manager.get_child()
            )
        if self.compress is not None:
            docs = await self.compress.acompress_documents(
                docs, query, callbacks=run_manager.get_child()
            )
        return list(docs)


__all__ = ["RagattnCompressor", "RagattnRerank", "RagattnRetriever"]
