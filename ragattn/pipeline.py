"""The end-to-end RAG pipeline: retrieve -> one read (rank and prune) -> cache lookup -> generate.

::

    pipeline = RAGPipeline(Index.load("my-index"), reranker=Reranker(proxy),
                           compressor=Compressor(proxy), generator=LocalGenerator(proxy),
                           cache=MemoryCache())
    result = pipeline.ask("who designed the Eiffel Tower?")
    result.answer.text, result.sources[0].relevance_score, result.ratio, result.timings.total

The default flow is **one read** (``flow="one_read"``): the compressor's proxy reads every
retrieved candidate with the question once, and from that forward come both the ranking of the
passages and the sentences kept under the budget (:meth:`Compressor.rerank_and_compress
<ragattn.compress.Compressor.rerank_and_compress>`), so evidence in a passage a reranker would
have put below ``top_n`` still reaches the generator. ``flow="two_pass"`` is the older flow: the
reranker orders the hits, the best ``top_n`` are kept, and the compressor prunes those.

Every stage but retrieval and generation can be switched off: ``reranker=None`` keeps the
first-stage order, ``compressor=None`` passes whole passages, ``cache=None`` always generates.
Per call, :class:`PipelineOptions` also switch rerank and compression off (without compression,
the one-read flow falls back to the two-pass one: there is nothing to read once for).

The cache sits in front of the generator only: its key is a sha256 over the generator's
identity, the options, the index hash, the question and the exact, ordered context, so a hit is
the answer the generator gave for that very prompt. Retrieval, reranking and compression always
run (they are cheap next to a generator and their results are reported).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from ragattn.cache import Cache, cache_key, cached_value, storing
from ragattn.contract import CompressEngine, RerankEngine, VerbArgs
from ragattn.errors import InvalidInputError
from ragattn.generate import GeneratedAnswer, Generator
from ragattn.limits import LimitChecker, Limits
from ragattn.proxy import Proxy
from ragattn.retrieve.corpus import Hit
from ragattn.types import Budget, Document, KeptSpan

logger = logging.getLogger(__name__)
T = TypeVar("T")

ContextOrder = Literal["best_first", "best_last", "edges"]
ORDERS: tuple[ContextOrder, ...] = ("best_first", "best_last", "edges")
DEFAULT_ORDER: ContextOrder = "edges"
"""The best measured order (docs/benchmarks/pipeline.md: 15 HotpotQA distractor-dev questions over
a pooled index, local 135M generator): mean answer F1 over whole and compressed contexts 0.165 for
``edges``, 0.150 ``best_first``, 0.125 ``best_last``; within the noise of 15 questions."""
Flow = Literal["one_read", "two_pass"]
FLOWS: tuple[Flow, ...] = ("one_read", "two_pass")
DEFAULT_FLOW: Flow = "one_read"
"""One read of every candidate ranks and prunes (the context for the generator, measured in
BENCHMARKS.md, "What reaches the generator")."""
FLOW_DEFAULTS: dict[Flow, tuple[int | None, float]] = {
    "one_read": (None, 0.2),
    "two_pass": (5, 0.5),
}
"""``(top_n, ratio)`` of each flow when the caller gives none: one read keeps a fifth of the
tokens of every candidate; two passes keep half of the best five passages."""
Mode = Literal["hybrid", "bm25", "dense"]
RunBlocking = Callable[[Callable[[], Any]], Awaitable[Any]]
"""Runs a blocking model call off the event loop, e.g. the service's model worker."""

NO_INDEX_HELP = (
    "build an index first, e.g. over the shipped demo corpus: "
    "ragattn index build --corpus {demo} --out .ragattn/demo-index "
    "(or any folder of .txt/.md files or a JSONL corpus), then pass --index .ragattn/demo-index"
)


class SearchIndex(Protocol):
    """What the pipeline needs from an index (:class:`ragattn.retrieve.Index` is one)."""

    def search(self, query: str, k: int = 10, *, mode: Mode = "hybrid") -> list[Hit]: ...


