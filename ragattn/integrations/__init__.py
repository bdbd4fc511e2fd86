"""Framework adapters: ``ragattn.integrations.langchain`` and ``ragattn.integrations.llamaindex``.

Their default is the product's main flow, one read: the proxy reads all candidates with the query
once, and from that one forward come both the document ranking and the sentences kept under a
token budget (:meth:`~ragattn.compress.Compressor.rerank_and_compress`). Rerank-only,
compress-only (input order) and rerank-then-compress stay available as options of each adapter.

Nothing here imports a framework; each submodule imports its own on first use and needs its
extra (``pip install 'ragattn[langchain]'`` / ``'ragattn[llamaindex]'``). What they share lives
here: :class:`Engine`, which gives every adapter sync and native async calls on any engine, the
budget check of the compression adapters (:func:`compress_args`), the per-document view of a
one-read result (:func:`read_documents`), and the title every adapter reads from a framework
document's metadata (:func:`read_title`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar

from ragattn.client import AsyncClient, Client
from ragattn.contract import (
    AsyncCompressEngine,
    CompressEngine,
    CompressVerbs,
    RerankEngine,
    RerankVerbs,
    Verb,
    VerbArgs,
)
from ragattn.errors import InvalidInputError
from ragattn.languages import AUTO
from ragattn.types import (
    CompressedDocument,
    CompressionResult,
    Document,
    KeptSpan,
    RerankResults,
    check_top_n,
)
from ragattn.validation import check_query

logger = logging.getLogger(__name__)

KEPT_SPANS_KEY = "ragattn_kept_spans"
"""Metadata key of the kept sentences: ``[{start, end, score, text}]``, character offsets into the
text the adapter received (before compression) and keep scores in [0, 1]."""

RAW_SCORE_KEY = "ragattn_raw_score"
"""Metadata key of the rerank method's raw score (method units); relevance_score is in [0, 1]."""

TitleKey = str | Callable[[Any], object] | None
"""Where an adapter finds a document's title: a metadata key, a callable given the framework's
own document (a LangChain ``Document``, a LlamaIndex node) that returns the title, or None (no
titles)."""

DEFAULT_TITLE_KEY = "title"
"""The metadata key the adapters read a title from by default, as Wikipedia, web and many
vector-store loaders set it."""

_ROLES: dict[str, tuple[str, type, str]] = {
    # role: (argument name, the contract's verbs the engine must have, in-process class)
    "reranker": ("reranker", RerankVerbs, "Reranker"),
    "compressor": ("compressor", CompressVerbs, "Compressor"),
    "reader": ("compressor", CompressVerbs, "Compressor"),
}


