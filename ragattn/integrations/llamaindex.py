"""LlamaIndex adapters: attention reranking and sentence compression as node postprocessors.

- :class:`RagattnRerankPostprocessor` returns the input nodes themselves (same objects, same
  ``node_id``), best first, ``top_n`` kept, with ``NodeWithScore.score`` set to the
  ``relevance_score`` in [0, 1].
- :class:`RagattnCompressPostprocessor` returns, per node, a copy with the same ``node_id``,
  metadata, relationships and ``start_char_idx`` whose ``text`` is the kept sentences, and
  ``metadata["ragattn_kept_spans"]`` = ``[{start, end, score, text}]`` (character offsets into the
  node's original text; add ``start_char_idx`` for offsets into the source document). That key is
  excluded from the LLM and embedding views of the node. Incoming scores are kept. Unlike
  concatenate-and-split compressors, node identity is never lost; input nodes are not modified.

Every engine works: in process (``Reranker`` / ``Compressor``) or the service (``Client`` /
``AsyncClient``). ``apostprocess_nodes`` is native: it awaits the service, or runs in-process
work in a worker thread.
"""

from __future__ import annotations

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

from ragattn.contract import VerbArgs  # noqa: E402
from ragattn.errors import InvalidInputError  # noqa: E402
from ragattn.integrations import (  # noqa: E402
    KEPT_SPANS_KEY,
    Engine,
    check_top_n,
    compress_args,
    kept_spans_metadata,
)
from ragattn.types import CompressionResult, Document, RerankResults  # noqa: E402


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise InvalidInputError("a query is required: pass query_str or query_bundle")
    return query_bundle.query_str


def _to_ragattn(nodes: list[NodeWithScore]) -> list[Document]:
    return [
        Document(text=n.node.get_content(metadata_mode=MetadataMode.NONE), id=n.node.node_id)
        for n in nodes
    ]


class RagattnRerankPostprocessor(BaseNodePostprocessor):
    """Rerank nodes with a ragattn engine; best first, ``top_n`` kept.

    Args:
        reranker: a ``Reranker`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Reranker()``, loaded on the first call.
        top_n: nodes to keep (default 3); None keeps all.

    Raises:
        InvalidInputError: a wrong engine or ``top_n``; at call time, no query.
    """

    reranker: Any = None
    top_n: int | None = 3
    _engine: Engine = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_top_n(self.top_n)
        self._engine = Engine(self.reranker, role="reranker")

    @classmethod
    def class_name(cls) -> str:
        return "RagattnRerankPostprocessor"

    def _payload(self, nodes: list[NodeWithScore], query: str) -> dict[Any, Any]:
        return {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: type(self._engine.engine).__name__,
            EventPayload.QUERY_STR: query,
            EventPayload.TOP_K: self.top_n,
        }

    @staticmethod
    def _nodes(nodes: list[NodeWithScore], results: RerankResults) -> list[NodeWithScore]:
        return [NodeWithScore(node=nodes[r.index].node, score=r.relevance_score) for r in results]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query)
        ) as event:
            results = self._engine.rerank(query, _to_ragattn(nodes), top_n=self.top_n)
            out = self._nodes(nodes, results)
            event.on_end(payload={EventPayload.NODES: out})
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query)
        ) as event:
            results = await self._engine.arerank(query, _to_ragattn(nodes), top_n=self.top_n)
            out = self._nodes(nodes, results)
            event.on_end(payload={EventPayload.NODES: out})
        return out


class RagattnCompressPostprocessor(BaseNodePostprocessor):
    """Prune each node to the sentences that answer the query, under one budget.

    The budget covers all nodes of a call together (they are compressed as one context).

    Args:
        compressor: a ``Compressor`` (in process), ``Client`` or ``AsyncClient`` (the service);
            default None: the shared in-process ``Compressor()``, loaded on the first call.
        ratio: fraction of tokens to keep, in (0, 1] (default 0.5 when no budget is set); or
        target_tokens: keep at most this many tokens (the engine's tokenizer); or
        threshold: keep sentences whose keep score is at least this, in [0, 1].
        drop_empty: leave out nodes with no kept sentence (default); False keeps them with empty
            text. Order is always the input order.

    Raises:
        InvalidInputError: more than one budget, a wrong engine; at call time, no query or a
            node that is not a ``TextNode``.
    """

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

    @classmethod
    def class_name(cls) -> str:
        return "RagattnCompressPostprocessor"

    @staticmethod
    def _check(nodes: list[NodeWithScore]) -> None:
        for i, n in enumerate(nodes):
            if not isinstance(n.node, TextNode):
                raise InvalidInputError(
                    f"nodes[{i}] is a {type(n.node).__name__}; only TextNode text can be compressed"
                )

    def _nodes(self, nodes: list[NodeWithScore], result: CompressionResult) -> list[NodeWithScore]:
        out = []
        for d in result.documents:
            if self.drop_empty and not d.text:
                continue
            node = nodes[d.index].node
            copy = node.model_copy(
                update={
                    "text": d.text,
                    "metadata": {
                        **node.metadata,
                        KEPT_SPANS_KEY: kept_spans_metadata(result, d.index),
                    },
                    "excluded_llm_metadata_keys": [
                        *node.excluded_llm_metadata_keys,
                        KEPT_SPANS_KEY,
                    ],
                    "excluded_embed_metadata_keys": [
                        *node.excluded_embed_metadata_keys,
                        KEPT_SPANS_KEY,
                    ],
                }
            )
            out.append(NodeWithScore(node=copy, score=nodes[d.index].score))
        return out

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        self._check(nodes)
        return self._nodes(nodes, self._engine.compress(query, _to_ragattn(nodes), self._args))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        self._check(nodes)
        result = await self._engine.acompress(query, _to_ragattn(nodes), self._args)
        return self._nodes(nodes, result)


__all__ = ["RagattnCompressPostprocessor", "RagattnRerankPostprocessor"]