def order_context(items: Sequence[T], order: ContextOrder) -> list[T]:
    """Arrange ``items`` (given best first) for the generator's context.

    - ``best_first``: 1, 2, 3, 4, 5
    - ``best_last``: 5, 4, 3, 2, 1 (the best passage nearest the question)
    - ``edges``: 1, 3, 5, 4, 2: the best two at both ends, the weakest in the middle, where long
      contexts are used least ("lost in the middle").

    Raises:
        InvalidInputError: an unknown order.
    """
    if order == "best_first":
        return list(items)
    if order == "best_last":
        return list(reversed(items))
    if order == "edges":
        return [*items[0::2], *reversed(items[1::2])]
    raise InvalidInputError(f"unknown context order {order!r}; choose one of {', '.join(ORDERS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineOptions:
    """Per-call knobs, checked once here.

    Attributes:
        flow: ``one_read`` (default): one proxy read of every candidate ranks them and keeps
            their best sentences; ``two_pass``: rerank, keep ``top_n``, compress those.
        top_k: candidates retrieved from the index.
        top_n: passages kept after ranking (or the first ``top_n`` hits without a ranker);
            default by flow (:data:`FLOW_DEFAULTS`: every candidate for one read, 5 for two
            passes), resolved here.
        ratio: fraction of context tokens the compressor keeps, in (0, 1] (of every candidate's
            tokens for one read, of the ``top_n`` passages' for two passes); default by flow
            (0.2 and 0.5), resolved here; as the compressor takes it: ``budget``.
        order: how the kept passages are arranged for the generator (:func:`order_context`).
        mode: the index's search mode: ``hybrid``, ``bm25`` or ``dense``.
        rerank: use the pipeline's reranker (ignored when it has none).
        compress: use the pipeline's compressor (ignored when it has none).
    """

    flow: Flow = DEFAULT_FLOW
    top_k: int = 20
    top_n: int | None = None
    ratio: float | None = None
    order: ContextOrder = DEFAULT_ORDER
    mode: Mode = "hybrid"
    rerank: bool = True
    compress: bool = True
    budget: Budget = field(init=False, repr=False, compare=False)

    def params(self) -> dict[str, Any]:
        """The options as given (for cache keys): every field but the derived ``budget``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def __post_init__(self) -> None:
        if self.flow not in FLOWS:
            raise InvalidInputError(f"unknown flow {self.flow!r}; choose one of {', '.join(FLOWS)}")
        default_top_n, default_ratio = FLOW_DEFAULTS[self.flow]
        if self.top_n is None:
            object.__setattr__(self, "top_n", default_top_n)
        ratio = default_ratio if self.ratio is None else self.ratio
        object.__setattr__(self, "ratio", ratio)
        for name in ("top_k", "top_n"):
            value = getattr(self, name)
            if value is None and name == "top_n":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        try:
            budget = Budget(kind="ratio", value=ratio)
        except InvalidInputError as exc:
            raise InvalidInputError(f"ratio must be in (0, 1], got {self.ratio!r}") from exc
        object.__setattr__(self, "budget", budget)
        if self.order not in ORDERS:
            raise InvalidInputError(
                f"unknown context order {self.order!r}; choose one of {', '.join(ORDERS)}"
            )
        if self.mode not in ("hybrid", "bm25", "dense"):
            raise InvalidInputError(f"unknown search mode {self.mode!r}; use hybrid, bm25, dense")


def hit_document(hit: Hit) -> Document:
    """The :class:`Document` a reranker or compressor scores for a retrieval hit."""
    return Document(text=hit.text, id=hit.doc_id, title=hit.title)


@dataclass(frozen=True, slots=True)
class Question:
    """A question already checked (non-empty, within the limits) by
    :meth:`RAGPipeline.check_question`: every stage takes it as it is.

    The service checks a question on its tokenizer thread, then hands this to the pipeline, so no
    stage tokenizes it a second time.
    """

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One retrieved passage after the (optional) rerank.

    Attributes:
        hit: the index's hit (id, first-stage score and rank, full text).
        document: the passage as scored: the hit's text, cut to ``limits.max_tokens_per_doc``.
        relevance_score: the reranker's score in [0, 1]; ``None`` when reranking was off.
    """

    hit: Hit
    document: Document
    relevance_score: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrieval:
    """The result of :meth:`RAGPipeline.retrieve`: candidates best first, at most ``top_n``.

    Attributes:
        candidates: rerank order (or first-stage order when not reranked).
        reranked: the reranker ordered them.
        ranked_by: the reranker's method when it did (its results' ``method``), else None.
        warnings: truncations and the reranker's warnings.
        retrieve_s / rerank_s: wall-clock seconds of each stage.
    """

    candidates: tuple[Candidate, ...]
    reranked: bool
    ranked_by: str | None = None
    warnings: tuple[str, ...] = ()
    retrieve_s: float = 0.0
    rerank_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One passage that reached the generator's candidate list (after reranking).

    Attributes:
        id: the document (chunk) id in the index.
        title: its title, if any.
        text: the full passage text.
        retrieval_score: first-stage score (units of the search mode: RRF sum, BM25, cosine).
        retrieval_rank: 1-based first-stage rank.
        relevance_score: the reranker's score in [0, 1]; ``None`` when reranking was off.
        kept_spans: sentences the compressor kept (character spans of ``text``); all of the text
            as one span when compression was off.
        kept_text: the text the generator saw for this passage (empty: nothing kept).
        context_position: 1-based position in the generator's context; ``None`` when nothing of
            the passage was kept.
    """

    id: str
    title: str | None
    text: str
    retrieval_score: float
    retrieval_rank: int
    relevance_score: float | None
    kept_spans: tuple[KeptSpan, ...]
    kept_text: str
    context_position: int | None = None

    def passage(self, *, compressed: bool = True) -> str:
        """The passage as given to the generator: ``"title: text"`` (or the text alone)."""
        body = self.kept_text if compressed else self.text
        if not body.strip():
            return ""
        return f"{self.title}: {body}" if self.title else body


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimings:
    """Wall-clock seconds per stage; a stage that did not run took 0.0. ``read`` is the one read
    that ranks and prunes together (the one-read flow, where ``rerank`` and ``compress`` stay
    0.0)."""

    retrieve: float = 0.0
    rerank: float = 0.0
    compress: float = 0.0
    read: float = 0.0
    cache: float = 0.0
    generate: float = 0.0
    total: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedContext:
    """Retrieval, reranking and compression for one question: the generator's candidate passages.

    ``sources`` are best first (the one read's ranking, the reranker's, or first-stage order).
    Token counts are of the passage texts joined by a blank line, in ``tokenizer``. ``flow`` is
    the flow that ran (``one_read`` falls back to ``two_pass`` without a compressor), and
    ``ranked_by`` the method that ordered the sources (None: first-stage order).
    """

    question: str
    sources: tuple[Source, ...]
    flow: Flow = DEFAULT_FLOW
    ranked_by: str | None = None
    tokens_before: int
    tokens_after: int
    tokenizer: str
    compressed: bool
    timings: StageTimings
    warnings: tuple[str, ...] = ()

    def context(self, order: ContextOrder, *, compressed: bool = True) -> list[Source]:
        """The sources whose passage is non-empty, arranged by ``order``."""
        kept = [s for s in self.sources if s.passage(compressed=compressed)]
        return order_context(kept, order)

    def passages(self, order: ContextOrder, *, compressed: bool = True) -> list[str]:
        """The generator's context passages in ``order`` (compressed text unless told not to)."""
        context = self.context(order, compressed=compressed)
        return [s.passage(compressed=compressed) for s in context]


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineResult:
    """An answer with where it came from and what each stage cost.

    Attributes:
        question: the question asked.
        answer: the generator's answer (from the cache on a hit: equal to the fresh one).
        sources: the candidates, best first, with scores and kept spans.
        flow: the flow that ran (:data:`FLOWS`).
        ranked_by: the method that ordered the sources (e.g. ``sentinel:document-probe`` for
            one read, ``minilm`` for the reranker); None: the first-stage order.
        order: the context order the generator saw.
        tokens_before / tokens_after: context tokens before and after compression (``tokenizer``).
        tokenizer: the tokenizer that counted (the proxy's, or ``whitespace`` without any).
        timings: seconds per stage.
        cache_hit: the answer came from the cache.
        warnings: truncations, window splits and pipeline notes, in stage order.
    """

    question: str
    answer: GeneratedAnswer
    sources: tuple[Source, ...]
    flow: Flow
    ranked_by: str | None
    order: ContextOrder
    tokens_before: int
    tokens_after: int
    tokenizer: str
    timings: StageTimings
    cache_hit: bool
    warnings: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """Fraction of context tokens kept (after / before; 1.0 for an empty context)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 1.0

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["ratio"] = self.ratio
        return out


@dataclass(slots=True)
class _Clock:
    started: float = field(default_factory=time.perf_counter)

    def lap(self) -> float:
        now = time.perf_counter()
        seconds, self.started = now - self.started, now
        return seconds


class RAGPipeline:
    """Retrieve from an index, rerank, compress, and answer with a generator, with a cache.

    Args:
        index: a loaded :class:`ragattn.retrieve.Index` (or anything with its ``search``).
        generator: the answering model (:class:`~ragattn.generate.LocalGenerator`,
            :class:`~ragattn.generate.OpenAIChatGenerator`, or any :class:`Generator`).
        reranker: a :class:`~ragattn.rerank.Reranker`; ``None`` keeps the first-stage order.
        compressor: a :class:`~ragattn.compress.Compressor`; ``None`` passes whole passages.
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
        generator: Generator,
        reranker: RerankEngine | None = None,
        compressor: CompressEngine | None = None,
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
        self._tokenizer, self._tokenizer_name = _resolve_tokenizer(
            tokenizer, compressor, reranker, generator
        )
        self._limits: LimitChecker | None = None
        if isinstance(limits, LimitChecker):
            self._limits = limits
        elif limits is not None and self._tokenizer is not None:
            self._limits = LimitChecker(self._tokenizer, limits)

    # -- stages --------------------------------------------------------------------------

    def check_question(self, question: str | Question, *, what: str = "question") -> Question:
        """``question`` checked once: non-empty and within ``limits.max_query_tokens``.

        Raises:
            InvalidInputError: an empty question.
            InputTooLargeError: the question is over ``limits.max_query_tokens``.
        """
        if isinstance(question, Question):
            return question
        if not isinstance(question, str) or not question.strip():
            raise InvalidInputError(f"{what} must be a non-empty string")
        if self._limits is not None:
            self._limits.check_query(question, what=what)
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
        clock = _Clock()
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
            ranked = self.reranker.rerank(question, docs, top_n=keep)  # type: ignore[union-attr]
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
        and compression is on), else rerank, keep ``top_n``, compress those.

        Raises:
            InvalidInputError: an empty question or an invalid option for the index.
            InputTooLargeError: the question is over the pipeline's ``limits``.
        """
        opts = options or self.options
        question = self.check_question(question)
        compressing = self.compressor is not None and opts.compress
        if opts.flow == "one_read" and compressing:
            return self._one_read(question, opts)
        return self._two_pass(question, opts)

    def _one_read(self, question: Question, opts: PipelineOptions) -> PreparedContext:
        """Retrieve ``top_k`` hits; one read ranks them all and keeps their best sentences
        under the budget; sources are the best ``top_n`` (all by default), best first."""
        found = self.retrieve(question, k=opts.top_k, mode=opts.mode, rerank=False)
        warnings = list(found.warnings)
        hits = [c.hit for c in found.candidates]
        docs = [c.document for c in found.candidates]
        if not hits:
            warnings.append("retrieval found no passage; the generator answers without context")
            return self._nothing_found(question, found, warnings)
        clock = _Clock()
        args = VerbArgs(
            verb="rerank_compress", top_n=opts.top_n, budget=opts.budget, tokenizer=self._tokenizer
        )
        ranked, result = self.compressor.rerank_and_compress(  # type: ignore[union-attr]
            question.text, docs, **args.keywords()
        )
        t_read = clock.lap()
        warnings.extend(ranked.warnings)
        warnings.extend(result.warnings)
        by_index = {d.index: d for d in result.documents}
        return PreparedContext(
            question=question.text,
            sources=tuple(
                self._source(
                    hits[r.index],
                    r.relevance_score,
                    by_index[r.index].kept_spans,
                    by_index[r.index].text,
                )
                for r in ranked
            ),
            flow="one_read",
            ranked_by=ranked.method or None,
            tokens_before=result.origin_tokens,
            tokens_after=result.compressed_tokens,
            tokenizer=self._tokenizer_name,
            compressed=True,
            timings=StageTimings(retrieve=found.retrieve_s, read=t_read),
            warnings=tuple(warnings),
        )

    def _two_pass(self, question: Question, opts: PipelineOptions) -> PreparedContext:
        """Retrieve, rerank, keep ``top_n``, compress those (the flow before one read)."""
        found = self.retrieve(
            question, k=opts.top_k, mode=opts.mode, rerank=opts.rerank, top_n=opts.top_n
        )
        warnings = list(found.warnings)
        if opts.top_n is not None and opts.top_n > opts.top_k:
            warnings.insert(
                0, f"top_n={opts.top_n} is more than top_k={opts.top_k}: at most top_k passages"
            )
        if not found.candidates:
            warnings.append("retrieval found no passage; the generator answers without context")
        clock = _Clock()
        hits = [c.hit for c in found.candidates]
        relevance = [c.relevance_score for c in found.candidates]
        kept = [c.document for c in found.candidates]
        compressed = self.compressor is not None and opts.compress and bool(kept)
        t_compress = 0.0
        if compressed:
            args = VerbArgs(verb="compress", budget=opts.budget, tokenizer=self._tokenizer)
            result = self.compressor.compress(  # type: ignore[union-attr]
                question.text, kept, **args.keywords()
            )
            spans = [d.kept_spans for d in result.documents]
            kept_texts = [d.text for d in result.documents]
            before, after = result.origin_tokens, result.compressed_tokens
            warnings.extend(result.warnings)
            t_compress = clock.lap()
        else:
            spans = [
                (KeptSpan(doc_index=n, start=0, end=len(d.text), score=1.0, text=d.text),)
                for n, d in enumerate(kept)
            ]
            kept_texts = [d.text for d in kept]
            before = after = self._count("\n\n".join(d.text for d in kept))
        return PreparedContext(
            question=question.text,
            sources=tuple(
                self._source(hit, relevance[n], spans[n], kept_texts[n])
                for n, hit in enumerate(hits)
            ),
            flow="two_pass",
            ranked_by=found.ranked_by,
            tokens_before=before,
            tokens_after=after,
            tokenizer=self._tokenizer_name,
            compressed=compressed,
            timings=StageTimings(
                retrieve=found.retrieve_s, rerank=found.rerank_s, compress=t_compress
            ),
            warnings=tuple(warnings),
        )

    def _nothing_found(
        self, question: Question, found: Retrieval, warnings: Sequence[str]
    ) -> PreparedContext:
        """The one-read context when retrieval found nothing: no sources, nothing read."""
        return PreparedContext(
            question=question.text,
            sources=(),
            flow="one_read",
            tokens_before=0,
            tokens_after=0,
            tokenizer=self._tokenizer_name,
            compressed=False,
            timings=StageTimings(retrieve=found.retrieve_s),
            warnings=tuple(warnings),
        )

    @staticmethod
    def _source(
        hit: Hit, relevance: float | None, spans: Sequence[KeptSpan], kept_text: str
    ) -> Source:
        return Source(
            id=str(hit.doc_id),
            title=hit.title,
            text=hit.text,
            retrieval_score=float(hit.score),
            retrieval_rank=int(hit.rank),
            relevance_score=relevance,
            kept_spans=tuple(spans),
            kept_text=kept_text,
        )

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
        clock = _Clock()
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
            sources=sources,
            flow=prepared.flow,
            ranked_by=prepared.ranked_by,
            order=opts.order,
            tokens_before=prepared.tokens_before,
            tokens_after=prepared.tokens_after,
            tokenizer=prepared.tokenizer,
            timings=timings,
            cache_hit=hit,
            warnings=prepared.warnings,
        )

    def _count(self, text: str) -> int:
        if not text:
            return 0
        if self._tokenizer is None:
            return len(text.split())
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


def _encode_answer(answer: GeneratedAnswer) -> bytes:
    return json.dumps(answer.to_dict()).encode("utf-8")


def _decode_answer(raw: bytes) -> GeneratedAnswer:
    return GeneratedAnswer(**json.loads(raw.decode("utf-8")))


async def _call(run_blocking: RunBlocking | None, fn: Callable[[], T]) -> T:
    if run_blocking is None:
        return fn()
    result: T = await run_blocking(fn)
    return result


def _resolve_tokenizer(tokenizer: Any, *owners: Any) -> tuple[Any, str]:
    if isinstance(tokenizer, Proxy):
        return tokenizer.tokenizer, tokenizer.name
    if tokenizer is not None:
        return tokenizer, str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__))
    for owner in owners:
        proxy = getattr(owner, "proxy", None)
        if proxy is not None:
            return proxy.tokenizer, proxy.name
    return None, "whitespace"


def demo_corpus_dir() -> Path:
    """The shipped demo corpus: a dozen short Markdown passages (package data)."""
    return Path(__file__).parent / "data" / "demo_corpus"


def no_index_help() -> str:
    """How to build an index, naming the shipped demo corpus."""
    return NO_INDEX_HELP.format(demo=demo_corpus_dir())


def load_index(directory: str | Path | None) -> Any:
    """Load a :class:`ragattn.retrieve.Index`, or explain how to build one.

    Raises:
        InvalidInputError: no directory given, it does not exist, or it is not a readable index.
    """
    from ragattn.retrieve import Index

    if directory is None:
        raise InvalidInputError("no retrieval index given; " + no_index_help())
    path = Path(directory)
    if not path.is_dir():
        raise InvalidInputError(f"no index at {path}; " + no_index_help())
    return Index.load(path)


__all__ = [
    "DEFAULT_FLOW",
    "DEFAULT_ORDER",
    "FLOWS",
    "FLOW_DEFAULTS",
    "ORDERS",
    "Candidate",
    "ContextOrder",
    "Flow",
    "PipelineOptions",
    "PipelineResult",
    "PreparedContext",
    "Question",
    "RAGPipeline",
    "Retrieval",
    "SearchIndex",
    "Source",
    "StageTimings",
    "demo_corpus_dir",
    "hit_document",
    "load_index",
    "no_index_help",
    "order_context",
]
