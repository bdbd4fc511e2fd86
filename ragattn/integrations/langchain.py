"""LangChain adapters: one read of the proxy ranks documents and keeps their useful sentences.

The default is the product's main flow, one read: the proxy reads all candidates with the query
once, and that one forward gives both the ranking and the sentences kept under a token budget
(:meth:`~ragattn.compress.Compressor.rerank_and_compress`).

- :class:`RagattnRetriever` (a ``BaseRetriever``) wraps any retriever: by default one read over its
  candidates, returning at most ``k`` pruned documents best first (``invoke(query, k=…)`` too).
  Its ``rerank`` / ``compress`` steps give the earlier pipelines: rerank only, compress only, or
  rerank then compress.
- :class:`RagattnCompressor` (a ``BaseDocumentCompressor``): by default the same one read, best
  first; ``order="input"`` compresses only and keeps the input order, without scores.
- :class:`RagattnRerank` (a ``BaseDocumentCompressor``) reorders documents best first and keeps
  ``top_n``; the text is unchanged.

Metadata written (units): ``relevance_score`` in [0, 1] (higher is more relevant; a fixed map of
the raw score, comparable within one call), ``ragattn_raw_score`` in the ranking method's units,
and, for pruned documents, ``ragattn_kept_spans`` = ``[{start, end, score, text}]``: character
offsets into the text the adapter received and keep scores in [0, 1]. A document whose sentences
the budget kept none of is left out of a one read (see each class).

Titles: every adapter reads a document's title from ``metadata["title"]`` (as Wikipedia, web and
many vector-store loaders set it) and sends it with the text, so the ranking and the kept
sentences use it as the library's ``Document(text=..., title=...)`` does; ``title_key="name"``
reads another key, ``title_key=lambda doc: ...`` computes it from the LangChain ``Document``, and
``title_key=None`` sends none. A missing, empty or non-string value leaves that document untitled
(never an error), so titled and untitled documents mix in one call. ``page_content`` alone is
compressed and the kept spans are offsets into it; the title is never part of the kept text.

Every engine works: in process (``Reranker`` / ``Compressor``) or the service (``Client`` /
``AsyncClient``). ``acompress_documents`` / ``ainvoke`` are native: they await the service, or
run in-process work in a worker thread. Output documents are copies of the inputs with the same
``id``, the same original metadata plus the keys above; inputs are never modified.

Use the retriever on its own::

    retriever = RagattnRetriever(base_retriever=vectorstore.as_retriever(search_kwargs={"k": 20}))
    docs = retriever.invoke("When was the Eiffel Tower completed?", k=3)

or a compressor on titled documents::

    docs = [Document(page_content="It was completed in 1889.", metadata={"title": "Eiffel Tower"})]
    RagattnCompressor(ratio=0.3).compress_documents(docs, "When was the Eiffel Tower completed?")

or a compressor inside ``ContextualCompressionRetriever`` (``langchain-classic``)::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    retriever = ContextualCompressionRetriever(
        base_compressor=RagattnCompressor(compressor=Compressor(), ratio=0.3, top_n=3),
        base_retriever=base,
    )
"""

from __future__ import annotations

import dataclasses
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
from ragattn.errors import InvalidInputError  # noqa: E402
from ragattn.integrations import (  # noqa: E402
    DEFAULT_TITLE_KEY,
    KEPT_SPANS_KEY,
    RAW_SCORE_KEY,
    Engine,
    ReadDocument,
    TitleKey,
    check_k,
    check_top_n,
    compress_args,
    kept_spans_metadata,
    read_documents,
    read_title,
)
from ragattn.integrations._common import (  # noqa: E402
    CompressingAdapter,
    EngineBudget,
    SentenceLanguage,
    Titled,
)
from ragattn.types import CompressionResult, Document, RerankResults  # noqa: E402


def _to_ragattn(documents: Sequence[LCDocument], title_key: TitleKey) -> list[Document]:
    """The documents as the engine reads them: ``page_content``, ``id`` and the title that
    ``title_key`` finds (:func:`~ragattn.integrations.read_title`)."""
    return [
        Document(text=d.page_content, id=d.id, title=read_title(d, d.metadata, title_key))
        for d in documents
    ]


def _copy(source: LCDocument, extra: dict[str, Any], text: str | None = None) -> LCDocument:
    """A copy of ``source`` with ``extra`` added to its metadata and, when given, ``text`` as its
    content; ``source`` itself is not modified."""
    update: dict[str, Any] = {"metadata": {**source.metadata, **extra}}
    if text is not None:
        update["page_content"] = text
    return source.model_copy(update=update)


