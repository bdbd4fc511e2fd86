"""The service layer between routes and the library: limits, cache, coalescing, worker threads.

Routes stay thin: they hand a request Struct to :class:`Service` and return what it gives back.
Each model request goes through the same steps:

1. on the event loop (a worker thread for a large body), milliseconds: shape checks (documents,
   counts, characters, a lower bound on each text's tokens) with
   :meth:`ragattn.limits.LimitChecker.precheck`, so a 5 MB document, in any script, is refused at
   once and never reaches the tokenizer thread;
2. the cache (a hit answers here);
3. on the tokenizer thread: the exact token limits and any truncation
   (:meth:`~ragattn.limits.LimitChecker.check`), never queued behind the model;
4. on the model thread: the library call.

Steps 3 and 4 run under the request deadline (``RAGATTN_REQUEST_TIMEOUT_S``), ``/v1/ask`` and its
generator call included. A cached response equals a fresh one except ``id``, which is minted per
request, the warnings about unknown request fields, which belong to each request, and
``meta.stage_seconds`` (the compressor's routes), which belongs to the computation that made the
answer: the cache stores answers without it, so a hit reports none (its ``x-ragattn-cache: hit``
header says why) and never passes off another request's seconds as its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import msgspec

from ragattn.cache import Cache, cache_key, cached_value, storing
from ragattn.contract import VerbArgs
from ragattn.errors import (
    InputTooLargeError,
    InvalidInputError,
)
from ragattn.first_stage import check_first_stage_order
from ragattn.limits import CheckedInput, LimitChecker
from ragattn.pipeline import DEFAULT_ORDER, PipelineOptions, Question, RAGPipeline
from ragattn.settings import Settings
from ragattn.types import Document
from ragattn_api.errors import DeadlineExceededError, OrderMismatchError
from ragattn_api.methods import CompressorFactory, MethodEngines
from ragattn_api.schemas import (
    AskRequest,
    AskResponse,
    CompressRequest,
    CompressResponse,
    RerankCompressRequest,
    RerankCompressResponse,
    RerankRequest,
    RerankResponse,
    RetrievedOut,
    RetrieveRequest,
    RetrieveResponse,
)
from ragattn_api.schemas.verbs import CompressMeta
from ragattn_api.tenancy import current_partition
from ragattn_api.worker import ModelWorker

if TYPE_CHECKING:
    from ragattn.compress import Compressor
    from ragattn.rerank import Reranker

logger = logging.getLogger(__name__)
S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")
_PRECHECK_THREAD_CHARS = 1 << 18
"""Texts longer than this in all are prechecked on a worker thread (tens of milliseconds of
vectorized work at most; shorter ones take well under one on the event loop)."""


def new_id() -> str:
    return str(uuid.uuid4())


def _ranking_proxy(engine: Reranker, default: str) -> str:
    """The proxy named in the ``model`` of a call ``engine`` handed to its multilingual reranker:
    that reranker's proxy where its method runs one, else ``default`` (no proxy read the call;
    the service's proxy stays the name, as for ``minilm``)."""
    second = getattr(engine, "multilingual_reranker", None)  # a handed-in engine may not route
    if second is None or not second.spec.runs_proxy:
        return default
    return str(second.proxy_name)


def _clamped(top_n: int | None, n_documents: int) -> int | None:
    """``top_n`` at most the number of documents (Cohere's semantics: clamp, do not fail)."""
    return None if top_n is None else min(top_n, n_documents)


def _order(order: Sequence[int] | None, documents: Sequence[Document]) -> tuple[int, ...] | None:
    """A request's ``first_stage_order``, checked against its documents before any model runs.

    Raises:
        OrderMismatchError: no permutation of their indices (a 422 ``invalid_order``: the body
            fits the schema, which cannot state the documents' count).
    """
    try:
        checked = check_first_stage_order(order, len(documents))
    except InvalidInputError as exc:
        raise OrderMismatchError(str(exc)) from exc
    return None if checked is None else tuple(checked)


@dataclass(frozen=True, slots=True, kw_only=True)
class _ModelCall:
    """One model route's call: its query and documents (converted once, from the wire), its
    checked arguments, and the cache key's route (``rerank:v2``, ``compress:v1``, …)."""

    query: str
    documents: Sequence[Document]
    args: VerbArgs
    route: str

    @property
    def chars(self) -> int:
        """Characters of the query and documents (titles too): what decides where the precheck
        runs."""
        return len(self.query) + sum(len(d.text) + len(d.title or "") for d in self.documents)


