"""The read of a compress call: one sequence of named stages, from the documents to the result.

Both verbs of the :class:`~ragattn.compress.Compressor` (``compress`` and
``rerank_and_compress``) are :meth:`ContextRead.run`, top to bottom:

1. ``sentences``: the documents split into sentences (:func:`sentence_units`, by the call's
   ``language``; a Markdown document along its structure, :mod:`ragattn.markdown_units`), the
   units every later stage scores;
2. ``candidates``: MiniLM's one pass over every candidate document
   (:class:`~ragattn.document_probe.CandidateCosines`), where the document probe reads it: the
   same pass a MiniLM rerank of the candidates runs, and the only work of the read that grows
   with every candidate; the cut ranks documents by it and the document scores read it again
   (nothing to do for one document or a method without the document probe);
3. ``cut``: the cascade's first pass picks what attention reads (:mod:`ragattn.compress.cascade`;
   the whole context when it does not cut): its sentence pass covers the documents it ranks best
   only, at most its ``precut`` times what attention reads;
4. ``forward``: the proxy forward over what the cut kept and the sentence probe's keep scores
   (a method that reads no attention scores its sentences here without one);
5. ``documents``: the document probe's scores of the documents read, from the forward's features
   (:mod:`ragattn.document_probe`; nothing to do where no weighting or ranking reads them);
6. ``weighting``: each sentence's keep score weighs its document's score (the document-aware
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
from ragattn.compress.cascade import Cascade, Cut
from ragattn.compress.features import SentenceFeatures, Unit
from ragattn.compress.reading import Ranking, Read, best_sentence_ranking, reduced
from ragattn.compress.scorers import ProbeScorer, UnitScorer
from ragattn.compress.selection import DocumentWeighting, with_rank_prior
from ragattn.contract import VerbArgs
from ragattn.document_probe import (
    CandidateCosines,
    DocumentProbe,
    document_and_unit_cosines,
    document_cosines,
    score_documents,
    zscore_columns,
)
from ragattn.first_stage import check_first_stage_order, rank_prior
from ragattn.languages import AUTO
from ragattn.lexical import sigmoid
from ragattn.markdown_units import document_units
from ragattn.types import Budget, CompressionResult, Document, RerankResults, StageSeconds

Stage = Literal[
    "sentences", "candidates", "cut", "forward", "documents", "weighting", "ranking", "assembly"
]
STAGES: tuple[Stage, ...] = (
    "sentences",
    "candidates",
    "cut",
    "forward",
    "documents",
    "weighting",
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
    return [
        Unit(d, start, end)
        for d, doc in enumerate(docs)
        for start, end in document_units(doc.text, language=language)
    ]


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
        weighting: the document-aware selection of calls with several documents, or None
            (loaded on first use).
        counting: the tokenizer a result counts in, given the call's ``tokenizer`` argument.
        max_chunk_tokens: the most proxy tokens one forward chunk reads (for the warnings).
        first_stage_prior: the weight of a first stage's rank prior in the weighting's document
            score, in standard deviations of the document probe's score per standard deviation
            of the prior (:func:`~ragattn.compress.selection.with_rank_prior`; 0: the order is
            not read).
    """

    method: str
    scorer: UnitScorer
    cascade: Cascade | None
    lexical: Callable[[], ProbeScorer]
    tokenizer: Callable[[], Any]
    document_probe: Callable[[], DocumentProbe | None]
    weighting: Callable[[], DocumentWeighting | None]
    counting: Callable[[Any], Counting]
    max_chunk_tokens: int
    first_stage_prior: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """A call's context and the part of it attention reads (the ``cut`` stage's output).

    Attributes:
        docs, units: the call's documents and sentences.
        cut: the cascade's cut, or None when attention reads the whole context.
        read_docs, read_units: what attention reads (each document with its read sentences
            only; the call's own documents and sentences without a cut).
        doc_map: each read document's position in ``docs``.
        cosines: the ``candidates`` stage's MiniLM cosines of every document of ``docs``, or
            None where it ran no pass (a stage that needs them then runs it).
    """

    docs: Sequence[Document]
    units: Sequence[Unit]
    cut: Cut | None
    read_docs: list[Document]
    read_units: list[Unit]
    doc_map: list[int]
    cosines: CandidateCosines | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Forward:
    """The ``forward`` stage's output: the read sentences' scores (the sentence probe's keep
    probabilities, or a method's own keep scores, in [0, 1]), the proxy chunks read, and the
    sentence features where the document probe reads them (None otherwise)."""

    sentence: np.ndarray
    chunks: int
    features: SentenceFeatures | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentScores:
    """The ``documents`` stage's output: the document probe's raw scores of the read documents
    (log-odds units), with the MiniLM term (``minilm``) or its attention correction alone."""

    raw: np.ndarray
    minilm: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Selected:
    """What the assembly compresses: documents in context order, each one's input position, their
    sentences (``unit.doc`` indexing ``docs``) and the read of those sentences."""

    docs: Sequence[Document]
    indices: Sequence[int]
    units: Sequence[Unit]
    read: Read


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
        return self.run(query, documents, args, rank=False)[1]

    def rerank_and_compress(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[RerankResults, CompressionResult]:
        """``rerank_and_compress``: the documents ranked and the best ``top_n`` compressed, from
        one read."""
        ranked, result = self.run(query, documents, args, rank=True)
        assert ranked is not None  # rank=True ranks
        return ranked, result

    def run(
        self, query: str, documents: Sequence[Document], args: VerbArgs, *, rank: bool
    ) -> tuple[RerankResults | None, CompressionResult]:
        """The read: ranked documents (with ``rank``, else None) and the compression, whose
        ``stage_seconds`` are this call's."""
        clock = StageClock(self._clock)
        budget = args.compress_budget
        order = check_first_stage_order(args.first_stage_order, len(documents))
        prior = None if order is None else rank_prior(order)
        with clock.stage("sentences"):
            units = sentence_units(documents, args.language)
        with clock.stage("candidates"):
            cosines = self.candidates(query, documents, units, rank=rank)
        with clock.stage("cut"):
            reading = self.cut(query, documents, units, budget, cosines)
        with clock.stage("forward"):
            forward = self.forward(query, reading, rank=rank)
        with clock.stage("documents"):
            document_scores = self.document_scores(query, reading, forward)
        with clock.stage("weighting"):
            read = self.weighting(query, reading, forward, document_scores, prior)
        ranked = None
        selected = Selected(docs=documents, indices=range(len(documents)), units=units, read=read)
        if rank:
            with clock.stage("ranking"):
                ranked, selected = self.ranking(
                    query, reading, forward, document_scores, read, args
                )
        with clock.stage("assembly"):
            # entity sentences are forced into ``compress`` only (ranking keeps its own order)
            entities = args.keep_entities and not rank
            forced = entity_units(query, documents, units) if entities else []
            result = self.assembly(selected, args, forced)
        return ranked, replace(result, stage_seconds=clock.seconds())

    def keep_scores(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], budget: Budget
    ) -> Read:
        """The sentences' keep scores for ``units`` under ``budget`` (the stages from
        ``candidates`` to ``weighting``, untimed): in [0, 1], 0 for a sentence the cascade
        dropped."""
        cosines = self.candidates(query, docs, units, rank=False)
        reading = self.cut(query, docs, units, budget, cosines)
        forward = self.forward(query, reading, rank=False)
        document_scores = self.document_scores(query, reading, forward)
        return self.weighting(query, reading, forward, document_scores)

    # -- the stages ------------------------------------------------------------------------

    def candidates(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], *, rank: bool
    ) -> CandidateCosines | None:
        """``candidates``: MiniLM's cosine of every document to the query (title and text; with
        each sentence's pooled from the same pass where the cascade reads them, ``dense``
        ``"pooled"``), where the document probe reads them: ``rank``, or a weighting fitted with
        MiniLM over several documents (a cut that leaves attention one document leaves the pass
        unread). None where nothing reads them; a cut that ranks documents then runs the pass
        itself."""
        parts = self.parts
        if not units or not isinstance(parts.scorer, ProbeScorer):
            return None
        if parts.document_probe() is None:
            return None
        if not rank:
            weighting = parts.weighting() if len(docs) > 1 else None
            if weighting is None or not weighting.reads_minilm:
                return None
        cascade = parts.cascade
        if cascade is not None and cascade.scorer == "lexical" and cascade.dense == "pooled":
            documents, sentences = document_and_unit_cosines(query, docs, units)
            return CandidateCosines(documents=documents, units=sentences)
        return CandidateCosines(documents=document_cosines(query, docs))

    def cut(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        budget: Budget,
        cosines: CandidateCosines | None = None,
    ) -> Reading:
        """``cut``: what attention reads, the cascade's cut of a long context (counted in the
        proxy's tokens) or the whole context; ``cosines``, the ``candidates`` stage's."""
        cascade = self.parts.cascade
        cut = None
        if cascade is not None:
            cut = cascade.cut(
                query,
                docs,
                units,
                budget,
                tokenizer=self.parts.tokenizer(),
                lexical=self.parts.lexical,
                cosines=cosines,
            )
        if cut is None:
            return Reading(
                docs=docs,
                units=units,
                cut=None,
                read_docs=list(docs),
                read_units=list(units),
                doc_map=list(range(len(docs))),
                cosines=cosines,
            )
        read_docs, read_units = reduced(docs, units, cut.read)
        doc_map = sorted({units[i].doc for i in cut.read})
        return Reading(
            docs=docs,
            units=units,
            cut=cut,
            read_docs=read_docs,
            read_units=read_units,
            doc_map=doc_map,
            cosines=cosines,
        )

    def forward(self, query: str, reading: Reading, *, rank: bool) -> Forward:
        """``forward``: the proxy reads what the cut kept; the sentence probe's keep scores, with
        the features where the document probe reads them (a weighting applies, or ``rank``)."""
        docs, units = reading.read_docs, reading.read_units
        scorer = self.parts.scorer
        if not units:
            return Forward(sentence=np.zeros(0), chunks=0, features=None)
        probe = self._document_probe(reading, rank=rank)
        if probe is None or not isinstance(scorer, ProbeScorer):
            scores, chunks = scorer.score(query, docs, units)
            return Forward(sentence=scores, chunks=chunks, features=None)
        sentence, features = scorer.score_with_features(query, docs, units)
        return Forward(sentence=sentence, chunks=features.chunks, features=features)

    def document_scores(
        self, query: str, reading: Reading, forward: Forward
    ) -> DocumentScores | None:
        """``documents``: the document probe's raw scores of the read documents from the
        forward's features (None where it took none). A weighting fitted on the attention
        correction alone runs no MiniLM pass; otherwise, after a cut, MiniLM reads each whole
        document, not the sentences attention read of it."""
        features = forward.features
        probe = self.parts.document_probe() if features is not None else None
        if features is None or probe is None:
            return None
        weighting = self._weighting(reading)
        minilm = weighting.reads_minilm if weighting else True
        cosines = self._document_cosines(query, reading)[reading.doc_map] if minilm else None
        raw = self._probe_scores(probe, query, reading, features, minilm=minilm, cosines=cosines)
        return DocumentScores(raw=raw, minilm=minilm)

    def weighting(
        self,
        query: str,
        reading: Reading,
        forward: Forward,
        document_scores: DocumentScores | None,
        prior: np.ndarray | None = None,
    ) -> Read:
        """``weighting``: each read sentence's keep score weighs its document's (where a
        weighting applies; ``prior``, the call's rank prior by input position, blended into the
        document score by :attr:`ReadParts.first_stage_prior`), then every sentence of the call
        gets one: the cut's dropped ones 0, or below every read one (the cut's warning says
        which)."""
        scores = forward.sentence
        weighting = self._weighting(reading)
        if weighting is not None and document_scores is not None:
            raw = document_scores.raw
            if prior is not None and self.parts.first_stage_prior > 0:
                raw = with_rank_prior(raw, prior[reading.doc_map], self.parts.first_stage_prior)
            scores = weighting.weigh(query, reading.read_docs, reading.read_units, scores, raw)
        cut, cascade = reading.cut, self.parts.cascade
        if cut is None or cascade is None:  # a cut implies a cascade
            return Read(scores=scores, chunks=forward.chunks, notes=())
        dropped = len(reading.units) - len(cut.read)
        note = (
            f"the cascade ({cascade.name}) let attention read {len(cut.read)} of "
            f"{len(reading.units)} sentences; the {dropped} it dropped score "
            + (
                "below every read sentence, in its first pass's order (the budget is "
                f"above what attention reads, at most {cascade.ceiling} proxy tokens)"
                if cut.fill
                else "0"
            )
        )
        return Read(scores=cut.fill_scores(scores), chunks=forward.chunks, notes=(note,))

    def ranking(
        self,
        query: str,
        reading: Reading,
        forward: Forward,
        document_scores: DocumentScores | None,
        read: Read,
        args: VerbArgs,
    ) -> tuple[RerankResults, Selected]:
        """``ranking``: the documents ranked from the read (:meth:`document_ranking`), and the
        best ``args.top_n`` of them, in rank order, with their sentences, for the assembly."""
        ranking = self.document_ranking(query, reading, forward, document_scores, read)
        docs, units = reading.docs, reading.units
        results = ranked_results(
            docs, ranking.raw, ranking.relevance, args.top_n, f"{self.parts.method}:{ranking.how}"
        )
        ranked = [r.index for r in results]
        position = {d: n for n, d in enumerate(ranked)}
        keep = [k for k, u in enumerate(units) if u.doc in position]
        sub_units = [Unit(position[units[k].doc], units[k].start, units[k].end) for k in keep]
        sub_read = Read(scores=read.scores[keep], chunks=read.chunks, notes=read.notes)
        selected = Selected(
            docs=[docs[i] for i in ranked], indices=ranked, units=sub_units, read=sub_read
        )
        return results, selected

    def document_ranking(
        self,
        query: str,
        reading: Reading,
        forward: Forward,
        document_scores: DocumentScores | None,
        read: Read,
    ) -> Ranking:
        """The documents' scores from the read's forward, by input position.

        With the document probe (the forward kept its features): its raw score, ``minilm_weight *
        z(MiniLM cosine)`` over every document plus the attention correction of the documents
        attention read; a document the cascade dropped whole gets the correction's mean, 0, so it
        is ranked by MiniLM alone. Without it, a document's best sentence keep score."""
        docs, units = reading.docs, reading.units
        probe = self.parts.document_probe() if document_scores is not None else None
        if forward.features is None or document_scores is None or probe is None:
            return best_sentence_ranking(len(docs), units, read.scores)
        whole = len(reading.doc_map) == len(docs) and len(reading.read_units) == len(units)
        if document_scores.minilm and whole:
            raw = document_scores.raw  # the whole context was read: the weighting's own scores
        else:
            correction = np.zeros(len(docs))
            correction[reading.doc_map] = self._probe_scores(
                probe, query, reading, forward.features, minilm=False
            )
            base = zscore_columns(self._document_cosines(query, reading)[:, None])[:, 0]
            raw = probe.minilm_weight * base + correction
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

    # -- helpers ---------------------------------------------------------------------------

    def _document_cosines(self, query: str, reading: Reading) -> np.ndarray:
        """Every document's MiniLM cosine to the query, by input position: the ``candidates``
        stage's, or (where it ran none) one pass now."""
        if reading.cosines is not None:
            return reading.cosines.documents
        return document_cosines(query, reading.docs)

    def _weighting(self, reading: Reading) -> DocumentWeighting | None:
        """The weighting that applies to what attention reads: only with several documents."""
        return self.parts.weighting() if len(reading.read_docs) > 1 else None

    def _document_probe(self, reading: Reading, *, rank: bool) -> DocumentProbe | None:
        """The document probe when something reads its scores: a weighting, or ``rank``."""
        return self.parts.document_probe() if (self._weighting(reading) or rank) else None

    def _probe_scores(
        self,
        probe: DocumentProbe,
        query: str,
        reading: Reading,
        features: SentenceFeatures,
        *,
        minilm: bool,
        cosines: np.ndarray | None = None,
    ) -> np.ndarray:
        """The document probe's raw scores of the read documents from ``features``
        (``minilm=False``: its attention correction alone; ``cosines``: the documents' MiniLM
        cosines when already known)."""
        return score_documents(
            probe,
            self.parts.tokenizer(),
            query,
            reading.read_docs,
            reading.read_units,
            features.names,
            features.matrix,
            features.config,
            minilm=minilm,
            cosines=cosines,
        )


__all__ = [
    "STAGES",
    "ContextRead",
    "DocumentScores",
    "Forward",
    "ReadParts",
    "Reading",
    "Selected",
    "Stage",
    "StageClock",
    "sentence_units",
]
