"""The service layer between routes and the library: limits, cache, coalescing, worker thread.

Routes stay thin: they hand a request Struct to :class:`Service` and return what it gives back.
A cached response equals a fresh one except ``id``, which is minted per request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

import ragattn
from api.errors import DeadlineExceededError
from api.schemas import (
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
from api.worker import ModelWorker
from ragattn.cache import Cache, cache_key
from ragattn.errors import InputTooLargeError, InvalidInputError, ModelLoadError, TokenizerError
from ragattn.settings import Settings
from ragattn.types import Document

logger = logging.getLogger(__name__)
S = TypeVar("S", bound=msgspec.Struct)


def new_id() -> str:
    return str(uuid.uuid4())


_WEIGHT_DIGESTS: dict[int, tuple[Any, str]] = {}
"""sha256 of a model's weights by ``id(model)``; holding the model keeps its id unique."""


def weights_digest(model: Any) -> str:
    """sha256 over the raw bytes of every tensor in ``state_dict`` order (about 1 s for 135M)."""
    known = _WEIGHT_DIGESTS.get(id(model))
    if known is not None and known[0] is model:
        return known[1]
    import torch

    h = hashlib.sha256()
    with torch.inference_mode():
        for name, tensor in model.state_dict().items():
            h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
            h.update(memoryview(tensor.detach().contiguous().view(torch.uint8).numpy()))
    digest = h.hexdigest()
    _WEIGHT_DIGESTS[id(model)] = (model, digest)
    return digest


def model_fingerprint(proxy: Any, *parts: str) -> str:
    """Identity of everything that can change an answer: weights, library code and assets, methods.

    The weights are hashed byte for byte; the library code and packaged assets (head profiles,
    probes under ``models/``) by their file contents, so any change invalidates cached answers.
    """
    h = hashlib.sha256()
    h.update(f"{ragattn.__version__}|{proxy.name}|{proxy.source}|{proxy.dtype}|".encode())
    h.update("|".join(parts).encode())
    model = getattr(proxy, "model", None)
    if model is not None:
        h.update(weights_digest(model).encode())
    root = Path(ragattn.__file__).parent
    assets = [*sorted(root.rglob("*.py")), *sorted((root.parent / "models").rglob("*"))]
    for path in assets:
        if path.is_file():
            h.update(str(path.relative_to(root.parent)).encode())
            h.update(path.read_bytes())
    return f"{proxy.name}@{h.hexdigest()[:24]}"


