"""The read of a compress call: one sequence of named stages, from the documents to the result.

Both verbs of the :class:`~ragattn.compress.Compressor` (``compress`` and
``rerank_and_compress``) are :meth:`ContextRead.run`, top to bottom:

1. ``sentences``: the documents split into sentences (:func:`sentence_units`, by the call's
   ``language``; a Markdown document along its structure, :mod:`ragattn.markdown_units`), the
   units every later stage scores, and the read's plan (:class:`ReadPlan`, counted in the
   proxy's tokens where a cascade may cut): which passes run, over which documents; every later
   stage reads it and none decides again;
2. ``candidates``: MiniLM's one pass over every candidate document, where the plan runs it
   (:class:`~ragattn.document_probe.CandidateCosines`): where the document probe reads its base
   (a ranking, or a selection fitted with MiniLM) or the cut ranks documents or pools sentences
   from it; the same pass a MiniLM rerank of the candidates runs, and the only work of the read
   that grows with every candidate. Nothing else of the read encodes a document;
3. ``cut``: the cascade's first pass picks what attention reads (:mod:`ragattn.compress.cascade`;
   the whole context when it does not cut): its sentence pass covers the documents it ranks best
   only, at most its ``precut`` times what attention reads;
4. ``forward``: the proxy forward over what the cut kept and the sentence probe's keep scores
   (a method that reads no attention scores its sentences here without one);
5. ``documents``: the read's document relevance, computed once
   (:class:`~ragattn.document_probe.DocumentRelevance`): the document probe's attention
   correction of the documents read, from the forward's features, with the candidates' MiniLM
   cosines (nothing to do where no selection or ranking reads them);
6. ``selection``: each sentence's keep score weighs its document's score (the document-aware
   selection, :mod:`ragattn.compress.selection`; with a ``first_stage_order``, that score blended
   with the order's rank prior), and the sentences the cut dropped get theirs;
7. ``ranking`` (``rerank_and_compress`` only): the documents ranked from the same forward, the
   best ``top_n`` kept in rank order;
8. ``assembly``: the sentences the budget keeps joined into the result
   (:mod:`ragattn.compress.assembly`).

Each stage's wall-clock seconds (:func:`time.perf_counter`) go with the result, in this order, as
:attr:`~ragattn.types.CompressionResult.stage_seconds`; :data:`STAGES` is their vocabulary. A
stage with nothing to do for a call (no cut, no document probe) is still reported, with the few
microseconds its check took, so every compression names the same stages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ragattn.compress.assembly import (
    Counting,
    compression_result,
    entity_units,
    ranked_results,
)
from ragattn.compress.cascade import Cascade, Cut, CutSizes, MiniLMPass
from ragattn.compress.features import SentenceFeatures, Unit
from ragattn.compress.read_scores import KeepScores, Ranking, best_sentence_ranking, reduced
from ragattn.compress.scorers import ProbeScorer, UnitScorer
from ragattn.compress.selection import DocumentSelection, with_rank_prior
from ragattn.contract import VerbArgs
from ragattn.document_probe import (
    CandidateCosines,
    DocumentProbe,
    DocumentRelevance,
    attention_correction,
    document_and_unit_cosines,
)
from ragattn.embed import document_cosines, titled_text
from ragattn.first_stage import check_first_stage_order, rank_prior
from ragattn.languages import AUTO
from ragattn.lexical import bm25_scores, sigmoid
from ragattn.markdown_units import document_units
from ragattn.sentence_attention import units_of
from ragattn.types import Budget, CompressionResult, Document, RerankResults, StageSeconds

Stage = Literal[
    "sentences", "candidates", "cut", "forward", "documents", "selection", "ranking", "assembly"
]
STAGES: tuple[Stage, ...] = (
    "sentences",
    "candidates",
    "cut",
    "forward",
    "documents",
    "selection",
    "ranking",
    "assembly",
)
"""The read's stages, in the order they run (the module docstring says what each does);
``compress`` reports all but ``ranking``."""


class StageClock:
    """Wall-clock seconds of each stage of one read, in the order the stages ran.

    Args:
        clock: seconds on a monotonic clock (default :func:`time.perf_counter`).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._laps: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: Stage) -> Iterator[None]:
        """Time the block as stage ``name`` (a stage that raises is not reported)."""
        started = self._clock()
        yield
        self._laps.append((name, self._clock() - started))

    def seconds(self) -> StageSeconds:
        """``(stage, seconds)`` pairs, in the order the stages ran."""
        return tuple(self._laps)