class Service(MethodEngines):
    """Serves the model routes with limits, caching, a bounded model queue and deadlines.

    A request may name its rerank or compress ``method``; its engine comes from
    :class:`~ragattn_api.methods.MethodEngines` (checked on the event loop, built on first use on
    the model thread).

    Args:
        settings: the service settings.
        reranker: the loaded reranker (its ``proxy`` serves every route; its method is the default).
        compressors: compressors already built, by method name (``None`` = the default method).
        compressor_factory: builds a compressor for a method on first use.
        cache: the response cache.
        worker: the model thread.
        tokens: the tokenizer thread (token limits).
        limits: the token limits, on a private copy of the proxy's tokenizer.
        fingerprint: identity of weights, code and assets; part of every cache key.
        pipeline: retrieval, rerank, compression and generation over the configured index;
            ``None`` without ``RAGATTN_INDEX_DIR``.
        unavailable: why the default compressor could not be built (for the 400 it causes).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        reranker: Reranker,
        compressors: dict[str | None, Compressor],
        compressor_factory: CompressorFactory,
        cache: Cache,
        worker: ModelWorker,
        tokens: ModelWorker,
        limits: LimitChecker,
        fingerprint: str,
        pipeline: RAGPipeline | None = None,
        unavailable: str | None = None,
    ) -> None:
        self.settings = settings
        self.model_name: str = reranker.proxy.name
        self.cache = cache
        self.worker = worker
        self.tokens = tokens
        self.limits = limits
        self.fingerprint = fingerprint
        self.pipeline = pipeline
        MethodEngines.__init__(
            self,
            reranker,
            compressors,
            compressor_factory,
            default_compress=settings.compress_method,
            unavailable=unavailable,
        )

    # --- rerank ---------------------------------------------------------------------------

    async def rerank(
        self, req: RerankRequest, *, api_version: str, notes: Sequence[str] = ()
    ) -> tuple[RerankResponse, bool]:
        """Rerank with the request's (or the server's) rerank method.

        With ``prune``, one ``rerank_and_compress`` call on the service's default compressor
        ranks the documents and keeps the best ``top_n`` results' sentences under that budget,
        one budget across them all (the proxy's tokens); ``max_tokens_per_doc`` truncates as
        without it (a truncated text is a prefix of the one sent, so span offsets index the text
        as sent), and the response names the ranking method (``<compress method>:document-probe``
        or ``:max-sentence``) in ``method``.
        """
        documents = req.resolved_documents()
        top_n = _clamped(req.resolved_top_n(), len(documents))
        budget = req.resolved_prune()
        args = VerbArgs(
            verb="rerank" if budget is None else "rerank_compress",
            top_n=top_n,
            budget=budget,
            truncate_to=req.max_tokens_per_doc,
            language="auto" if req.prune is None else req.prune.language,
        )
        method: str | None
        name: str | None
        if budget is None:
            method = name = self._rerank_method(req.method)
        else:
            method = self._compress_method(None)
            name = self._compress_name(method)
        return_documents = req.resolved_return_documents()
        params: dict[str, Any] = {"method": name}
        if budget is not None:
            params["prune"] = {**budget.keywords(), "language": args.language}
        params.update(
            top_n=args.top_n,
            return_documents=return_documents,
            raw_scores=req.raw_scores,
            max_tokens_per_doc=req.max_tokens_per_doc,
        )

        def score(checked: CheckedInput) -> RerankResponse:
            pruned, model, ranked_by = None, self.model_name, None
            if budget is not None:
                reader, routed, model = self._reader(method, req.query, checked.documents, args)
                result, pruned = reader.rerank_and_compress_checked(
                    req.query, checked.documents, routed
                )
            else:
                assert method is not None  # a rerank method always resolves to a name
                engine = self.rerank_engine(method)
                result = engine.rerank_checked(req.query, checked.documents, args)
                if result.method != method:  # a call not in English, ranked by another method
                    ranked_by, model = result.method, _ranking_proxy(engine, self.model_name)
            body = RerankResponse.from_result(
                result,
                id="",
                api_version=api_version,
                model=model,
                input_tokens=checked.input_tokens,
                return_documents=return_documents,
                raw_scores=req.raw_scores,
                warnings=list(checked.warnings),
                pruned=pruned,
            )
            return body if ranked_by is None else msgspec.structs.replace(body, method=ranked_by)

        call = _ModelCall(
            query=req.query, documents=documents, args=args, route=f"rerank:v{api_version}"
        )
        body, hit = await self._serve(call, params, score, RerankResponse)
        meta = msgspec.structs.replace(body.meta, warnings=[*notes, *body.meta.warnings])
        if budget is not None:  # the response names the method that ranked (set from the result)
            return msgspec.structs.replace(body, id=new_id(), meta=meta), hit
        # ``method`` only when the request named one, or when a call not in English was ranked
        # by another method than the one resolved (the body says which): an English call of a
        # Cohere or TEI client sees today's shape.
        served = body.method or (method if req.method is not None else None)
        return msgspec.structs.replace(body, id=new_id(), meta=meta, method=served), hit

    def _reader(
        self, method: str | None, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[Compressor, VerbArgs, str]:
        """The compressor that reads a compress call of ``method``, the arguments it reads it
        with and the proxy named in the response's ``model``: a call not in English is read by
        the multilingual proxy (:meth:`Compressor.route`), and the response says so. Called on
        the model thread."""
        compressor = self.compressor(method)
        route = getattr(compressor, "route", None)  # a compressor handed in may not route
        if route is None:
            return compressor, args, self.model_name
        reader, routed = route(query, documents, args)
        return reader, routed, getattr(reader, "proxy_name", self.model_name)

    # --- compress ---------------------------------------------------------------------------

    async def compress(
        self, req: CompressRequest, *, notes: Sequence[str] = ()
    ) -> tuple[CompressResponse, bool]:
        """Compress the request's documents under its one budget.

        ``max_tokens_per_doc`` truncates as on the rerank routes: each longer document's text is
        cut so that its title and text have at most that many tokens, with a warning in
        ``warnings``; the compression reads, scores and counts (``origin_tokens``) the cut
        documents, and kept spans index the text as sent (a cut text is a prefix of it).
        """
        documents = req.resolved_documents()
        args = VerbArgs(
            verb="compress",
            budget=req.resolved_budget(),
            keep_order=req.keep_order,
            language=req.language,
            first_stage_order=_order(req.first_stage_order, documents),
            truncate_to=req.max_tokens_per_doc,
        )
        method = self._compress_method(req.method)
        params = {"method": self._compress_name(method), **args.params(), **_cap(req)}

        def score(checked: CheckedInput) -> CompressResponse:
            reader, routed, model = self._reader(method, req.query, checked.documents, args)
            result = reader.compress_checked(req.query, checked.documents, routed)
            return CompressResponse.from_result(
                result, id="", model=model, warnings=list(checked.warnings)
            )

        call = _ModelCall(query=req.query, documents=documents, args=args, route="compress:v1")
        body, hit = await self._serve(call, params, score, CompressResponse)
        return msgspec.structs.replace(body, id=new_id(), warnings=[*notes, *body.warnings]), hit

    async def rerank_compress(
        self, req: RerankCompressRequest, *, notes: Sequence[str] = ()
    ) -> tuple[RerankCompressResponse, bool]:
        """Rank and compress from one scoring pass (the compressor's ``rerank_and_compress``).

        ``max_tokens_per_doc`` truncates as on ``/v1/compress`` (the warning in
        ``meta.warnings``, as on the rerank routes); ranked and compressed are the cut documents.
        """
        documents = req.resolved_documents()
        budget = req.resolved_budget()
        top_n = _clamped(req.resolved_top_n(), len(documents))
        args = VerbArgs(
            verb="rerank_compress",
            top_n=top_n,
            budget=budget,
            keep_order=req.keep_order,
            language=req.language,
            first_stage_order=_order(req.first_stage_order, documents),
            truncate_to=req.max_tokens_per_doc,
        )
        method = self._compress_method(req.method)
        params = {
            "method": self._compress_name(method),
            "return_documents": req.return_documents,
            **args.params(),
            **_cap(req),
        }

        def score(checked: CheckedInput) -> RerankCompressResponse:
            reader, routed, model = self._reader(method, req.query, checked.documents, args)
            ranked, compressed = reader.rerank_and_compress_checked(
                req.query, checked.documents, routed
            )
            return RerankCompressResponse.from_result(
                ranked,
                compressed,
                id="",
                model=model,
                input_tokens=checked.input_tokens,
                return_documents=req.return_documents,
                warnings=list(checked.warnings),
            )

        # v3: the results carry raw_score (v2: the response names the ranking method; entries
        # cached before lack them).
        call = _ModelCall(
            query=req.query, documents=documents, args=args, route="rerank_compress:v3"
        )
        body, hit = await self._serve(call, params, score, RerankCompressResponse)
        meta = msgspec.structs.replace(body.meta, warnings=[*notes, *body.meta.warnings])
        return msgspec.structs.replace(body, id=new_id(), meta=meta), hit

    # --- retrieval and RAG --------------------------------------------------------------------

    def _require_pipeline(self) -> RAGPipeline:
        if self.pipeline is None:
            raise InvalidInputError("no retrieval index is configured (set RAGATTN_INDEX_DIR)")
        return self.pipeline

    def _mode(self, pipeline: RAGPipeline, requested: str | None) -> Any:
        """The search mode: the one asked for, else the best this index has.

        Checked here, before any search: the index would skip its own check for a query with no
        searchable term and answer 200 with no hits.
        """
        has_dense = getattr(pipeline.index, "dense", None) is not None
        if requested is None:
            return "hybrid" if has_dense else "bm25"
        if requested != "bm25" and not has_dense:
            raise InvalidInputError("this index was built without dense vectors; use bm25")
        return requested

    def _check_k(self, name: str, k: int) -> None:
        if k > self.settings.max_documents:
            raise InputTooLargeError(
                f"{name}={k} exceeds RAGATTN_MAX_DOCUMENTS={self.settings.max_documents}"
            )

    async def retrieve(
        self, req: RetrieveRequest, *, notes: Sequence[str] = ()
    ) -> tuple[RetrieveResponse, bool]:
        """Search the configured index; with ``rerank`` the hits are reordered by the proxy."""
        pipeline = self._require_pipeline()
        self._check_k("k", req.k)
        await self._precheck(
            functools.partial(self.limits.precheck, req.query, None), len(req.query)
        )
        top_n = min(req.top_n, req.k) if req.top_n is not None else None
        mode = self._mode(pipeline, req.mode)
        manifest = getattr(pipeline.index, "manifest", None)
        params = {
            "k": req.k,
            "mode": mode,
            "rerank": req.rerank,
            "top_n": top_n,
            "return_documents": req.return_documents,
            "index": getattr(manifest, "content_hash", None),
        }
        key = self._key("retrieve:v1", params, req.query, [])

        def search(query: Question) -> RetrieveResponse:
            found = pipeline.retrieve(query, k=req.k, mode=mode, rerank=req.rerank, top_n=top_n)
            results = [
                RetrievedOut(
                    doc_id=c.hit.doc_id,
                    retrieval_score=float(c.hit.score),
                    retrieval_rank=c.hit.rank,
                    relevance_score=c.relevance_score,
                    text=c.hit.text if req.return_documents else None,
                    title=c.hit.title if req.return_documents else None,
                )
                for c in found.candidates
            ]
            return RetrieveResponse(
                id="",
                results=results,
                mode=mode,
                reranked=req.rerank,
                model=self.model_name,
                warnings=list(found.warnings),
            )

        async def work(deadline: float | None) -> RetrieveResponse:
            query = await self.tokens.run(
                "tokenize", pipeline.check_question, req.query, what="query", deadline=deadline
            )
            return await self.worker.run("retrieve", search, query, deadline=deadline)

        body, hit = await self._cached(key, work, RetrieveResponse)
        return msgspec.structs.replace(body, id=new_id(), warnings=[*notes, *body.warnings]), hit

    async def ask(self, req: AskRequest, *, notes: Sequence[str] = ()) -> tuple[AskResponse, bool]:
        """Answer ``req.question`` over the index with the service's pipeline.

        Retrieval to compression is one job on the model thread, generation another (its HTTP
        call too, for an endpoint generator); both run under the request deadline.

        Raises:
            InvalidInputError: no index configured, an empty question or invalid options.
            InputTooLargeError: ``top_k`` above ``RAGATTN_MAX_DOCUMENTS``, or a long question.
            DeadlineExceededError: the answer did not come within ``RAGATTN_REQUEST_TIMEOUT_S``.
        """
        pipeline = self._require_pipeline()
        self._check_k("top_k", req.top_k)
        check = functools.partial(self.limits.precheck, req.question, None, what="question")
        await self._precheck(check, len(req.question))
        if req.compress and pipeline.compressor is None:
            raise InvalidInputError(
                f"compress method 'default' is unavailable here: {self.unavailable}; "
                "send compress=false"
            )
        options = PipelineOptions(
            flow=req.flow,
            top_k=req.top_k,
            top_n=req.top_n,
            ratio=req.ratio,
            max_context_tokens=req.max_context_tokens,
            order=req.order or DEFAULT_ORDER,
            mode=self._mode(pipeline, req.mode),
            rerank=req.rerank,
            compress=req.compress,
            language=req.language,
        )
        async with self._deadline() as deadline:
            bounded = functools.partial(pipeline.check_question, prechecked=True)
            question = await self.tokens.run("tokenize", bounded, req.question, deadline=deadline)

            async def on_worker(fn: Callable[[], T]) -> T:
                return await self.worker.run("ask", fn, deadline=deadline)

            result = await pipeline.aask(question, options, run_blocking=on_worker)
        body = AskResponse.from_result(result, id=new_id(), return_text=req.return_text)
        return msgspec.structs.replace(body, warnings=[*notes, *body.warnings]), result.cache_hit

    # --- shared -----------------------------------------------------------------------------

    def _key(
        self, route: str, params: dict[str, Any], query: str, documents: Sequence[Document]
    ) -> str:
        """The cache key of a request: this server's fingerprint, the route and its arguments."""
        return cache_key(
            model=self.fingerprint, route=route, params=params, query=query, documents=documents
        )

    async def _serve(
        self,
        call: _ModelCall,
        params: dict[str, Any],
        score: Callable[[CheckedInput], S],
        kind: type[S],
    ) -> tuple[S, bool]:
        """The steps of a model route (the module docstring's): the limits by bounds, the
        cache, the exact token limits on the tokenizer thread, ``score`` on the model thread;
        ``params`` are the cache key's output-changing arguments."""
        truncate_to = call.args.truncate_to
        check = functools.partial(
            self.limits.precheck, call.query, call.documents, truncate_to=truncate_to
        )
        await self._precheck(check, call.chars)
        key = self._key(call.route, params, call.query, call.documents)

        async def work(deadline: float | None) -> S:
            checked = await self.tokens.run(
                "tokenize",
                self.limits.check,
                call.query,
                call.documents,
                truncate_to=truncate_to,
                prechecked=True,
                deadline=deadline,
            )
            return await self.worker.run(call.args.verb, score, checked, deadline=deadline)

        return await self._cached(key, work, kind)

    async def _precheck(self, check: Callable[[], None], chars: int) -> None:
        """``check``, a :meth:`LimitChecker.precheck` (counts, lengths and token lower bounds),
        before the cache and both threads: on the event loop, or for a body of more than
        :data:`_PRECHECK_THREAD_CHARS` characters on a worker thread of its own (never the
        tokenizer thread), so the loop keeps serving meanwhile."""
        if chars > _PRECHECK_THREAD_CHARS:
            await anyio.to_thread.run_sync(check)
        else:
            check()

    @asynccontextmanager
    async def _deadline(self) -> AsyncIterator[float | None]:
        """The request deadline: yields its ``time.monotonic()`` instant (``None``: none set);
        a wait still running when it passes ends in :class:`DeadlineExceededError`."""
        timeout = self.settings.request_timeout_s or None
        deadline = time.monotonic() + timeout if timeout else None
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                yield deadline
        except TimeoutError as exc:
            if not scope.expired():
                raise
            # Our wait ended; queued jobs are dropped unless another request still waits for them.
            raise DeadlineExceededError(
                f"the request did not finish within {timeout:g} s (RAGATTN_REQUEST_TIMEOUT_S); "
                "retry later or send less work"
            ) from exc

    async def _cached(
        self, key: str, work: Callable[[float | None], Awaitable[S]], kind: type[S]
    ) -> tuple[S, bool]:
        found = await cached_value(self.cache, key, lambda b: msgspec.msgpack.decode(b, type=kind))
        if found is not None:
            return found, True
        async with self._deadline() as deadline:
            fill = storing(
                self.cache, key, lambda: work(deadline), lambda b: msgspec.msgpack.encode(_kept(b))
            )
            # With RAGATTN_CACHE_SCOPE=key, identical requests share a computation only per key.
            flight = f"{current_partition()}|{key}" if self.settings.cache_scope == "key" else key
            return await self.worker.run_once(flight, fill), False

    async def cache_healthy(self) -> bool:
        """False while cache reads fail (the service answers without it: degraded)."""
        return await self.cache.healthy()


def _cap(req: CompressRequest) -> dict[str, int]:
    """A compress route's ``max_tokens_per_doc`` as a cache key parameter (none when not sent,
    so the keys of requests without it are those they had before the field existed)."""
    return {} if req.max_tokens_per_doc is None else {"max_tokens_per_doc": req.max_tokens_per_doc}


def _kept(body: S) -> S:
    """``body`` as the cache keeps it: without the seconds of the computation that made it
    (``meta.stage_seconds``; a compress ``meta`` holds nothing else)."""
    meta = getattr(body, "meta", None)
    if meta is None or getattr(meta, "stage_seconds", None) is None:
        return body
    if isinstance(meta, CompressMeta):
        return msgspec.structs.replace(body, meta=None)
    return msgspec.structs.replace(body, meta=msgspec.structs.replace(meta, stage_seconds=None))


__all__ = ["Service", "new_id"]