class Engine:
    """Sync and async rerank/compress on one engine, whichever kind it is.

    - In process (:class:`~ragattn.Reranker`, :class:`~ragattn.compress.Compressor`, or any
      other :class:`~ragattn.contract.RerankVerbs` / :class:`~ragattn.contract.CompressVerbs`):
      async calls run the sync one in a worker thread, so the event loop never runs model work.
    - :class:`~ragattn.client.Client`: async calls use an :class:`AsyncClient` with the same
      config, opened per call (an httpx connection pool belongs to one event loop).
    - :class:`~ragattn.client.AsyncClient`: awaited as is; sync calls use one :class:`Client` with
      the same config, built on first use.
    - ``None``: the in-process default (:func:`default_reranker` for ``"reranker"``,
      :func:`default_compressor` for ``"compressor"`` and ``"reader"``), created on the first
      call and shared by every adapter of the process, as LangChain users expect of
      ``CohereRerank()`` or ``FlashrankRerank()``.

    Twins are built from the config only: a custom httpx ``transport`` is not carried over.
    Result warnings (truncations, window splits) are logged here, since framework documents have
    no place for them. Every call goes to the engine's checked entry (the adapter converted the
    documents and checked the arguments once; the query is checked here, once per call).

    Args:
        engine: the engine, or None for the in-process default.
        role: what the adapter calls: ``"reranker"`` (``rerank``), ``"compressor"``
            (``compress``) or ``"reader"`` (``rerank_and_compress``, the one read).

    Raises:
        InvalidInputError: ``engine`` is not an engine of ``role``.
    """

    def __init__(
        self,
        engine: RerankEngine | CompressEngine | AsyncCompressEngine | None,
        *,
        role: str,
    ) -> None:
        argument, verbs, local = _ROLES[role]
        if engine is not None and not isinstance(engine, verbs):
            raise InvalidInputError(
                f"{argument} must be a ragattn {local}, Client or AsyncClient (any "
                f"ragattn.contract.{verbs.__name__}), or None for the in-process default, got "
                f"{type(engine).__name__}"
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

    def _call(self, entry: str, *args: Any) -> Any:
        # In a worker thread: the in-process default loads there, never on the event loop.
        return getattr(self.engine, entry)(*args)

    def _sync(self) -> Any:
        if not isinstance(self.engine, AsyncClient):
            return self.engine
        with self._lock:
            if self._sync_twin is None:
                self._sync_twin = Client.from_config(self.engine.config)
            return self._sync_twin

    async def _acall(
        self, entry: str, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> Any:
        """The checked entry ``entry`` awaited: on an :class:`AsyncClient` as is, on a
        :class:`Client` through an async twin opened for the call, in process on a worker
        thread."""
        if isinstance(self.engine, AsyncClient):
            return await getattr(self.engine, entry)(query, documents, args)
        if isinstance(self.engine, Client):
            async with AsyncClient.from_config(self.engine.config) as client:
                return await getattr(client, entry)(query, documents, args)
        return await asyncio.to_thread(self._call, entry, query, documents, args)

    def rerank(
        self, query: str, documents: Sequence[Document], *, top_n: int | None
    ) -> RerankResults:
        args = VerbArgs(verb="rerank", top_n=top_n)
        return _logged(self._sync().rerank_checked(check_query(query), documents, args))

    async def arerank(
        self, query: str, documents: Sequence[Document], *, top_n: int | None
    ) -> RerankResults:
        args = VerbArgs(verb="rerank", top_n=top_n)
        return _logged(await self._acall("rerank_checked", check_query(query), documents, args))

    def compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs | Mapping[str, Any]
    ) -> CompressionResult:
        """Compress with ``args`` (checked once, by the adapter; a budget mapping is checked
        here)."""
        checked = _compress_args(args)
        return _logged(self._sync().compress_checked(check_query(query), documents, checked))

    async def acompress(
        self, query: str, documents: Sequence[Document], args: VerbArgs | Mapping[str, Any]
    ) -> CompressionResult:
        checked = _compress_args(args)
        query = check_query(query)
        return _logged(await self._acall("compress_checked", query, documents, checked))

    def rerank_and_compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[RerankResults, CompressionResult]:
        """The one read: ranking and kept sentences from one forward (``args`` of the
        ``rerank_compress`` verb, checked by the adapter)."""
        pair = self._sync().rerank_and_compress_checked(check_query(query), documents, args)
        return _logged_pair(pair)

    async def arerank_and_compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[RerankResults, CompressionResult]:
        """The async twin of :meth:`rerank_and_compress`; the same result."""
        entry, query = "rerank_and_compress_checked", check_query(query)
        return _logged_pair(await self._acall(entry, query, documents, args))


def _compress_args(args: VerbArgs | Mapping[str, Any]) -> VerbArgs:
    return args if isinstance(args, VerbArgs) else VerbArgs.check("compress", args)


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


def _logged_pair(
    pair: tuple[RerankResults, CompressionResult],
) -> tuple[RerankResults, CompressionResult]:
    # One read reports a chunked context in both halves: log each warning once.
    results, compression = pair
    for warning in dict.fromkeys((*results.warnings, *compression.warnings)):
        logger.warning("ragattn: %s", warning)
    return results, compression


def compress_args(
    ratio: float | None,
    target_tokens: int | None,
    threshold: float | None,
    max_tokens: int | None = None,
    *,
    verb: Verb = "compress",
    top_n: int | None = None,
    language: str = AUTO,
) -> VerbArgs:
    """The compress (or one-read, ``verb="rerank_compress"``) call of an adapter, checked once
    when the adapter is built: its one budget, or every door's
    :data:`~ragattn.types.DEFAULT_BUDGET` (a ratio of 0.2, at most 1,024 tokens; a ``max_tokens``
    given alone replaces the ceiling) when it was given none, and ``top_n`` (one read only; None
    keeps all). ``max_tokens`` with ``ratio`` caps it; a ``ratio`` given without it has no
    ceiling. ``language`` is the documents' language for sentence
    splitting (an ISO 639-1 code of :data:`~ragattn.sentences.LANGUAGES`, or ``"auto"``: by each
    text's script).

    Raises:
        InvalidInputError: more than one budget, a value out of range, a ``max_tokens`` with
            ``target_tokens`` or ``threshold``, a bad ``top_n``, or a ``top_n`` for ``compress``
            (which keeps every document), an unknown ``language``.
    """
    given = {
        "ratio": ratio,
        "target_tokens": target_tokens,
        "threshold": threshold,
        "max_tokens": max_tokens,
        "top_n": top_n,
    }
    return VerbArgs.check(verb, {**given, "language": language})


Order = Literal["rank", "input"]
"""How a compressing adapter returns what it kept: ``rank`` (the one read, best first) or
``input`` (compress only, input order)."""


def compressor_setup(
    compressor: Any,
    order: Order,
    top_n: int | None,
    budget: tuple[float | None, int | None, float | None, int | None],
    *,
    unit: str,
    language: str = AUTO,
) -> tuple[VerbArgs, Engine]:
    """The checked call and the engine of a compressing adapter (the LangChain compressor, the
    LlamaIndex postprocessor): the one read for ``order="rank"``, a compress call otherwise;
    ``budget`` is ``(ratio, target_tokens, threshold, max_tokens)`` as the adapter was given
    them; ``language`` the documents' language for sentence splitting.

    Raises:
        InvalidInputError: a ``top_n`` without ``order="rank"`` (``unit`` names what it keeps),
            a bad budget or an unknown ``language`` (:func:`compress_args`).
    """
    ranks = order == "rank"
    if not ranks and top_n is not None:
        raise InvalidInputError(f"top_n keeps the best {unit}; it needs order='rank'")
    verb: Verb = "rerank_compress" if ranks else "compress"
    args = compress_args(*budget, verb=verb, top_n=top_n, language=language)
    return args, Engine(compressor, role="reader" if ranks else "compressor")


def kept_spans_metadata(result: CompressionResult, index: int) -> list[dict[str, Any]]:
    """The kept sentences of ``documents[index]`` as plain dicts for a framework's metadata."""
    return _spans_metadata(result.documents[index].kept_spans)


def _spans_metadata(spans: Sequence[KeptSpan]) -> list[dict[str, Any]]:
    return [{"start": s.start, "end": s.end, "score": s.score, "text": s.text} for s in spans]


def read_title(source: Any, metadata: Mapping[str, Any] | None, title_key: TitleKey) -> str | None:
    """The title of one framework document, or None when it has none.

    The title goes to the engine as ``Document.title``: the ranking and the choice of sentences
    read it with the text (it is never compressed nor counted as document tokens), and much of
    the one read's edge over rerank-and-stuff comes from it. Only a string with some non-space
    character is a title: a missing key, None, ``""``, blanks and any other type (a number, a
    list) mean *untitled*, never an error, so titled and untitled documents mix in one call and
    a loader's stray value is never turned into text by ``str()``.

    Args:
        source: the framework's document (a LangChain ``Document``, a LlamaIndex node), given to
            a callable ``title_key``.
        metadata: its metadata (None: no metadata).
        title_key: a metadata key, a callable of ``source``, or None (no title).
    """
    if title_key is None:
        return None
    if callable(title_key):
        value = title_key(source)
    else:
        value = metadata.get(title_key) if metadata else None
    return value if isinstance(value, str) and value.strip() else None


def check_k(k: object) -> int:
    """``k`` itself when it is a positive integer (``bool`` is not one).

    Raises:
        InvalidInputError: anything else.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError("k must be a positive integer (the number of documents returned)")
    return k


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadDocument:
    """One ranked document of a one read, as an adapter writes it into a framework's document.

    Attributes:
        index: the document's position in the adapter's input.
        text: the kept sentences (a concatenation of substrings of the input text; ``""`` when
            the budget kept none of them).
        relevance_score: in [0, 1], higher is more relevant (the engine's fixed map of
            ``raw_score``).
        raw_score: the ranking's own score, in the method's units (see
            :meth:`~ragattn.compress.Compressor.rerank_and_compress`).
        kept_spans: the kept sentences as ``{start, end, score, text}``: character offsets into
            the input text, keep score in [0, 1].
    """

    index: int
    text: str
    relevance_score: float
    raw_score: float
    kept_spans: tuple[Mapping[str, Any], ...]

    def kept_spans_metadata(self) -> list[dict[str, Any]]:
        """The kept spans as fresh plain dicts for a framework's metadata."""
        return [dict(s) for s in self.kept_spans]


def read_documents(
    results: RerankResults,
    compression: CompressionResult,
    *,
    drop_empty: bool = True,
    keep_best_sentence: bool = False,
) -> list[ReadDocument]:
    """The documents of one read, best first: each ranked document's kept sentences and scores.

    A document the budget kept nothing of is left out (``drop_empty``, logged at INFO) or, with
    ``keep_best_sentence``, keeps its highest-scoring sentence of the same read, beyond the budget
    (so each ranked document comes back; skipped where the engine sent no sentence spans, a
    client and service on different versions).
    """
    by_index = {d.index: d for d in compression.documents}
    out: list[ReadDocument] = []
    left_out = []
    for r in results:
        doc = by_index[r.index]
        text, spans = doc.text, _spans_metadata(doc.kept_spans)
        if not text and keep_best_sentence:
            text, spans = _best_sentence(doc)
        if not text and drop_empty:
            left_out.append(r.index)
            continue
        out.append(
            ReadDocument(
                index=r.index,
                text=text,
                relevance_score=r.relevance_score,
                raw_score=r.raw_score,
                kept_spans=tuple(spans),
            )
        )
    if left_out:
        logger.info(
            "ragattn: the budget kept no sentence of %d ranked document(s) (input positions %s); "
            "they are left out",
            len(left_out),
            left_out,
        )
    return out


def _best_sentence(doc: CompressedDocument) -> tuple[str, list[dict[str, Any]]]:
    """The highest-scoring sentence of ``doc`` (first on ties) as its text and kept span."""
    scores, spans = doc.sentence_scores, doc.sentence_spans
    if not scores or len(spans) != len(scores):
        return "", []
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    start, end = spans[best]
    text = doc.document.text[start:end]
    return text, [{"start": start, "end": end, "score": scores[best], "text": text}]


__all__ = [
    "DEFAULT_TITLE_KEY",
    "KEPT_SPANS_KEY",
    "RAW_SCORE_KEY",
    "Engine",
    "ReadDocument",
    "TitleKey",
    "check_k",
    "check_top_n",
    "compress_args",
    "default_compressor",
    "default_reranker",
    "kept_spans_metadata",
    "read_documents",
    "read_title",
]
