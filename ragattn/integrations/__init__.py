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
import warnings
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

from ragattn.client import AsyncClient, Client
from ragattn.contract import AsyncCompressEngine, CompressEngine, RerankEngine, VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.types import Budget, CompressionResult, Document, RerankResults, check_top_n

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

    def __init__(
        self,
        engine: RerankEngine | CompressEngine | AsyncCompressEngine | None,
        *,
        role: str,
    ) -> None:
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
        self, query: str, documents: Sequence[Document], args: VerbArgs | Mapping[str, Any]
    ) -> CompressionResult:
        """Compress with ``args`` (checked once, by the adapter; a budget mapping is checked
        here)."""
        kw = _compress_keywords(args)
        return _logged(self._sync().compress(query, documents, **kw))

    async def acompress(
        self, query: str, documents: Sequence[Document], args: VerbArgs | Mapping[str, Any]
    ) -> CompressionResult:
        kw = _compress_keywords(args)
        if isinstance(self.engine, AsyncClient):
            return _logged(await self.engine.compress(query, documents, **kw))
        if isinstance(self.engine, Client):
            async with AsyncClient.from_config(self.engine.config) as client:
                return _logged(await client.compress(query, documents, **kw))
        return _logged(await asyncio.to_thread(self._call, "compress", query, documents, **kw))


def _compress_keywords(args: VerbArgs | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(args, VerbArgs):
        args = VerbArgs.check("compress", args)
    return args.keywords()


_R = TypeVar("_R", RerankResults, CompressionResult)


@cache
def default_reranker() -> RerankEngine:
    """The process-wide in-process :class:`~ragattn.Reranker` with the packaged proxy and the
    default method, built on first use."""
    from ragattn.rerank import Reranker

    return Reranker()


@cache
def default_compressor() -> CompressEngine:
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
_DEFAULT_ADAPTER_BUDGET = Budget(kind="ratio", value=DEFAULT_ADAPTER_RATIO)


def compress_args(
    ratio: float | None, target_tokens: int | None, threshold: float | None
) -> VerbArgs:
    """The compress call of an adapter, checked once when the adapter is built: its one budget,
    or ``ratio=DEFAULT_ADAPTER_RATIO`` when it was given none.

    Raises:
        InvalidInputError: more than one budget, or a value out of range.
    """
    given = {"ratio": ratio, "target_tokens": target_tokens, "threshold": threshold}
    return VerbArgs.check("compress", given, default_budget=_DEFAULT_ADAPTER_BUDGET)


def one_budget(
    ratio: float | None, target_tokens: int | None, threshold: float | None
) -> dict[str, float | int]:
    """Deprecated: use :func:`compress_args` (its ``budget`` is the one
    :class:`~ragattn.types.Budget`). The adapter's budget as keyword arguments of ``compress``."""
    warnings.warn(
        "ragattn.integrations.one_budget is deprecated; use compress_args(...).budget",
        DeprecationWarning,
        stacklevel=2,
    )
    return compress_args(ratio, target_tokens, threshold).compress_budget.keywords()


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
    "compress_args",
    "kept_spans_metadata",
    "one_budget",
]
