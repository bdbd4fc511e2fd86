"""Framework adapters: ``ragattn.integrations.langchain`` and ``ragattn.integrations.llamaindex``.

Nothing here imports a framework; each submodule imports its own on first use and needs its
extra (``pip install 'ragattn[langchain]'`` / ``'ragattn[llamaindex]'``). What they share lives
here: :class:`Engine`, which gives every adapter sync and native async calls on any engine, and
the budget check of the compression adapters.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from ragattn import validation
from ragattn.client import AsyncClient, Client
from ragattn.errors import InvalidInputError
from ragattn.types import CompressionResult, Document, RerankResults
from ragattn.validation import check_top_n

logger = logging.getLogger(__name__)

KEPT_SPANS_KEY = "ragattn_kept_spans"
"""Metadata key of the kept sentences: ``[{start, end, score, text}]``, character offsets into the
text the adapter received (before compression) and keep scores in [0, 1]."""

RAW_SCORE_KEY = "ragattn_raw_score"
"""Metadata key of the rerank method's raw score (method units); relevance_score is in [0, 1]."""


class Engine:
    """Sync and async rerank/compress on one engine, whichever kind it is.

    - In process (:class:`~ragattn.Reranker`, :class:`~ragattn.compress.Compressor`, or anything
      with the same sync ``rerank`` / ``compress``): async calls run the sync one in a worker
      thread, so the event loop never runs model work.
    - :class:`~ragattn.client.Client`: async calls use an :class:`AsyncClient` with the same
      config, opened per call (an httpx connection pool belongs to one event loop).
    - :class:`~ragattn.client.AsyncClient`: awaited as is; sync calls use one :class:`Client` with
      the same config, built on first use.
    - ``None``: the in-process default (:func:`default_reranker` / :func:`default_compressor`),
      created on the first call and shared by every adapter of the process, as LangChain users
      expect of ``CohereRerank()`` or ``FlashrankRerank()``.

    Twins are built from the config only: a custom httpx ``transport`` is not carried over.
    Result warnings (truncations, window splits) are logged here, since framework documents have
    no place for them.

    Args:
        engine: the engine, or None for the in-process default.
        role: ``"reranker"`` or ``"compressor"``, for the error message of a wrong engine.

    Raises:
        InvalidInputError: ``engine`` has no ``rerank`` / ``compress`` method for ``role``.
    """

    def __init__(self, engine: Any, *, role: str) -> None:
        method = {"reranker": "rerank", "compressor": "compress"}[role]
        if engine is not None and not callable(getattr(engine, method, None)):
            raise InvalidInputError(
                f"{role} must be a ragattn {'Reranker' if method == 'rerank' else 'Compressor'}, "
                f"Client or AsyncClient (anything with .{method}()), or None for the in-process "
                f"default, got {type(engine).__name__}"
            )
        self._given = engine
        self._role = role
        self._sync_twin: Client | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> Any:
        """The engine given, or the shared in-process default (loaded on first access)."""
        if self._given is not None:
            return self._given
        return default_reranker() if self._role == "reranker" else default_compressor()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        # In a worker thread: the in-process default loads there, never on the event loop.
        return getattr(self.engine, method)(*args, **kwargs)

    def _sync(self) -> Any:
        if not isinstance(self.engine, AsyncClient):
            return self.engine
        with self._lock:
            if self._sync_twin is None:
                self._sync_twin = Client.from_config(self.engine.config)
            return self._sync_twin

    def rerank(
        self, query: str, documents: Sequence[Document], *, top_n: int | None
    ) -> RerankResults:
        return self._sync().rerank(query, documents, top_n=top_n)  # type: ignore[no-any-return]

    async def arerank(
        self, query: str, documents: Sequence[Document], *, top_n: int | None
    ) -> RerankResults:
        if isinstance(self.engine, AsyncClient):
            return _logged(await self.engine.rerank(query, documents, top_n=top_n))
        if isinstance(self.engine, Client):
            async with AsyncClient.from_config(self.engine.config) as client:
                return _logged(await client.rerank(query, documents, top_n=top_n))
        return _logged(await asyncio.to_thread(self._call, "rerank", query, documents, top_n=top_n))

    def compress(
        self, query: str, documents: Sequence[Document], budget: dict[str, Any]
    ) -> CompressionResult:
        return _logged(self._sync().compress(query, documents, **budget))

    async def acompress(
        self, query: str, documents: Sequence[Document], budget: dict[str, Any]
    ) -> CompressionResult:
        if isinstance(self.engine, AsyncClient):
            return _logged(await self.engine.compress(query, documents, **budget))
        if isinstance(self.engine, Client):
            async with AsyncClient.from_config(self.engine.config) as client:
                return _logged(await client.compress(query, documents, **budget))
        return _logged(await asyncio.to_thread(self._call, "compress", query, documents, **budget))


_R = TypeVar("_R", RerankResults, CompressionResult)


@cache
def default_reranker() -> Any:
    """The process-wide in-process :class:`~ragattn.Reranker` with the packaged proxy and the
    default method, built on first use."""
    from ragattn.rerank import Reranker

    return Reranker()


@cache
def default_compressor() -> Any:
    """The process-wide in-process :class:`~ragattn.compress.Compressor` with the packaged proxy and
    the default method, built on first use."""
    from ragattn.compress import Compressor

    return Compressor()


def _logged(result: _R) -> _R:
    for warning in result.warnings:
        logger.warning("ragattn: %s", warning)
    return result


DEFAULT_ADAPTER_RATIO = 0.5
"""The budget of a compression adapter given none: keep half of the tokens (LLMLingua's default
``rate``)."""


def one_budget(
    ratio: float | None, target_tokens: int | None, threshold: float | None
) -> dict[str, float | int]:
    """The one budget an adapter was given, as keyword arguments of ``compress``, checked by
    :func:`ragattn.validation.one_budget`; with none, ``ratio=DEFAULT_ADAPTER_RATIO``.

    Raises:
        InvalidInputError: more than one budget, or a value out of range.
    """
    if ratio is None and target_tokens is None and threshold is None:
        return {"ratio": DEFAULT_ADAPTER_RATIO}
    kind, value = validation.one_budget(ratio, target_tokens, threshold)
    return {kind: int(value) if kind == "target_tokens" else value}


def kept_spans_metadata(result: CompressionResult, index: int) -> list[dict[str, Any]]:
    """The kept sentences of ``documents[index]`` as plain dicts for a framework's metadata."""
    return [
        {"start": s.start, "end": s.end, "score": s.score, "text": s.text}
        for s in result.documents[index].kept_spans
    ]


__all__ = [
    "DEFAULT_ADAPTER_RATIO",
    "KEPT_SPANS_KEY",
    "RAW_SCORE_KEY",
    "Engine",
    "default_compressor",
    "default_reranker",
    "check_top_n",
    "kept_spans_metadata",
    "one_budget",
]