def _scores(relevance_score: float, raw_score: float) -> dict[str, float]:
    """The ranking's metadata: ``relevance_score`` in [0, 1] and the raw score (method units)."""
    return {"relevance_score": relevance_score, RAW_SCORE_KEY: raw_score}


def _read_output(documents: Sequence[LCDocument], read: Sequence[ReadDocument]) -> list[LCDocument]:
    """Copies of the ranked ``documents`` with their kept text, scores and spans, best first."""
    return [
        _copy(
            documents[r.index],
            {**_scores(r.relevance_score, r.raw_score), KEPT_SPANS_KEY: r.kept_spans_metadata()},
            r.text,
        )
        for r in read
    ]


class RagattnRerank(Titled, BaseDocumentCompressor):
    """Rerank documents with a ragattn engine; best first, ``top_n`` kept, text unchanged.

    For ranked documents pruned to their useful sentences from the same read, use
    :class:`RagattnCompressor` (its default) or :class:`RagattnRetriever`.

    Args:
        reranker: a ``Reranker`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Reranker()``, loaded on the first call.
        top_n: documents to keep (default 3, LangChain's usual); None keeps all.
        title_key: where each document's title is read: the metadata key (default
            ``"title"``), a callable given the ``Document``, or None (no titles); a missing or
            non-string value leaves that document untitled.

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
        return [_copy(documents[r.index], _scores(r.relevance_score, r.raw_score)) for r in results]

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """Rerank ``documents`` for ``query``; ``[]`` for no documents."""
        if not documents:
            return []
        inputs = _to_ragattn(documents, self.title_key)
        results = self._engine.rerank(query, inputs, top_n=self.top_n)
        return self._documents(documents, results)

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """The async twin of :meth:`compress_documents`; the same result."""
        if not documents:
            return []
        inputs = _to_ragattn(documents, self.title_key)
        results = await self._engine.arerank(query, inputs, top_n=self.top_n)
        return self._documents(documents, results)


class RagattnCompressor(Titled, CompressingAdapter, BaseDocumentCompressor):
    """Rank documents and prune each to the sentences that answer the query, from one read.

    By default (``order="rank"``) the proxy reads all documents with the query once; from that
    forward come the ranking and the kept sentences. Documents come back best first (``top_n``
    kept), ``page_content`` = the kept sentences, with ``metadata["relevance_score"]`` (in
    [0, 1]), ``metadata["ragattn_raw_score"]`` (the ranking method's units) and
    ``metadata["ragattn_kept_spans"]``. ``order="input"`` is the earlier compress-only behaviour:
    input order, no scores, ``ragattn_kept_spans`` only.

    The budget covers all documents of a call together (those ``top_n`` ranked best, or all with
    ``order="input"``): they are compressed as one context, so documents the query does not need
    may keep nothing.

    Args:
        compressor, ratio, target_tokens, threshold, max_tokens, order: the engine, the one
            budget (default :data:`~ragattn.types.DEFAULT_BUDGET`, ``ratio=0.2`` with
            ``max_tokens=1024``; ``max_tokens`` caps a ratio)
            and the order, as every compressing adapter takes them
            (:class:`~ragattn.integrations._common.CompressingAdapter`).
        top_n: with ``order="rank"``, rank all documents and compress the best ``top_n``
            (default None: all).
        drop_empty: leave out documents with no kept sentence (default); False keeps them with
            empty ``page_content``.
        title_key: where each document's title is read: the metadata key (default
            ``"title"``), a callable given the ``Document``, or None (no titles); a missing or
            non-string value leaves that document untitled.
        language: the documents' language for sentence splitting: an ISO 639-1 code
            (``"de"``, ``"fr"``, ...) or ``"auto"`` (default: by each text's script).

    Raises:
        InvalidInputError: more than one budget, a wrong engine, ``top_n`` with
            ``order="input"``, or an unknown ``language``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._set_up("documents")

    def _documents(
        self, documents: Sequence[LCDocument], result: CompressionResult
    ) -> list[LCDocument]:
        return [
            _copy(
                documents[d.index], {KEPT_SPANS_KEY: kept_spans_metadata(result, d.index)}, d.text
            )
            for d in self._kept(result)
        ]

    def _read(
        self, documents: Sequence[LCDocument], pair: tuple[RerankResults, CompressionResult]
    ) -> list[LCDocument]:
        return _read_output(documents, read_documents(*pair, drop_empty=self.drop_empty))

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """Rank and prune (or, ``order="input"``, prune) ``documents``; ``[]`` for none."""
        return self._compressed(documents, query) if documents else []

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[LCDocument]:
        """The async twin of :meth:`compress_documents`; the same result."""
        return await self._acompressed(documents, query) if documents else []

    def _compressed(self, documents: Sequence[LCDocument], query: str) -> list[LCDocument]:
        inputs = _to_ragattn(documents, self.title_key)
        if self.order == "input":
            return self._documents(documents, self._engine.compress(query, inputs, self._args))
        return self._read(documents, self._engine.rerank_and_compress(query, inputs, self._args))

    async def _acompressed(self, documents: Sequence[LCDocument], query: str) -> list[LCDocument]:
        inputs = _to_ragattn(documents, self.title_key)
        if self.order == "input":
            result = await self._engine.acompress(query, inputs, self._args)
            return self._documents(documents, result)
        pair = await self._engine.arerank_and_compress(query, inputs, self._args)
        return self._read(documents, pair)


_READ_SETTINGS = tuple(EngineBudget.model_fields)
"""The one read's settings: its engine and budget (``compressor``, ``ratio``, ...)."""

_READ_OPTIONS = ("keep_best_sentence", "title_key", "language")
"""The one read's options that have a default: refused with steps when given."""


class RagattnRetriever(Titled, EngineBudget, SentenceLanguage, BaseRetriever):
    """Any retriever, then one read of the proxy: its candidates ranked and pruned, best first.

    By default the proxy reads all of the base retriever's candidates with the query once; from
    that forward come the ranking and the sentences kept under the budget, which covers the
    ``k`` best documents together. At most ``k`` documents come back, best first:
    ``page_content`` = the kept sentences, ``metadata["relevance_score"]`` in [0, 1],
    ``metadata["ragattn_raw_score"]`` (the ranking method's units) and
    ``metadata["ragattn_kept_spans"]`` (character offsets into the text received, keep scores in
    [0, 1]). ``k`` documents come back whenever the base retriever found ``k`` (LangChain's
    contract for ``k``): each of the best ``k`` keeps at least its best sentence of the read,
    beyond the budget where the budget kept none of it. ``keep_best_sentence=False`` spends the
    budget alone: a document whose sentences the budget kept none of is then left out (logged at
    INFO on ``ragattn.integrations``), so fewer than ``k`` may come back.

    The earlier pipelines are the steps ``rerank`` and ``compress`` (or :meth:`from_engines`):
    given either, the retriever runs them in turn (rerank, then compress) instead of the one
    read, and returns at most ``k`` of their documents.

    Args:
        base_retriever: the first stage; all the candidates it returns are read.
        compressor: the one read's engine: a ``Compressor`` (in process), ``Client`` or
            ``AsyncClient`` (the service); default None: the shared in-process ``Compressor()``,
            loaded on the first call.
        k: the most documents returned (default 4); ``invoke(query, k=…)`` overrides it per call.
        ratio: fraction of the ``k`` best documents' tokens to keep, in (0, 1] (no budget set:
            :data:`~ragattn.types.DEFAULT_BUDGET`, 0.2, at most 1,024 tokens); or
        target_tokens: keep at most this many tokens (the engine's tokenizer); or
        threshold: keep sentences whose keep score is at least this, in [0, 1].
        max_tokens: with ``ratio`` (or the default one), the most tokens kept whatever the ratio
            gives (default: 1,024 under the default ratio, none under a ``ratio`` given).
        keep_best_sentence: see above (default True for the one read; not for the steps).
        title_key: where the one read finds each document's title: the metadata key (default
            ``"title"``), a callable given the ``Document``, or None (no titles); a missing or
            non-string value leaves that document untitled. The steps have their own.
        language: the documents' language for the one read's sentence splitting: an ISO 639-1
            code (``"de"``, ``"fr"``, ...) or ``"auto"`` (default: by each text's script). The
            compress step has its own.
        rerank: a :class:`RagattnRerank` step, or None.
        compress: a :class:`RagattnCompressor` step (applied to the reranked documents), or
            None; ``RagattnCompressor(order="input")`` keeps the rerank order.

    Raises:
        InvalidInputError: a bad ``k``, more than one budget, a wrong engine, an unknown
            ``language``, or the one read's settings (``compressor``, a budget,
            ``keep_best_sentence``, ``title_key``, ``language``) together with steps.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    base_retriever: BaseRetriever
    k: int = 4
    keep_best_sentence: bool | None = None
    rerank: RagattnRerank | None = None
    compress: RagattnCompressor | None = None
    _engine: Engine | None = PrivateAttr(default=None)
    _args: VerbArgs | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_k(self.k)
        if self.rerank is not None or self.compress is not None:
            given = [n for n in _READ_SETTINGS if getattr(self, n) is not None]
            given += [n for n in _READ_OPTIONS if n in self.model_fields_set]
            if given:
                named = ", ".join(given)
                raise InvalidInputError(
                    f"{named} configure the one read, which the steps (rerank, compress) replace: "
                    "set them on the steps, or leave the steps out"
                )
            return
        self._args = compress_args(
            *self._budget(),
            verb="rerank_compress",
            top_n=self.k,
            language=self.language,
        )
        self._engine = Engine(self.compressor, role="reader")

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
        title_key: TitleKey = DEFAULT_TITLE_KEY,
        max_tokens: int | None = None,
        language: str = "auto",
    ) -> RagattnRetriever:
        """The step pipelines: rerank with ``reranker`` and/or compress with ``compressor``
        (in-process engines or one ``Client`` for both), compression in the order it receives
        (rerank order, or the base retriever's); ``top_n``, the budget, ``title_key`` and
        ``language`` (the compress step's) as in the adapters. With neither engine, rerank with
        the in-process default. The one read is the constructor's default:
        ``RagattnRetriever(base_retriever=…, compressor=…)``."""
        if reranker is None and compressor is None:
            rerank = RagattnRerank(top_n=top_n, title_key=title_key)
            return cls(base_retriever=base_retriever, rerank=rerank)
        return cls(
            base_retriever=base_retriever,
            rerank=None
            if reranker is None
            else RagattnRerank(reranker=reranker, top_n=top_n, title_key=title_key),
            compress=None
            if compressor is None
            else RagattnCompressor(
                compressor=compressor,
                ratio=ratio,
                target_tokens=target_tokens,
                threshold=threshold,
                max_tokens=max_tokens,
                order="input",
                title_key=title_key,
                language=language,
            ),
        )

    def _call_args(self, k: int | None) -> tuple[int, VerbArgs | None]:
        limit = self.k if k is None else check_k(k)
        if self._args is None or limit == self._args.top_n:
            return limit, self._args
        return limit, dataclasses.replace(self._args, top_n=limit)

    def _output(
        self, documents: Sequence[LCDocument], pair: tuple[RerankResults, CompressionResult]
    ) -> list[LCDocument]:
        read = read_documents(*pair, keep_best_sentence=self.keep_best_sentence is not False)
        return _read_output(documents, read)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[LCDocument]:
        """At most ``k`` (default ``self.k``) documents for ``query``, best first."""
        limit, args = self._call_args(k)
        docs: Sequence[LCDocument] = self.base_retriever.invoke(
            query, config={"callbacks": run_manager.get_child()}
        )
        if not docs:
            return []
        if self._engine is not None and args is not None:
            inputs = _to_ragattn(docs, self.title_key)
            pair = self._engine.rerank_and_compress(query, inputs, args)
            return self._output(docs, pair)
        if self.rerank is not None:
            docs = self.rerank.compress_documents(docs, query, callbacks=run_manager.get_child())
        if self.compress is not None:
            docs = self.compress.compress_documents(docs, query, callbacks=run_manager.get_child())
        return list(docs)[:limit]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[LCDocument]:
        """The async twin of :meth:`_get_relevant_documents`; the same result."""
        limit, args = self._call_args(k)
        docs: Sequence[LCDocument] = await self.base_retriever.ainvoke(
            query, config={"callbacks": run_manager.get_child()}
        )
        if not docs:
            return []
        if self._engine is not None and args is not None:
            inputs = _to_ragattn(docs, self.title_key)
            pair = await self._engine.arerank_and_compress(query, inputs, args)
            return self._output(docs, pair)
        if self.rerank is not None:
            docs = await self.rerank.acompress_documents(
                docs, query, callbacks=run_manager.get_child()
            )
        if self.compress is not None:
            docs = await self.compress.acompress_documents(
                docs, query, callbacks=run_manager.get_child()
            )
        return list(docs)[:limit]


__all__ = ["RagattnCompressor", "RagattnRerank", "RagattnRetriever"]
