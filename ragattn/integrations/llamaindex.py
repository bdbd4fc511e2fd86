"""LlamaIndex adapters: one read of the proxy ranks nodes and keeps their useful sentences.

- :class:`RagattnCompressPostprocessor`: by default the product's main flow, one read: the proxy
  reads all nodes with the query once, and that one forward gives both the ranking and the
  sentences kept under a token budget (:meth:`~ragattn.compress.Compressor.rerank_and_compress`).
  Nodes come back best first (``top_n`` kept), each a copy with the same ``node_id``, metadata,
  relationships and ``start_char_idx`` whose ``text`` is the kept sentences, with
  ``NodeWithScore.score`` = ``relevance_score`` in [0, 1], ``metadata["ragattn_raw_score"]`` (the
  ranking method's units) and ``metadata["ragattn_kept_spans"]`` = ``[{start, end, score, text}]``
  (character offsets into the node's original text, keep scores in [0, 1]; add
  ``start_char_idx`` for offsets into the source document). ``order="input"`` is the earlier
  compress-only behaviour: input order, incoming scores kept, ``ragattn_kept_spans`` only. The
  ragattn keys are excluded from the LLM and embedding views of the node. Unlike
  concatenate-and-split compressors, node identity is never lost; input nodes are not modified.
- :class:`RagattnRerankPostprocessor` returns the input nodes themselves (same objects, same
  ``node_id``, text unchanged), best first, ``top_n`` kept, with ``NodeWithScore.score`` set to
  the ``relevance_score`` in [0, 1].

Titles: both postprocessors read a node's title from ``node.metadata["title"]`` and send it with
the node's text (its content without metadata), so the ranking and the kept sentences use it as
the library's ``Document(text=..., title=...)`` does; ``title_key="name"`` reads another key,
``title_key=lambda node: ...`` computes it from the node, and ``title_key=None`` sends none. A
missing, empty or non-string value leaves that node untitled (never an error), so titled and
untitled nodes mix in one call. The title is never part of the kept text or its spans.

Every engine works: in process (``Reranker`` / ``Compressor``) or the service (``Client`` /
``AsyncClient``). ``apostprocess_nodes`` is native: it awaits the service, or runs in-process
work in a worker thread.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ragattn._optional import require

require("llama_index.core", extra="llamaindex")

from llama_index.core.callbacks import CBEventType, EventPayload  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import (  # noqa: E402
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    TextNode,
)
from pydantic import PrivateAttr  # noqa: E402

from ragattn.errors import InvalidInputError  # noqa: E402
from ragattn.integrations import (  # noqa: E402
    KEPT_SPANS_KEY,
    RAW_SCORE_KEY,
    Engine,
    TitleKey,
    check_top_n,
    kept_spans_metadata,
    read_documents,
    read_title,
)
from ragattn.integrations._common import CompressingAdapter, Titled  # noqa: E402
from ragattn.types import CompressionResult, Document, RerankResults  # noqa: E402


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise InvalidInputError("a query is required: pass query_str or query_bundle")
    return query_bundle.query_str


def _payload(
    engine: Engine, nodes: list[NodeWithScore], query: str, top_n: int | None
) -> dict[Any, Any]:
    """The payload of a ``RERANKING`` callback event."""
    return {
        EventPayload.NODES: nodes,
        EventPayload.MODEL_NAME: type(engine.engine).__name__,
        EventPayload.QUERY_STR: query,
        EventPayload.TOP_K: top_n,
    }


def _to_ragattn(nodes: list[NodeWithScore], title_key: TitleKey) -> list[Document]:
    """The nodes as the engine reads them: the content without metadata, ``node_id`` and the
    title that ``title_key`` finds (:func:`~ragattn.integrations.read_title`)."""
    return [
        Document(
            text=n.node.get_content(metadata_mode=MetadataMode.NONE),
            id=n.node.node_id,
            title=read_title(n.node, n.node.metadata, title_key),
        )
        for n in nodes
    ]


def _ended(event: Any, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    """``nodes``, once reported as the end of the ``RERANKING`` callback ``event``."""
    event.on_end(payload={EventPayload.NODES: nodes})
    return nodes


class _Postprocessor(Titled, BaseNodePostprocessor):
    """What both postprocessors share: the query check, no work for no nodes, the title option
    (:class:`~ragattn.integrations._common.Titled`) and the ``RERANKING`` callback event; each
    subclass reads the nodes in :meth:`_read_nodes` (and its async twin)."""

    top_n: int | None = None
    _engine: Engine = PrivateAttr()

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        return self._read_nodes(nodes, query) if nodes else []

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        return await self._aread_nodes(nodes, query) if nodes else []

    def _read_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        raise NotImplementedError

    async def _aread_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        raise NotImplementedError

    def _reranking(self, nodes: list[NodeWithScore], query: str) -> AbstractContextManager[Any]:
        """The ``RERANKING`` event around a ranking of ``nodes``; end it with :func:`_ended`."""
        payload = _payload(self._engine, nodes, query, self.top_n)
        return self.callback_manager.event(CBEventType.RERANKING, payload=payload)


class RagattnRerankPostprocessor(_Postprocessor):
    """Rerank nodes with a ragattn engine; best first, ``top_n`` kept.

    Args:
        reranker: a ``Reranker`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Reranker()``, loaded on the first call.
        top_n: nodes to keep (default 3); None keeps all.
        title_key: where each node's title is read: the metadata key (default ``"title"``), a
            callable given the node, or None (no titles); a missing or non-string value leaves
            that node untitled.

    Raises:
        InvalidInputError: a wrong engine or ``top_n``; at call time, no query.
    """

    reranker: Any = None
    top_n: int | None = 3

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_top_n(self.top_n)
        self._engine = Engine(self.reranker, role="reranker")

    @classmethod
    def class_name(cls) -> str:
        return "RagattnRerankPostprocessor"

    @staticmethod
    def _nodes(nodes: list[NodeWithScore], results: RerankResults) -> list[NodeWithScore]:
        return [NodeWithScore(node=nodes[r.index].node, score=r.relevance_score) for r in results]

    def _read_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        with self._reranking(nodes, query) as event:
            inputs = _to_ragattn(nodes, self.title_key)
            results = self._engine.rerank(query, inputs, top_n=self.top_n)
            return _ended(event, self._nodes(nodes, results))

    async def _aread_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        with self._reranking(nodes, query) as event:
            inputs = _to_ragattn(nodes, self.title_key)
            results = await self._engine.arerank(query, inputs, top_n=self.top_n)
            return _ended(event, self._nodes(nodes, results))


class RagattnCompressPostprocessor(CompressingAdapter, _Postprocessor):
    """Rank nodes and prune each to the sentences that answer the query, from one read.

    By default (``order="rank"``) the proxy reads all nodes with the query once; from that
    forward come the ranking and the kept sentences. Nodes come back best first (``top_n`` kept)
    with ``score`` = ``relevance_score`` in [0, 1], ``text`` = the kept sentences,
    ``metadata["ragattn_raw_score"]`` (the ranking method's units) and
    ``metadata["ragattn_kept_spans"]``; a ``RERANKING`` callback event is emitted.
    ``order="input"`` is the earlier compress-only behaviour: input order, incoming scores kept,
    ``ragattn_kept_spans`` only.

    The budget covers all nodes of a call together (those ``top_n`` ranked best, or all with
    ``order="input"``): they are compressed as one context, so nodes the query does not need may
    keep nothing.

    Args:
        compressor, ratio, target_tokens, threshold, max_tokens, order: the engine (None: the
            shared in-process ``Compressor()``), the one budget (none given:
            :data:`~ragattn.types.DEFAULT_BUDGET`, ``ratio=0.2`` with ``max_tokens=1024``;
            ``max_tokens`` caps a ratio) and the
            order (``"rank"`` by default), as in
            :class:`~ragattn.integrations._common.CompressingAdapter`.
        top_n: with ``order="rank"``, rank all nodes and compress the best ``top_n`` (default
            None: all).
        drop_empty: leave out nodes with no kept sentence (default); False keeps them with empty
            text.
        title_key: where each node's title is read: the metadata key (default ``"title"``), a
            callable given the node, or None (no titles); a missing or non-string value leaves
            that node untitled.
        language: the nodes' language for sentence splitting: an ISO 639-1 code (``"de"``,
            ``"fr"``, ...) or ``"auto"`` (default: by each text's script).

    Raises:
        InvalidInputError: more than one budget, a wrong engine, ``top_n`` with
            ``order="input"``, an unknown ``language``; at call time, no query or a node that is
            not a ``TextNode``.
    """

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._set_up("nodes")

    @classmethod
    def class_name(cls) -> str:
        return "RagattnCompressPostprocessor"

    def _inputs(self, nodes: list[NodeWithScore]) -> list[Document]:
        """The nodes' texts and titles as documents; only a ``TextNode``'s text can be
        compressed."""
        for i, n in enumerate(nodes):
            if not isinstance(n.node, TextNode):
                raise InvalidInputError(
                    f"nodes[{i}] is a {type(n.node).__name__}; only TextNode text can be compressed"
                )
        return _to_ragattn(nodes, self.title_key)

    @staticmethod
    def _copy(node: Any, text: str, extra: dict[str, Any]) -> Any:
        """A copy of ``node`` with ``text`` and the ragattn ``extra`` metadata, which is kept out
        of the node's LLM and embedding views."""
        hidden = [k for k in extra if k not in node.excluded_llm_metadata_keys]
        hidden_embed = [k for k in extra if k not in node.excluded_embed_metadata_keys]
        return node.model_copy(
            update={
                "text": text,
                "metadata": {**node.metadata, **extra},
                "excluded_llm_metadata_keys": [*node.excluded_llm_metadata_keys, *hidden],
                "excluded_embed_metadata_keys": [*node.excluded_embed_metadata_keys, *hidden_embed],
            }
        )

    def _nodes(self, nodes: list[NodeWithScore], result: CompressionResult) -> list[NodeWithScore]:
        out = []
        for d in self._kept(result):
            spans = {KEPT_SPANS_KEY: kept_spans_metadata(result, d.index)}
            copy = self._copy(nodes[d.index].node, d.text, spans)
            out.append(NodeWithScore(node=copy, score=nodes[d.index].score))
        return out

    def _read(
        self, nodes: list[NodeWithScore], pair: tuple[RerankResults, CompressionResult]
    ) -> list[NodeWithScore]:
        out = []
        for r in read_documents(*pair, drop_empty=self.drop_empty):
            extra = {RAW_SCORE_KEY: r.raw_score, KEPT_SPANS_KEY: r.kept_spans_metadata()}
            copy = self._copy(nodes[r.index].node, r.text, extra)
            out.append(NodeWithScore(node=copy, score=r.relevance_score))
        return out

    def _read_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        inputs = self._inputs(nodes)
        if self.order == "input":
            return self._nodes(nodes, self._engine.compress(query, inputs, self._args))
        with self._reranking(nodes, query) as event:
            pair = self._engine.rerank_and_compress(query, inputs, self._args)
            return _ended(event, self._read(nodes, pair))

    async def _aread_nodes(self, nodes: list[NodeWithScore], query: str) -> list[NodeWithScore]:
        inputs = self._inputs(nodes)
        if self.order == "input":
            return self._nodes(nodes, await self._engine.acompress(query, inputs, self._args))
        with self._reranking(nodes, query) as event:
            pair = await self._engine.arerank_and_compress(query, inputs, self._args)
            return _ended(event, self._read(nodes, pair))


__all__ = ["RagattnCompressPostprocessor", "RagattnRerankPostprocessor"]