class Service:
    """Serves rerank and compress requests with limits, caching and a bounded model queue."""

    def __init__(
        self,
        settings: Settings,
        *,
        reranker: Any,
        compressor: Any | None,
        compressor_factory: Callable[[Any, str | None], Any] | None,
        cache: Cache,
        worker: ModelWorker,
        fingerprint: str,
        index: Any | None = None,
    ) -> None:
        self.settings = settings
        self.reranker = reranker
        self.proxy = reranker.proxy
        self.model_name: str = self.proxy.name
        self.cache = cache
        self.worker = worker
        self.fingerprint = fingerprint
        self.index = index
        self._compressor_factory = compressor_factory
        self._compressors: dict[str | None, Any] = {}
        if compressor is not None:
            self._compressors[None] = compressor
            self._compressors[getattr(compressor, "method", None)] = compressor

    @property
    def can_compress(self) -> bool:
        return bool(self._compressors) or self._compressor_factory is not None

    # --- rerank -----------------------------------------------------------------------------

    async def rerank(self, req: RerankRequest, *, api_version: str) -> tuple[RerankResponse, bool]:
        documents = req.resolved_documents()
        self._check_count(documents)
        top_n = req.resolved_top_n()
        if top_n is not None:
            top_n = min(top_n, len(documents))  # Cohere semantics: clamp, do not fail
        return_documents = req.resolved_return_documents()
        params = {
            "method": getattr(self.reranker, "method", ""),
            "top_n": top_n,
            "return_documents": return_documents,
            "raw_scores": req.raw_scores,
            "max_tokens_per_doc": req.max_tokens_per_doc,
        }
        key = cache_key(
            model=self.fingerprint,
            route=f"rerank:v{api_version}",
            params=params,
            query=req.query,
            documents=documents,
        )

        def compute() -> RerankResponse:
            docs, warnings, tokens = self._prepare(req.query, documents, req.max_tokens_per_doc)
            result = self.reranker.rerank(req.query, docs, top_n=top_n)
            return RerankResponse.from_result(
                result,
                id="",
                api_version=api_version,
                model=self.model_name,
                input_tokens=tokens,
                return_documents=return_documents,
                raw_scores=req.raw_scores,
                warnings=warnings,
            )

        body, hit = await self._cached(key, "rerank", compute, RerankResponse)
        return msgspec.structs.replace(body, id=new_id()), hit

    # --- compress ---------------------------------------------------------------------------

    async def compress(self, req: CompressRequest) -> tuple[CompressResponse, bool]:
        documents = req.resolved_documents()
        self._check_count(documents)
        budget = req.resolved_budget()
        method = req.method or self.settings.compress_method
        params = {"method": method, "keep_order": req.keep_order, **budget}
        key = cache_key(
            model=self.fingerprint,
            route="compress:v1",
            params=params,
            query=req.query,
            documents=documents,
        )

        def compute() -> CompressResponse:
            docs, warnings, _ = self._prepare(req.query, documents, None)
            compressor = self._compressor(method)
            result = compressor.compress(req.query, docs, keep_order=req.keep_order, **budget)
            return CompressResponse.from_result(
                result, id="", model=self.model_name, warnings=warnings
            )

        body, hit = await self._cached(key, "compress", compute, CompressResponse)
        return msgspec.structs.replace(body, id=new_id()), hit

    async def rerank_compress(
        self, req: RerankCompressRequest
    ) -> tuple[RerankCompressResponse, bool]:
        """Rank and compress from one scoring pass (the compressor's ``rerank_and_compress``)."""
        documents = req.resolved_documents()
        self._check_count(documents)
        budget = req.resolved_budget()
        top_n = req.resolved_top_n()
        if top_n is not None:
            top_n = min(top_n, len(documents))
        method = req.method or self.settings.compress_method
        params = {
            "method": method,
            "keep_order": req.keep_order,
            "top_n": top_n,
            "return_documents": req.return_documents,
            **budget,
        }
        key = cache_key(
            model=self.fingerprint,
            route="rerank_compress:v1",
            params=params,
            query=req.query,
            documents=documents,
        )

        def compute() -> RerankCompressResponse:
            docs, warnings, tokens = self._prepare(req.query, documents, None)
            compressor = self._compressor(method)
            ranked, compressed = compressor.rerank_and_compress(
                req.query, docs, top_n=top_n, keep_order=req.keep_order, **budget
            )
            return RerankCompressResponse.from_result(
                ranked,
                compressed,
                id="",
                model=self.model_name,
                input_tokens=tokens,
                return_documents=req.return_documents,
                warnings=warnings,
            )

        body, hit = await self._cached(key, "rerank_compress", compute, RerankCompressResponse)
        return msgspec.structs.replace(body, id=new_id()), hit

    async def retrieve(self, req: RetrieveRequest) -> tuple[RetrieveResponse, bool]:
        """Search the configured index; with ``rerank`` the hits are reordered by the proxy."""
        index = self.index
        if index is None:
            raise InvalidInputError("no retrieval index is configured (set RAGATTN_INDEX_DIR)")
        if not req.query.strip():
            raise InvalidInputError("query must be a non-empty string")
        if req.k > self.settings.max_documents:
            raise InputTooLargeError(
                f"k={req.k} exceeds RAGATTN_MAX_DOCUMENTS={self.settings.max_documents}"
            )
        top_n = min(req.top_n, req.k) if req.top_n is not None else None
        params = {
            "k": req.k,
            "mode": req.mode,
            "rerank": req.rerank,
            "top_n": top_n,
            "return_documents": req.return_documents,
            "index": index.manifest.content_hash,
        }
        key = cache_key(
            model=self.fingerprint,
            route="retrieve:v1",
            params=params,
            query=req.query,
            documents=[],
        )

        def compute() -> RetrieveResponse:
            hits = index.search(req.query, req.k, mode=req.mode)
            relevance: dict[int, float] = {}
            order = list(range(len(hits)))
            warnings: list[str] = []
            if req.rerank and hits:
                docs = [Document(text=h.text, id=h.doc_id, title=h.title) for h in hits]
                ranked = self.reranker.rerank(req.query, docs, top_n=top_n)
                order = [r.index for r in ranked]
                relevance = {r.index: r.relevance_score for r in ranked}
                warnings.extend(ranked.warnings)
            elif top_n is not None:
                order = order[:top_n]
            results = [
                RetrievedOut(
                    doc_id=hits[i].doc_id,
                    retrieval_score=float(hits[i].score),
                    retrieval_rank=hits[i].rank,
                    relevance_score=relevance.get(i),
                    text=hits[i].text if req.return_documents else None,
                    title=hits[i].title if req.return_documents else None,
                )
                for i in order
            ]
            return RetrieveResponse(
                id="",
                results=results,
                mode=req.mode,
                reranked=req.rerank,
                model=self.model_name,
                warnings=warnings,
            )

        body, hit = await self._cached(key, "retrieve", compute, RetrieveResponse)
        return msgspec.structs.replace(body, id=new_id()), hit

    def _compressor(self, method: str | None) -> Any:
        """The compressor for ``method``, built once on the model thread and kept.

        A method this server cannot build (e.g. its probe weights are not trained yet) is a 400
        naming the reason, so clients can pick another method; rerank keeps working.
        """
        compressor = self._compressors.get(method)
        if compressor is None:
            if self._compressor_factory is None:
                raise InvalidInputError("compression is not available in this build")
            try:
                compressor = self._compressor_factory(self.proxy, method)
            except ModelLoadError as exc:
                raise InvalidInputError(
                    f"compress method {method or 'default'!r} is unavailable here: {exc}"
                ) from exc
            self._compressors[method] = compressor
        return compressor

    # --- shared -----------------------------------------------------------------------------

    def _check_count(self, documents: Sequence[Document]) -> None:
        if not documents:
            raise InvalidInputError("documents must hold at least one document")
        limit = self.settings.max_documents
        if len(documents) > limit:
            raise InputTooLargeError(
                f"{len(documents)} documents sent; this server accepts at most {limit} per request "
                "(RAGATTN_MAX_DOCUMENTS); split the request"
            )

    def _prepare(
        self, query: str, documents: Sequence[Document], truncate_to: int | None
    ) -> tuple[list[Document], list[str], int]:
        """Enforce token limits in proxy tokens; truncate to ``truncate_to`` with a warning.

        Returns the documents to score, the warnings, and the total input tokens.
        """
        tokenizer = self.proxy.tokenizer
        limits = self.settings
        try:
            q_ids = tokenizer(query, add_special_tokens=False)["input_ids"]
            enc = tokenizer(
                [d.text for d in documents], add_special_tokens=False, return_offsets_mapping=True
            )
        except Exception as exc:  # tokenizers raise bare exceptions on malformed text
            raise TokenizerError(
                f"the proxy tokenizer could not encode the input: {type(exc).__name__}"
            ) from exc
        if len(q_ids) > limits.max_query_tokens:
            raise InputTooLargeError(
                f"query has {len(q_ids)} tokens; the limit is {limits.max_query_tokens} "
                "(RAGATTN_MAX_QUERY_TOKENS)"
            )
        out: list[Document] = []
        warnings: list[str] = []
        total = len(q_ids)
        for i, (doc, ids, offsets) in enumerate(
            zip(documents, enc["input_ids"], enc["offset_mapping"], strict=True)
        ):
            n = len(ids)
            if truncate_to is not None and n > truncate_to:
                cut = offsets[truncate_to - 1][1]
                doc = dataclasses.replace(doc, text=doc.text[:cut])
                warnings.append(
                    f"documents[{i}] truncated from {n} to {truncate_to} tokens "
                    "(max_tokens_per_doc)"
                )
                n = truncate_to
            if n > limits.max_tokens_per_doc:
                raise InputTooLargeError(
                    f"documents[{i}] has {n} tokens; the limit is {limits.max_tokens_per_doc} "
                    "(RAGATTN_MAX_TOKENS_PER_DOC); send max_tokens_per_doc to truncate instead"
                )
            total += n
            out.append(doc)
        return out, warnings, total

    async def _cached(
        self, key: str, task: str, compute: Callable[[], S], kind: type[S]
    ) -> tuple[S, bool]:
        raw = await self.cache.get(key)
        if raw is not None:
            try:
                return msgspec.msgpack.decode(raw, type=kind), True
            except msgspec.DecodeError:
                logger.warning("undecodable cache entry %s; recomputing", key)

        timeout = self.settings.request_timeout_s or None
        deadline = time.monotonic() + timeout if timeout else None

        async def fill() -> S:
            value = await self.worker.run(task, compute, deadline=deadline)
            await self.cache.set(key, msgspec.msgpack.encode(value))
            return value

        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                return await self.worker.run_once(key, fill), False
        except TimeoutError as exc:
            if not scope.expired():
                raise
            # Our wait ended; the job is dropped unless another request still waits for it.
            raise DeadlineExceededError(
                f"the request did not finish within {timeout:g} s (RAGATTN_REQUEST_TIMEOUT_S); "
                "retry later or send less work"
            ) from exc

    async def cache_healthy(self) -> bool:
        """False while the cache backend fails (the service answers without it: degraded)."""
        return await self.cache.healthy()


__all__ = ["Service", "model_fingerprint", "new_id"]