def sentence_units(docs: Sequence[Document], language: str = AUTO) -> list[Unit]:
    """The units of ``docs``, document by document: a Markdown document's structural units
    (:func:`~ragattn.markdown_units.markdown_units`: whole code blocks or line-cut pieces, table
    rows, list items' and paragraphs' sentences), any other document's sentences
    (:func:`~ragattn.sentences.split_sentences`, unchanged); ``language`` (a code of
    :data:`~ragattn.sentences.LANGUAGES` or ``"auto"``: each document by its script) splits the
    prose."""
    return units_of(docs, lambda text: document_units(text, language=language))


FirstPass = Literal["minilm", "bm25"]
"""What the read's ``candidates`` stage scores documents with (:attr:`ReadParts.first_pass`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadParts:
    """What a read runs with: the compressor's loaded parts.

    Attributes:
        method: the compress method's name (``result.method``).
        scorer: the method's sentence scorer.
        cascade: the cut before attention reads (None: every context is read whole).
        lexical: the cascade's ``lexical`` first pass (loaded on first use).
        tokenizer: the proxy's tokenizer (what the cut counts in, and the document probe's
            sentence widths).
        document_probe: the proxy's document probe where this method's features feed it, or
            None (loaded on first use: a call that reads no document scores never loads it).
        selection: the document-aware selection of calls with several documents, or None
            (loaded on first use).
        counting: the tokenizer a result counts in, given the call's ``tokenizer`` argument.
        max_chunk_tokens: the most proxy tokens one forward chunk reads (for the warnings).
        first_stage_prior: the weight of a first stage's rank prior in the selection's document
            score, in standard deviations of the document probe's score per standard deviation
            of the prior (:func:`~ragattn.compress.selection.with_rank_prior`; 0: the order is
            not read).
        first_pass: what the ``candidates`` stage reads the documents with: ``"minilm"`` (the
            packaged English MiniLM's cosines) or ``"bm25"`` (BM25 over the call's documents and
            sentences, :func:`~ragattn.lexical.bm25_scores`, in [0, 1], counting words, and
            character bigrams where a script writes no spaces). Both are z-scored over the call
            where they are read, so either serves as the document probe's base.
    """

    method: str
    scorer: UnitScorer
    cascade: Cascade | None
    lexical: Callable[[], ProbeScorer]
    tokenizer: Callable[[], Any]
    document_probe: Callable[[], DocumentProbe | None]
    selection: Callable[[], DocumentSelection | None]
    counting: Callable[[Any], Counting]
    max_chunk_tokens: int
    first_stage_prior: float = 0.0
    first_pass: FirstPass = "minilm"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadCall:
    """The call one read answers: the ``query``, its documents (``docs``), the verb's checked
    arguments (``args``: the budget, the language, ``top_n``, ...) and whether the documents are
    ranked (``rank``: ``rerank_and_compress``)."""

    query: str
    docs: Sequence[Document]
    args: VerbArgs
    rank: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadPlan:
    """What one read runs, decided once from the call (its documents and sentences, the
    method's parts, the budget) before any model reads; every stage reads it (the query
    included), none decides again (:meth:`ContextRead.plan`).

    Attributes:
        call: the call the read answers.
        units: the call's sentences (the ``sentences`` stage's).
        sizes: the cascade's sizes of the cut, in proxy tokens (None: attention reads the whole
            context).
        minilm: MiniLM's one pass over every document, in the ``candidates`` stage (None: no
            pass): where the document probe reads its base, or the cut ranks documents or pools
            sentences from it.
        document_probe: the document probe where the forward's features feed it and a ranking
            or a selection reads it, else None.
        selection: the document-aware selection of a call with several documents, else None
            (it applies where attention reads several: :attr:`AttendedContext.selection`).
    """

    call: ReadCall
    units: Sequence[Unit]
    sizes: CutSizes | None
    minilm: MiniLMPass | None
    document_probe: DocumentProbe | None
    selection: DocumentSelection | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AttendedContext:
    """A call's context and the part of it attention reads (the ``cut`` stage's output).

    Attributes:
        docs, units: the call's documents and sentences.
        cut: the cascade's cut, or None when attention reads the whole context.
        read_docs, read_units: what attention reads (each document with its read sentences
            only; the call's own documents and sentences without a cut).
        doc_map: each read document's position in ``docs``.
        cosines: the ``candidates`` stage's MiniLM cosines of every document of ``docs``, or
            None where the plan ran no pass.
        selection: the plan's selection where attention reads several documents, else None.
        document_probe: the plan's document probe where a ranking or this selection reads
            it (the forward then keeps its features), else None.
    """

    docs: Sequence[Document]
    units: Sequence[Unit]
    cut: Cut | None
    read_docs: list[Document]
    read_units: list[Unit]
    doc_map: list[int]
    cosines: CandidateCosines | None = None
    selection: DocumentSelection | None = None
    document_probe: DocumentProbe | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Forward:
    """The ``forward`` stage's output: the read sentences' scores (the sentence probe's keep
    probabilities, or a method's own keep scores, in [0, 1]), the proxy chunks read, and the
    sentence features where the document probe reads them (None otherwise)."""

    sentence: np.ndarray
    chunks: int
    features: SentenceFeatures | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Selected:
    """What the assembly compresses: documents in context order, each one's input position, their
    sentences (``unit.doc`` indexing ``docs``) and the read of those sentences."""

    docs: Sequence[Document]
    indices: Sequence[int]
    units: Sequence[Unit]
    read: KeepScores


class ContextRead:
    """One compress call's read, stage by stage (the module docstring's stages).

    Args:
        parts: the compressor's loaded parts.
        clock: what the stages are timed with (seconds; default :func:`time.perf_counter`).
    """

    def __init__(self, parts: ReadParts, *, clock: Callable[[], float] = time.perf_counter):
        self.parts = parts
        self._clock = clock

    def compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> CompressionResult:
        """``compress``: every document compressed under ``args``' budget."""
        return self.run(ReadCall(query=query, docs=documents, args=args, rank=False))[1]

    def rerank_and_compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[RerankResults, CompressionResult]:
        """``rerank_and_compress``: the documents ranked and the best ``top_n`` compressed, from
        one read."""
        ranked, result = self.run(ReadCall(query=query, docs=documents, args=args, rank=True))
        assert ranked is not None  # rank=True ranks
        return ranked, result

    def run(self, call: ReadCall) -> tuple[RerankResults | None, CompressionResult]:
        """The read of ``call``: ranked documents (where it ranks, else None) and the
        compression, whose ``stage_seconds`` are this call's."""
        clock = StageClock(self._clock)
        args, documents = call.args, call.docs
        order = check_first_stage_order(args.first_stage_order, len(documents))
        prior = None if order is None else rank_prior(order)
        with clock.stage("sentences"):
            units = sentence_units(documents, args.language)
            plan = self.plan(call, units)
        with clock.stage("candidates"):
            cosines = self.candidates(plan)
        with clock.stage("cut"):
            attended = self.cut(plan, cosines)
        with clock.stage("forward"):
            forward = self.forward(plan, attended)
        with clock.stage("documents"):
            relevance = self.document_relevance(attended, forward)
        with clock.stage("selection"):
            read = self.selection(plan, attended, forward, relevance, prior)
        ranked = None
        selected = Selected(docs=documents, indices=range(len(documents)), units=units, read=read)
        if call.rank:
            with clock.stage("ranking"):
                ranked, selected = self.ranking(attended, relevance, read, args)
        with clock.stage("assembly"):
            # entity sentences are forced into ``compress`` only (ranking keeps its own order)
            entities = args.keep_entities and not call.rank
            forced = entity_units(call.query, documents, units) if entities else []
            result = self.assembly(selected, args, forced)
        return ranked, replace(result, stage_seconds=clock.seconds())

    def keep_scores(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], budget: Budget
    ) -> KeepScores:
        """The sentences' keep scores for ``units`` under ``budget`` (the stages from
        ``candidates`` to ``selection``, untimed): in [0, 1], 0 for a sentence the cascade
        dropped."""
        args = VerbArgs(verb="compress", budget=budget)
        plan = self.plan(ReadCall(query=query, docs=docs, args=args, rank=False), units)
        cosines = self.candidates(plan)
        attended = self.cut(plan, cosines)
        forward = self.forward(plan, attended)
        relevance = self.document_relevance(attended, forward)
        return self.selection(plan, attended, forward, relevance)

    # -- the stages ------------------------------------------------------------------------

    def plan(self, call: ReadCall, units: Sequence[Unit]) -> ReadPlan:
        """The read's plan (:class:`ReadPlan`), from the call (its documents, its budget), its
        sentences ``units`` and the compressor's parts: the cascade's sizes (counted in the
        proxy's tokens), whether the forward keeps features for the document probe, and MiniLM's
        pass where the probe's base (a ranking, or a selection fitted with MiniLM) or the cut
        reads it."""
        parts, docs, rank = self.parts, call.docs, call.rank
        budget = call.args.compress_budget
        cascade = parts.cascade
        sizes = None
        if cascade is not None:
            sizes = cascade.sizes(docs, units, budget, tokenizer=parts.tokenizer())
        selection = parts.selection() if len(docs) > 1 else None
        probe = None
        if isinstance(parts.scorer, ProbeScorer) and (rank or selection is not None):
            probe = parts.document_probe()
        base = rank or (selection is not None and selection.reads_minilm)
        minilm = cascade.minilm_pass(sizes) if cascade is not None else None
        if minilm is None and units and probe is not None and base:
            pooled = cascade is not None and (cascade.scorer, cascade.dense) == (
                "lexical",
                "pooled",
            )
            minilm = "pooled" if pooled else "documents"
        return ReadPlan(
            call=call,
            units=units,
            sizes=sizes,
            minilm=minilm,
            document_probe=probe,
            selection=selection,
        )

    def candidates(self, plan: ReadPlan) -> CandidateCosines | None:
        """``candidates``: MiniLM's one pass of the read (:attr:`ReadPlan.minilm`), the cosine
        of every document to the query (title and text; with each sentence's pooled from the
        same pass where the cascade reads them, ``dense`` ``"pooled"``). None where the plan
        runs none."""
        if plan.minilm is None:
            return None
        query, docs, units = plan.call.query, plan.call.docs, plan.units
        if self.parts.first_pass == "bm25":
            documents = bm25_scores(query, [titled_text(d) for d in docs])
            if plan.minilm == "documents":
                return CandidateCosines(documents=documents)
            texts = [docs[u.doc].text[u.start : u.end] for u in units]
            return CandidateCosines(documents=documents, units=bm25_scores(query, texts))
        if plan.minilm == "pooled":
            documents, sentences = document_and_unit_cosines(query, docs, units)
            return CandidateCosines(documents=documents, units=sentences)
        return CandidateCosines(documents=document_cosines(query, docs))

    def cut(self, plan: ReadPlan, cosines: CandidateCosines | None = None) -> AttendedContext:
        """``cut``: what attention reads, the cascade's cut of a long context (the plan's
        sizes) or the whole context; ``cosines``, the ``candidates`` stage's. The selection and
        the document probe apply where the plan has them and attention reads several documents
        (the probe also wherever the call ranks)."""
        cascade, sizes = self.parts.cascade, plan.sizes
        docs, units = plan.call.docs, plan.units
        cut = None
        if cascade is not None and sizes is not None:
            lexical = self.parts.lexical
            cut = cascade.cut(plan.call.query, docs, units, sizes, lexical=lexical, cosines=cosines)
        if cut is None:
            read_docs, read_units = list(docs), list(units)
            doc_map = list(range(len(docs)))
        else:
            read_docs, read_units = reduced(docs, units, cut.read)
            doc_map = sorted({units[i].doc for i in cut.read})
        selection = plan.selection if len(read_docs) > 1 else None
        reads_probe = selection is not None or plan.call.rank
        return AttendedContext(
            docs=docs,
            units=units,
            cut=cut,
            read_docs=read_docs,
            read_units=read_units,
            doc_map=doc_map,
            cosines=cosines,
            selection=selection,
            document_probe=plan.document_probe if reads_probe else None,
        )

    def forward(self, plan: ReadPlan, attended: AttendedContext) -> Forward:
        """``forward``: the proxy reads what the cut kept; the sentence probe's keep scores, with
        the features where the document probe reads them
        (:attr:`AttendedContext.document_probe`)."""
        query, docs, units = plan.call.query, attended.read_docs, attended.read_units
        scorer = self.parts.scorer
        if not units:
            return Forward(sentence=np.zeros(0), chunks=0, features=None)
        if attended.document_probe is None or not isinstance(scorer, ProbeScorer):
            scores, chunks = scorer.score(query, docs, units)
            return Forward(sentence=scores, chunks=chunks, features=None)
        sentence, features = scorer.score_with_features(query, docs, units)
        return Forward(sentence=sentence, chunks=features.chunks, features=features)

    def document_relevance(
        self, attended: AttendedContext, forward: Forward
    ) -> DocumentRelevance | None:
        """``documents``: the read's document relevance (None where the forward took no
        features): the document probe's attention correction of the documents attention read,
        computed once from the forward's features, with the ``candidates`` stage's MiniLM
        cosines of every document, for the selection and the ranking to combine."""
        features, probe = forward.features, attended.document_probe
        if features is None or probe is None:
            return None
        correction = attention_correction(
            probe,
            self.parts.tokenizer(),
            attended.read_docs,
            attended.read_units,
            features.names,
            features.matrix,
            features.config,
        )
        cosines = attended.cosines.documents if attended.cosines is not None else None
        return DocumentRelevance(
            probe=probe, correction=correction, read=attended.doc_map, cosines=cosines
        )

    def selection(
        self,
        plan: ReadPlan,
        attended: AttendedContext,
        forward: Forward,
        relevance: DocumentRelevance | None,
        prior: np.ndarray | None = None,
    ) -> KeepScores:
        """``selection``: each read sentence's keep score weighs its document's (where a
        selection applies; ``prior``, the call's rank prior by input position, blended into the
        document score by :attr:`ReadParts.first_stage_prior`), then every sentence of the call
        gets one: the cut's dropped ones 0, or below every read one (the cut's warning says
        which)."""
        scores = forward.sentence
        selection = attended.selection
        if selection is not None and relevance is not None:
            raw = relevance.of_read(minilm=selection.reads_minilm)
            if prior is not None and self.parts.first_stage_prior > 0:
                raw = with_rank_prior(raw, prior[attended.doc_map], self.parts.first_stage_prior)
            read_docs, read_units = attended.read_docs, attended.read_units
            scores = selection.weigh(plan.call.query, read_docs, read_units, scores, raw)
        cut, cascade = attended.cut, self.parts.cascade
        if cut is None or cascade is None:  # a cut implies a cascade
            return KeepScores(scores=scores, chunks=forward.chunks, notes=())
        dropped = len(attended.units) - len(cut.read)
        note = (
            f"the cascade ({cascade.name}) let attention read {len(cut.read)} of "
            f"{len(attended.units)} sentences; the {dropped} it dropped score "
            + (
                "below every read sentence, in its first pass's order (the budget is "
                f"above what attention reads, at most {cascade.ceiling} proxy tokens)"
                if cut.fill
                else "0"
            )
        )
        return KeepScores(scores=cut.fill_scores(scores), chunks=forward.chunks, notes=(note,))

    def ranking(
        self,
        attended: AttendedContext,
        relevance: DocumentRelevance | None,
        read: KeepScores,
        args: VerbArgs,
    ) -> tuple[RerankResults, Selected]:
        """``ranking``: the documents ranked from the read (:meth:`document_ranking`), and the
        best ``args.top_n`` of them, in rank order, with their sentences, for the assembly."""
        ranking = self.document_ranking(attended, relevance, read)
        docs, units = attended.docs, attended.units
        results = ranked_results(
            docs, ranking.raw, ranking.relevance, args.top_n, f"{self.parts.method}:{ranking.how}"
        )
        ranked = [r.index for r in results]
        position = {d: n for n, d in enumerate(ranked)}
        keep = [k for k, u in enumerate(units) if u.doc in position]
        sub_units = [Unit(position[units[k].doc], units[k].start, units[k].end) for k in keep]
        sub_read = KeepScores(scores=read.scores[keep], chunks=read.chunks, notes=read.notes)
        selected = Selected(
            docs=[docs[i] for i in ranked], indices=ranked, units=sub_units, read=sub_read
        )
        return results, selected

    def document_ranking(
        self, attended: AttendedContext, relevance: DocumentRelevance | None, read: KeepScores
    ) -> Ranking:
        """The documents' scores from the read, by input position.

        With the document probe (the read's relevance): :meth:`DocumentRelevance.of_call`,
        ``minilm_weight * z(MiniLM cosine)`` over every document plus the attention correction
        of the documents attention read; a document the cascade dropped whole gets the
        correction's mean, 0, so it is ranked by MiniLM alone. Without it, a document's best
        sentence keep score."""
        if relevance is None:
            return best_sentence_ranking(len(attended.docs), attended.units, read.scores)
        raw = relevance.of_call()
        return Ranking(raw=raw, relevance=sigmoid(raw), how="document-probe")

    def assembly(
        self, selected: Selected, args: VerbArgs, forced: Sequence[int]
    ) -> CompressionResult:
        """``assembly``: the sentences under the budget, joined
        (:func:`~ragattn.compress.assembly.compression_result`); the read's notes and its chunks
        go into the warnings."""
        read = selected.read
        notes = list(read.notes)
        if read.chunks > 1:
            notes.append(
                f"the context was read in {read.chunks} chunks of at most "
                f"{self.parts.max_chunk_tokens} proxy tokens"
            )
        return compression_result(
            selected.docs,
            selected.indices,
            selected.units,
            read.scores,
            args,
            counting=self.parts.counting(args.tokenizer),
            method=self.parts.method,
            forced=forced,
            notes=notes,
        )


__all__ = [
    "STAGES",
    "ContextRead",
    "Forward",
    "ReadCall",
    "ReadParts",
    "ReadPlan",
    "AttendedContext",
    "Selected",
    "Stage",
    "StageClock",
    "sentence_units",
]
