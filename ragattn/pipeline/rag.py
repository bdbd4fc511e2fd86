"""The RAG pipeline: retrieve, rank and prune (:mod:`ragattn.pipeline.flows`), look up the cache,
generate. The stages' values live in :mod:`ragattn.pipeline.results`, the options in
:mod:`ragattn.pipeline.options`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ragattn.cache import Cache, cache_key, cached_value, storing
from ragattn.contract import CompressEngine, RerankEngine, VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.generate import GeneratedAnswer, Generator
from ragattn.limits import LimitChecker, Limits
from ragattn.pipeline.flows import TokenCounter, one_read, two_pass
from ragattn.pipeline.index import SearchIndex, no_index_help
from ragattn.pipeline.options import Mode, PipelineOptions
from ragattn.pipeline.results import (
    Candidate,
    PipelineResult,
    PreparedContext,
    Question,
    Retrieval,
    hit_document,
)
from ragattn.pipeline.timing import Clock

logger = logging.getLogger(__name__)
T = TypeVar("T")

RunBlocking = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking model call off the event loop, e.g. the service's model worker."""


class RAGPipeline:
    """Retrieve from an index, rerank, compress, and answer with a generator, with a cache.

    Args:
        index: a loaded :class:`ragattn.retrieve.Index` (or anything with its ``search``).
        reranker: a :class:`~ragattn.rerank.Reranker`; ``None`` keeps the first-stage order.
        compressor: a :class:`~ragattn.compress.Compressor`; ``None`` passes whole passages.
        generator: the answering model (:class:`~ragattn.generate.LocalGenerator`,
            :class:`~ragattn.generate.OpenAIChatGenerator`, or any :class:`Generator`).
        cache: a :class:`~ragattn.cache.Cache` in front of the generator (the service hands in its
            own); ``None`` disables it.
        options: default :class:`PipelineOptions` (each call may pass its own).
        tokenizer: counts context tokens: a tokenizer or a :class:`~ragattn.proxy.Proxy`; default
            the compressor's, reranker's or generator's proxy, in that order, else
            whitespace-separated words.
        limits: token limits in ``tokenizer``'s tokens: a longer question is refused, longer
            passages are cut with a warning; none when None. A :class:`~ragattn.limits.Limits`,
            or a :class:`~ragattn.limits.LimitChecker` to share (the service hands in its own).

    Raises:
        InvalidInputError: ``index`` is ``None`` (the message says how to build one).
    """

    def __init__(
        self,
        index: SearchIndex | None,
        *,
        reranker: RerankEngine | None = None,
        compressor: CompressEngine | None = None,
        generator: Generator,
        cache: Cache | None = None,
        options: PipelineOptions | None = None,
        tokenizer: Any | None = None,
        limits: Limits | LimitChecker | None = None,
    ) -> None:
        if index is None:
            raise InvalidInputError("the pipeline needs a retrieval index; " + no_index_help())
        self.index = index
        self.generator = generator
        self.reranker = reranker
        self.compressor = compressor
        self.cache = cache
        self.options = options or PipelineOptions()
        self._counter = TokenCounter.resolve(tokenizer, compressor, reranker, generator)
        self._limits: LimitChecker | None = None
        if isinstance(limits, LimitChecker):
            self._limits = limits
        elif limits is not None and self._counter.tokenizer is not None:
            self._limits = LimitChecker(self._counter.tokenizer, limits)

    # -- stages --------------------------------------------------------------------------

    def check_question(
        self, question: str | Question, *, what: str = "question", prechecked: bool = False
    ) -> Question:
        """``question`` checked once: non-empty and within ``limits.max_query_tokens``
        (``prechecked``: the caller has already bounded it without tokenizing, as the service
        does before its tokenizer thread).

        Raises:
            InvalidInputError: an empty question.
            InputTooLargeError: the question is over ``limits.max_query_tokens``.
        """
        if isinstance(question, Question):
            return question
        if not isinstance(question, str) or not question.strip():
            raise InvalidInputError(f"{what} must be a non-empty string")
        if self._limits is not None:
            self._limits.check_query(question, what=what, prechecked=prechecked)
        return Question(question)

    def retrieve(
        self,
        question: str | Question,
        *,
        k: int,
        mode: Mode = "hybrid",
        rerank: bool = True,
        top_n: int | None = None,
    ) -> Retrieval:
        """Search the index for ``question`` and rerank the hits: the first half of :meth:`ask`.

        Passages longer than the pipeline's ``limits.max_tokens_per_doc`` are scored on their first
        tokens (a warning says so); the question is held to ``limits.max_query_tokens``.

        Args:
            question: the question (or search query); a :class:`Question` is not checked again.
            k: hits to retrieve.
            mode: the index's search mode.
            rerank: rerank the hits with the pipeline's reranker (ignored without one).
            top_n: keep this many (the best after reranking, else the first hits); all when None.

        Raises:
            InvalidInputError: an empty question.
            InputTooLargeError: the question is over ``limits.max_query_tokens``.
        """
        question = self.check_question(question).text
        clock = Clock()
        warnings: list[str] = []
        hits = self.index.search(question, k, mode=mode)
        t_retrieve = clock.lap()
        docs = [hit_document(h) for h in hits]
        if self._limits is not None and docs:
            docs, _, cut = self._limits.truncate(docs, self._limits.limits.max_tokens_per_doc)
            warnings.extend(f"retrieved passage {w.removeprefix('documents')}" for w in cut)
        keep = len(hits) if top_n is None else min(top_n, len(hits))
        order = list(range(len(hits)))[:keep]
        relevance: dict[int, float] = {}
        t_rerank = 0.0
        ranked_by = None
        reranked = self.reranker is not None and rerank and bool(hits)
        if reranked:
            args = VerbArgs(verb="rerank", top_n=keep)
            ranked = self.reranker.rerank_checked(question, docs, args)  # type: ignore[union-attr]
            order = [r.index for r in ranked]
            relevance = {r.index: r.relevance_score for r in ranked}
            ranked_by = ranked.method or getattr(self.reranker, "method", None)
            warnings.extend(ranked.warnings)
            t_rerank = clock.lap()
        return Retrieval(
            candidates=tuple(
                Candidate(hit=hits[i], document=docs[i], relevance_score=relevance.get(i))
                for i in order
            ),
            reranked=reranked,
            ranked_by=ranked_by,
            warnings=tuple(warnings),
            retrieve_s=t_retrieve,
            rerank_s=t_rerank,
        )

    def prepare(
        self, question: str | Question, options: PipelineOptions | None = None
    ) -> PreparedContext:
        """Retrieve, rank and prune for ``question`` (everything before the generator), by the
        options' flow: one read of every candidate (default, where the pipeline has a compressor
        and compression is on), else rerank, keep ``top_n``, compress those
        (:mod:`ragattn.pipeline.flows`).

        Raises:
            InvalidInputError: an empty question or an invalid option for the index.
            InputTooLargeError: the question is over the pipeline's ``limits``.
        """
        opts = options or self.options
        question = self.check_question(question)
        if opts.flow == "one_read" and self.compressor is not None and opts.compress:
            found = self.retrieve(question, k=opts.top_k, mode=opts.mode, rerank=False)
            return one_read(question, found, opts, self.compressor, self._counter)
        found = self.retrieve(
            question, k=opts.top_k, mode=opts.mode, rerank=opts.rerank, top_n=opts.top_n
        )
        return two_pass(question, found, opts, self.compressor, self._counter)

    def cache_key(self, prepared: PreparedContext, options: PipelineOptions) -> str:
        """sha256 key over generator identity, options, index, question and the ordered context."""
        manifest = getattr(self.index, "manifest", None)
        params = {
            **options.params(),
            "index": getattr(manifest, "content_hash", type(self.index).__name__),
            "rerank_method": getattr(self.reranker, "method", None),
            "compress_method": getattr(self.compressor, "method", None),
            "compressed": prepared.compressed,
        }
        return cache_key(
            model=self.generator.identity,
            route="ask:v1",
            params=params,
            query=prepared.question,
            documents=prepared.passages(options.order),
        )

    # -- public API ----------------------------------------------------------------------

    def ask(
        self, question: str | Question, options: PipelineOptions | None = None
    ) -> PipelineResult:
        """Answer ``question``: retrieve, rerank, compress, look up the cache, generate.

        Runs :meth:`aask` on a fresh event loop (do not call it from a running loop; await
        :meth:`aask` there). A Redis cache binds to the first loop it is used on, so share one
        across calls only through :meth:`aask` on one loop.

        Raises:
            InvalidInputError: an empty question or invalid options.
            GeneratorError: the generator endpoint failed.
        """
        return asyncio.run(self.aask(question, options))

    async def aask(
        self,
        question: str | Question,
        options: PipelineOptions | None = None,
        *,
        run_blocking: RunBlocking | None = None,
    ) -> PipelineResult:
        """Async :meth:`ask`; ``run_blocking`` runs the model stages off the loop (default inline).

        Cache lookups and writes run on the calling loop; retrieval to compression is one
        blocking call, generation another.
        """
        opts = options or self.options
        started = time.perf_counter()
        prepared: PreparedContext = await _call(run_blocking, lambda: self.prepare(question, opts))
        context = prepared.context(opts.order, compressed=prepared.compressed)
        passages = [s.passage(compressed=prepared.compressed) for s in context]
        key = self.cache_key(prepared, opts)
        clock = Clock()
        answer = await cached_value(self.cache, key, _decode_answer)
        t_cache = clock.lap()
        hit = answer is not None
        t_generate = 0.0
        if answer is None:

            async def generate() -> GeneratedAnswer:
                return await _call(
                    run_blocking, lambda: self.generator.generate(prepared.question, passages)
                )

            answer = await storing(self.cache, key, generate, _encode_answer)()
            t_generate = clock.lap()
        position = {id(s): n for n, s in enumerate(context, start=1)}
        sources = tuple(
            dataclasses.replace(s, context_position=position.get(id(s))) for s in prepared.sources
        )
        timings = dataclasses.replace(
            prepared.timings,
            cache=t_cache,
            generate=t_generate,
            total=time.perf_counter() - started,
        )
        return PipelineResult(
            question=prepared.question,
            answer=answer,
            flow=prepared.flow,
            ranked_by=prepared.ranked_by,
            sources=sources,
            order=opts.order,
            timings=timings,
            tokens_before=prepared.tokens_before,
            tokens_after=prepared.tokens_after,
            tokenizer=prepared.tokenizer,
            cache_hit=hit,
            warnings=prepared.warnings,
        )


def _encode_answer(answer: GeneratedAnswer) -> bytes:
    return json.dumps(answer.to_dict()).encode("utf-8")


def _decode_answer(raw: bytes) -> GeneratedAnswer:
    return GeneratedAnswer(**json.loads(raw.decode("utf-8")))


async def _call(run_blocking: RunBlocking | None, fn: Callable[[], T]) -> T:
    if run_blocking is None:
        return fn()
    result: T = await run_blocking(fn)
    return result


__all__ = ["RAGPipeline", "RunBlocking"]
