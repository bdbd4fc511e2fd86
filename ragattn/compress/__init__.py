"""Sentence-level context compression: the :class:`Compressor` facade over the method registry.

The methods and their needs are listed in :mod:`ragattn.compress.registry` (:data:`METHODS`).
Probe weights load from ``models/<proxy>/<method>.npz`` (``ragattn probe train`` writes them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.assets import default_models_dir, proxy_slug
from ragattn.blocks import BlockReader, BlockStore
from ragattn.compress.budget import select
from ragattn.compress.cascade import (
    DEFAULT_CASCADE,
    Cascade,
    keep_by_tokens,
    keep_linked,
    unit_cosines,
)
from ragattn.compress.features import SentenceFeatures, Unit
from ragattn.compress.probe import Probe
from ragattn.compress.registry import (
    DEFAULT_METHOD,
    METHODS,
    PROBE_METHODS,
    CompressSpec,
    ScorerInputs,
    probe_path,
)
from ragattn.compress.scorers import ProbeScorer
from ragattn.compress.selection import (
    DocumentWeighting,
    Selection,
    check_selection,
    selection_path,
)
from ragattn.contract import CompressVerbs, VerbArgs
from ragattn.document_probe import (
    DocumentProbe,
    document_cosines,
    document_probe_path,
    score_documents,
    zscore_columns,
)
from ragattn.errors import InvalidInputError, ModelLoadError
from ragattn.lexical import bm25_scores, sigmoid
from ragattn.methods import MethodSpec
from ragattn.proxy import DEFAULT_PROXY, LazyProxy, Proxy, resolve_tokenizer
from ragattn.sentences import split_sentences
from ragattn.types import (
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    DocumentLike,
    KeptSpan,
    RerankResult,
    RerankResults,
    as_documents,
)
from ragattn.validation import check_query

DOC_JOINER = "\n\n"
"""Documents are joined with a blank line in the original and the compressed context alike."""


def _count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


_ENTITY = re.compile(r"\b(?:[A-Z][\w'-]+|\d[\d,.]*)\b")


class Compressor(CompressVerbs[CompressionResult, tuple[RerankResults, CompressionResult]]):
    """Keeps the sentences of the context that a small proxy's attention marks as useful.

    The proxy's weights are loaded only for methods that run it (see :data:`METHODS`); ``lexical``
    loads the proxy's tokenizer alone (tokens are still counted in it) and :attr:`proxy` loads the
    weights on first access.

    Args:
        proxy: a loaded :class:`Proxy` or a name/path for :func:`load_proxy` (default SmolLM2-135M).
        method: one of :data:`METHODS` (default: the best measured, see :data:`DEFAULT_METHOD`),
            or a method's spec (the lab's baselines: :func:`ragattn.lab.registry.compress_spec`).
        models_dir: where probe weights live (default: the packaged assets, see
            :func:`ragattn.assets.default_models_dir`).
        max_chunk_tokens: contexts longer than this many proxy tokens are read in sentence-aligned
            chunks (reported in ``warnings``).
        device: where the proxy runs: ``"auto"`` (CUDA, then MPS, then CPU), ``"cpu"``,
            ``"cuda"``, ``"cuda:N"`` or ``"mps"``; checked at once even when the method loads no
            proxy. A loaded ``proxy`` keeps its own device.
        read_once: read each passage once and keep its keys and values (cached document blocks,
            :mod:`ragattn.blocks`); ``True`` for a private 1 GiB store, or a shared
            :class:`~ragattn.blocks.BlockStore`. Only for methods that read attention; the
            features differ from one full prompt (passages do not see each other), measured in
            BENCHMARKS.md §3.
        selection: ``"documents"`` (default): with several documents, a sentence's keep score
            also weighs its document's relevance from the same forward
            (:mod:`ragattn.compress.selection`), where the method's features feed the proxy's
            document probe and ``selection.json`` is shipped; ``"sentences"``: each sentence on
            its own score, as before. One document is always scored on its own.
        cascade: a :class:`~ragattn.compress.cascade.Cascade` cuts long contexts before the
            proxy reads them (methods that read attention, in :meth:`compress`; ignored by the
            others, which have no forward to save): a
            cheap scorer keeps the best ``keep`` share of the proxy tokens and attention reads
            those; the sentences it drops score 0 and the result's ``warnings`` say how many.
            Default :data:`~ragattn.compress.cascade.DEFAULT_CASCADE` (contexts of 1,024 proxy
            tokens or more, budgets of at most 40 %: the lexical probe keeps 80 % of the tokens,
            the sentences of documents named by title first; measured in BENCHMARKS.md §3),
            where the proxy's models folder has the ``lexical`` probe; ``None`` reads every
            context whole.
        dtype, threads: passed to :func:`load_proxy` when ``proxy`` is a name (``dtype="auto"``:
            bf16 where the device runs it natively, CUDA or a CPU with AVX-512 BF16 or AMX,
            else fp32; ``threads`` is applied even when no proxy is loaded).

    Raises:
        InvalidInputError: an unknown method (the message lists the valid ones).
        ModelLoadError: the proxy or the method's trained probe is missing.
        ConfigError: a device this machine does not have (the message lists the available ones).
    """

    def __init__(
        self,
        proxy: str | Proxy = DEFAULT_PROXY,
        *,
        method: str | CompressSpec = DEFAULT_METHOD,
        models_dir: str | Path | None = None,
        max_chunk_tokens: int = 2048,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        read_once: bool | BlockStore = False,
        selection: Selection = "documents",
        cascade: Cascade | None = DEFAULT_CASCADE,
    ) -> None:
        self.selection: Selection = check_selection(selection)
        self.spec = method if isinstance(method, MethodSpec) else METHODS.spec(method)
        self.method = self.spec.name
        self._cascade_probe: ProbeScorer | None = None
        self.max_chunk_tokens = max_chunk_tokens
        self.models_dir = Path(models_dir) if models_dir else default_models_dir()
        self._proxy = LazyProxy(proxy, device=device, dtype=dtype, threads=threads)
        self.cascade = self._usable_cascade(cascade)
        self.probe: Probe | None = self._load_probe() if self.spec.needs_probe else None
        self._doc_probe: DocumentProbe | None | bool = False  # False: not looked up yet
        self._weighting: DocumentWeighting | None | bool = False  # False: not looked up yet
        if self.spec.runs_proxy:
            self._proxy.get()
        else:
            self._proxy.apply_threads()
        self.blocks: BlockReader | None = None
        if read_once is not False and self.spec.reads_attention:
            store = read_once if isinstance(read_once, BlockStore) else None
            self.blocks = BlockReader(self.proxy, store)
        self.scorer = self.spec.factory(
            ScorerInputs(
                proxy=self._proxy.loaded,
                probe=self.probe,
                max_chunk_tokens=max_chunk_tokens,
                blocks=self.blocks,
            )
        )

    def _usable_cascade(self, cascade: Cascade | None) -> Cascade | None:
        """``cascade`` where it can run: None for a method that reads no attention (no forward to
        save); the default cascade is dropped for a proxy whose models folder has no ``lexical``
        probe (it was measured with the packaged one), while an explicit one fails here, at
        construction, rather than on the first long context."""
        if cascade is None or not self.spec.reads_attention:
            return None
        if cascade.scorer == "lexical":
            path = probe_path(self.models_dir, self._proxy.name, "lexical")
            if not path.is_file():
                if cascade is DEFAULT_CASCADE:
                    return None
                raise ModelLoadError(f"the lexical cascade needs the lexical probe at {path}")
        return cascade

    @property
    def proxy(self) -> Proxy:
        """The proxy model, loaded on first access for methods that do not run it."""
        return self._proxy.get()

    @property
    def proxy_name(self) -> str:
        """The proxy's name, known without loading it."""
        return self._proxy.name

    def _load_probe(self) -> Probe:
        path = probe_path(self.models_dir, self._proxy.name, self.method)
        if not path.is_file():
            raise ModelLoadError(
                f"no trained probe for method {self.method!r} and proxy {self._proxy.name!r} "
                f"at {path}; train it with: ragattn probe train"
            )
        return Probe.load(path)

    def _counting_tokenizer(self, tokenizer: Any) -> tuple[Any, str]:
        """The tokenizer that counts a result's tokens and its name: ``tokenizer`` when given,
        else the proxy's (its tokenizer alone when the weights are not loaded)."""
        if tokenizer is None:
            return self._proxy.tokenizer()
        return resolve_tokenizer(tokenizer)

    # -- scoring ---------------------------------------------------------------------------

    def score_units(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        """Keep scores in [0, 1] for ``units`` and the number of proxy chunks read."""
        if not units:
            return np.zeros(0), 0
        return self.scorer.score(query, documents, units)

    # -- public API ------------------------------------------------------------------------

    def _compress(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> CompressionResult:
        """:meth:`compress` (its signature and documentation are the contract's,
        :class:`~ragattn.contract.CompressVerbs`)."""
        args = VerbArgs.check("compress", given)
        docs, units = self._prepare(query, documents)
        scores, chunks, notes = self.context_scores(query, docs, units, args.compress_budget)
        return self._build(
            docs,
            list(range(len(docs))),
            units,
            scores,
            chunks,
            args,
            self._entity_units(query, docs, units) if args.keep_entities else [],
            notes=notes,
        )

    def context_scores(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], budget: Budget
    ) -> tuple[np.ndarray, int, tuple[str, ...]]:
        """The keep scores :meth:`compress` selects ``units`` by under ``budget``: in [0, 1],
        document-aware when a weighting applies, 0 for a sentence the cascade dropped; with the
        number of proxy chunks read and the notes the result's warnings carry (what the cascade
        cut)."""
        read = self._read(query, docs, units, budget)
        return read.scores, read.chunks, read.notes

    def _read(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        budget: Budget,
        *,
        rank: bool = False,
    ) -> _Read:
        """The one read of a call: the cascade's cut, then the proxy forward over what it kept,
        giving the sentences' keep scores (as :meth:`context_scores` documents them) and, with
        ``rank=True``, the documents' raw scores from the same forward (:meth:`_ranking`)."""
        cut = self._cascade_cut(query, docs, units, budget)
        cosines = None
        if cut is None:
            read_docs, read_units, doc_map = list(docs), list(units), list(range(len(docs)))
        else:
            read_docs, read_units = _reduced(docs, units, cut)
            doc_map = sorted({units[i].doc for i in cut})
            if self._document_probe() is not None:
                # the whole documents' cosines: one MiniLM pass serves the weighting, the
                # ranking and a ``documents`` cascade alike (the encoder's LRU holds them)
                cosines = document_cosines(query, docs)
        scores, chunks, feats = self._selection_scores(
            query,
            read_docs,
            read_units,
            rank=rank,
            cosines=None if cosines is None else cosines[doc_map],
        )
        if cut is not None:
            full = np.zeros(len(units))
            full[cut] = scores
            scores = full
        notes: tuple[str, ...] = ()
        if cut is not None:
            assert self.cascade is not None  # a cut implies a cascade
            notes = (
                f"the cascade ({self.cascade.name}) let attention read {len(cut)} of "
                f"{len(units)} sentences; the {len(units) - len(cut)} it dropped score 0",
            )
        ranking = None
        if rank:
            ranking = self._ranking(
                query, docs, units, scores, feats, (read_docs, read_units, doc_map)
            )
        return _Read(scores=scores, chunks=chunks, notes=notes, ranking=ranking)

    def _ranking(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        scores: np.ndarray,
        feats: _Features | None,
        read: tuple[Sequence[Document], Sequence[Unit], Sequence[int]],
    ) -> _Ranking:
        """The documents' scores from the read's forward.

        With the document probe (``feats`` given): its raw score, ``minilm_weight * z(MiniLM
        cosine)`` over every document plus the attention correction of the documents attention
        read (``read``: the context the cascade kept, and each read document's input position); a
        document the cascade dropped whole gets the correction's mean, 0, so it is ranked by
        MiniLM alone. Without it, a document's best sentence keep score."""
        if feats is None:
            best = np.zeros(len(docs))
            for unit, score in zip(units, scores, strict=True):
                best[unit.doc] = max(best[unit.doc], float(score))
            return _Ranking(raw=best, relevance=best, how="max-sentence")
        read_docs, read_units, doc_map = read
        probe = self._document_probe()
        assert probe is not None  # features are kept only where the probe reads them
        if feats.raw is not None and len(doc_map) == len(docs) and len(read_units) == len(units):
            raw = feats.raw  # the whole context was read: the weighting's own scores
        else:
            correction = np.zeros(len(docs))
            correction[list(doc_map)] = self._document_scores(
                probe, query, read_docs, read_units, feats.features, minilm=False
            )
            base = zscore_columns(document_cosines(query, docs)[:, None])[:, 0]
            raw = probe.minilm_weight * base + correction
        return _Ranking(raw=raw, relevance=sigmoid(raw), how="document-probe")

    def _selection_scores(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        *,
        rank: bool = False,
        cosines: np.ndarray | None = None,
    ) -> tuple[np.ndarray, int, _Features | None]:
        """Keep scores in [0, 1] for ``units`` (document-aware when a weighting applies), the
        number of proxy chunks read, and the forward's features with the document probe's raw
        scores where they were computed (a weighting applies, or ``rank`` asks for them and the
        method's features feed the document probe). ``cosines``: each document's MiniLM cosine
        when the caller has it (the whole document's, for a cascade's cut)."""
        weighting = self.document_weighting() if len(docs) > 1 else None
        probe = self._document_probe() if (weighting or rank) else None
        if probe is None or not isinstance(self.scorer, ProbeScorer) or not units:
            scores, chunks = self.score_units(query, docs, units)
            return scores, chunks, None
        sentence, feats = self.scorer.score_with_features(query, docs, units)
        minilm = weighting.reads_minilm if weighting else True
        raw = self._document_scores(
            probe, query, docs, units, feats, minilm=minilm, cosines=cosines
        )
        if weighting is None:
            return sentence, feats.chunks, _Features(feats, raw if minilm else None)
        scores = weighting.weigh(query, docs, units, sentence, raw)
        return scores, feats.chunks, _Features(feats, raw if minilm else None)

    def _cascade_cut(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], budget: Budget
    ) -> np.ndarray | None:
        """The units attention reads when the cascade cuts this call (ascending indices), or
        None when the whole context is read. Sizes are counted in the proxy's tokenizer."""
        cascade = self.cascade
        if cascade is None or len(units) < 2:
            return None
        if cascade.scorer == "documents" and len({u.doc for u in units}) < 2:
            return None  # one document: its sentences share one cosine, nothing to rank
        tokenizer, _ = self._proxy.tokenizer()
        texts = [docs[u.doc].text[u.start : u.end] for u in units]
        costs = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        total = sum(costs)
        share = cascade.read_share(total, budget.token_limit(total))
        if share is None:
            return None
        if cascade.scorer == "bm25":
            first = bm25_scores(query, texts)
        elif cascade.scorer == "documents":
            first = unit_cosines(query, docs, units)
        else:
            first = self._cascade_scorer().score(query, docs, units)[0]
        if cascade.links:
            read = keep_linked(query, docs, units, first, costs, share)
        else:
            read = keep_by_tokens(first, costs, share)
        return read if len(read) < len(units) else None

    def _cascade_scorer(self) -> ProbeScorer:
        """The ``lexical`` probe as the cascade's first pass (loaded on first use)."""
        if self._cascade_probe is None:
            path = probe_path(self.models_dir, self._proxy.name, "lexical")
            self._cascade_probe = ProbeScorer(
                None,
                Probe.load(path),
                PROBE_METHODS["lexical"],
                max_chunk_tokens=self.max_chunk_tokens,
            )
        return self._cascade_probe

    def _rerank_compress(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> tuple[RerankResults, CompressionResult]:
        """:meth:`rerank_and_compress`: rank and compress from one read (Provence-style).

        The read is :meth:`compress`'s own (the cascade's cut, then one forward, the
        document-aware selection), so with ``top_n`` left at None the kept sentences are those
        :meth:`compress` keeps, the context arranged best document first. When the proxy has a
        document probe (:mod:`ragattn.document_probe`, ``rerank-probe.npz``) and the method's
        features feed it (a probe method reading attention), a document's score is the document
        probe's, read from the same forward: ``raw_score`` in its log-odds units,
        ``relevance_score`` its sigmoid (results' ``method`` ends in ``:document-probe``); a
        document the cascade dropped whole is ranked by the probe's MiniLM term alone. Otherwise
        a document's score is its best sentence's keep score (raw and ``relevance_score`` alike,
        in [0, 1]; ``:max-sentence``). The best ``top_n`` documents (default: all) are then
        compressed under the budget, in rank order; ``CompressedDocument.index`` and
        ``KeptSpan.doc_index`` refer to the input positions. How well each ranks is measured in
        BENCHMARKS.md §2.
        """
        args = VerbArgs.check("rerank_compress", given)
        docs, units = self._prepare(query, documents)
        if not docs:
            raise InvalidInputError("documents must hold at least one document")
        read = self._read(query, docs, units, args.compress_budget, rank=True)
        assert read.ranking is not None  # rank=True
        raw, relevance = read.ranking.raw, read.ranking.relevance
        ranked = sorted(range(len(docs)), key=lambda i: (-raw[i], i))[: args.top_n]
        results = RerankResults(
            [
                RerankResult(
                    index=i,
                    relevance_score=float(relevance[i]),
                    raw_score=float(raw[i]),
                    document=docs[i],
                )
                for i in ranked
            ],
            method=f"{self.method}:{read.ranking.how}",
        )
        position = {d: n for n, d in enumerate(ranked)}
        keep = [k for k, u in enumerate(units) if u.doc in position]
        sub_units = [Unit(position[units[k].doc], units[k].start, units[k].end) for k in keep]
        compression = self._build(
            [docs[i] for i in ranked],
            ranked,
            sub_units,
            read.scores[keep],
            read.chunks,
            args,
            [],
            notes=read.notes,
        )
        return results, compression

    def _document_probe(self) -> DocumentProbe | None:
        """The proxy's document probe when this method's features can feed it, else None."""
        if self._doc_probe is False:
            if not (isinstance(self.scorer, ProbeScorer) and self.scorer.features.attention):
                self._doc_probe = None
            else:
                path = document_probe_path(self.models_dir, proxy_slug(self._proxy.name))
                probe = DocumentProbe.load(path) if path.is_file() else None
                features = self.scorer.features
                fits = probe is not None and (
                    features.rows in (probe.rows, "both")
                    and (features.layers is None or features.layers >= probe.layers)
                )
                self._doc_probe = probe if fits else None
        return self._doc_probe if isinstance(self._doc_probe, DocumentProbe) else None

    def document_weighting(self) -> DocumentWeighting | None:
        """The document-aware selection this compressor applies to calls with several
        documents, or None (``selection="sentences"``, a method whose features do not feed the
        document probe, or no ``selection.json`` fitted for this method and proxy)."""
        if self._weighting is False:
            weighting = None
            if self.selection == "documents" and self._document_probe() is not None:
                path = selection_path(self.models_dir, proxy_slug(self._proxy.name))
                if path.is_file():
                    weighting = DocumentWeighting.load(path)
                    if weighting.method != self.method:
                        weighting = None
            self._weighting = weighting
        return self._weighting if isinstance(self._weighting, DocumentWeighting) else None

    def _document_scores(
        self,
        probe: DocumentProbe,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        feats: SentenceFeatures,
        *,
        minilm: bool = True,
        cosines: np.ndarray | None = None,
    ) -> np.ndarray:
        """The document probe's raw scores from the sentence features of this call's forward
        (``minilm=False``: its attention correction alone, no MiniLM pass; ``cosines``: the
        documents' MiniLM cosines when already known)."""
        return score_documents(
            probe,
            self.proxy.tokenizer,
            query,
            docs,
            units,
            feats.names,
            feats.matrix,
            feats.config,
            minilm=minilm,
            cosines=cosines,
        )

    def _prepare(
        self, query: str, documents: str | Sequence[DocumentLike]
    ) -> tuple[list[Document], list[Unit]]:
        check_query(query)
        docs = [Document(text=documents)] if isinstance(documents, str) else as_documents(documents)
        units = [
            Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
        ]
        return docs, units

    def _build(
        self,
        docs: Sequence[Document],
        indices: Sequence[int],
        units: Sequence[Unit],
        scores: np.ndarray,
        chunks: int,
        args: VerbArgs,
        forced: Sequence[int],
        *,
        notes: Sequence[str] = (),
    ) -> CompressionResult:
        """Select units under ``args.budget`` and assemble the result; ``indices`` are input
        positions; ``notes`` go first into the result's warnings."""
        budget, keep_order = args.compress_budget, args.keep_order
        tok, tok_name = self._counting_tokenizer(args.tokenizer)
        origin_tokens = _count(tok, DOC_JOINER.join(doc.text for doc in docs))
        warnings: list[str] = list(notes)
        if not units:
            empty = tuple(
                CompressedDocument(
                    index=i,
                    text="",
                    kept_spans=(),
                    sentence_scores=(),
                    sentence_spans=(),
                    document=doc,
                )
                for i, doc in zip(indices, docs, strict=True)
            )
            return CompressionResult(
                compressed_text="",
                documents=empty,
                origin_tokens=origin_tokens,
                compressed_tokens=0,
                ratio=1.0,
                tokenizer=tok_name,
                method=self.method,
                warnings=("the context holds no text; nothing to compress",),
            )
        if chunks > 1:
            warnings.append(
                f"the context was read in {chunks} chunks of at most "
                f"{self.max_chunk_tokens} proxy tokens"
            )
        costs = [_count(tok, docs[u.doc].text[u.start : u.end]) for u in units]
        kept = select(
            list(scores),
            costs,
            budget,
            origin_tokens,
            lambda ids: _count(tok, _context_text(docs, units, sorted(ids))),
            forced=forced,
        )
        limit = budget.token_limit(origin_tokens)
        ordered = sorted(kept) if keep_order else sorted(kept, key=lambda i: (-scores[i], i))
        text = (
            _context_text(docs, units, ordered)
            if keep_order
            else DOC_JOINER.join(
                docs[units[i].doc].text[units[i].start : units[i].end] for i in ordered
            )
        )
        compressed_tokens = _count(tok, text)
        if limit is not None and compressed_tokens > limit:
            reason = (
                "forced entity sentences"
                if forced
                else "the best sentence alone is longer than the budget"
            )
            warnings.append(
                f"kept {compressed_tokens} tokens, over the budget of {limit}: {reason}"
            )
        per_doc = []
        for d, (index, doc) in enumerate(zip(indices, docs, strict=True)):
            members = [i for i in range(len(units)) if units[i].doc == d]
            doc_kept = [i for i in sorted(kept) if units[i].doc == d]
            per_doc.append(
                CompressedDocument(
                    index=index,
                    text=_doc_text(
                        doc.text, [units[i] for i in members], [units[i] for i in doc_kept]
                    ),
                    kept_spans=tuple(
                        KeptSpan(
                            doc_index=index,
                            start=units[i].start,
                            end=units[i].end,
                            score=float(scores[i]),
                            text=doc.text[units[i].start : units[i].end],
                        )
                        for i in doc_kept
                    ),
                    sentence_scores=tuple(float(scores[i]) for i in members),
                    sentence_spans=tuple((units[i].start, units[i].end) for i in members),
                    document=doc,
                )
            )
        return CompressionResult(
            compressed_text=text,
            documents=tuple(per_doc),
            origin_tokens=origin_tokens,
            compressed_tokens=compressed_tokens,
            ratio=compressed_tokens / origin_tokens if origin_tokens else 1.0,
            tokenizer=tok_name,
            method=self.method,
            warnings=tuple(warnings),
        )

    @staticmethod
    def _entity_units(query: str, docs: Sequence[Document], units: Sequence[Unit]) -> list[int]:
        """Units naming a capitalised word (not the first) or a number of the query."""
        words = query.split()
        entities = {m.group(0).lower() for m in _ENTITY.finditer(" ".join(words[1:]))}
        if not entities:
            return []
        return [
            i
            for i, u in enumerate(units)
            if any(e in docs[u.doc].text[u.start : u.end].lower() for e in entities)
        ]


@dataclass(frozen=True, slots=True)
class _Features:
    """A forward's sentence features and, where computed with MiniLM, the document probe's raw
    scores of the documents it read (log-odds units)."""

    features: SentenceFeatures
    raw: np.ndarray | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Ranking:
    """Document scores of one read, by input position: ``raw`` (the probe's log-odds, or the best
    sentence's keep score in [0, 1]), ``relevance`` in [0, 1], and how they were made."""

    raw: np.ndarray
    relevance: np.ndarray
    how: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Read:
    """One read of a call's context: keep scores in [0, 1] per sentence (0 where the cascade
    dropped it), proxy chunks read, warning notes, and the ranking when asked for."""

    scores: np.ndarray
    chunks: int
    notes: tuple[str, ...]
    ranking: _Ranking | None = None


def _reduced(
    docs: Sequence[Document], units: Sequence[Unit], read: Sequence[int] | np.ndarray
) -> tuple[list[Document], list[Unit]]:
    """The context the cascade lets attention read: each document with only the ``read`` units,
    joined by one space (a document with none is left out), and those units' spans in it, in the
    order of ``read``."""
    by_doc: dict[int, list[int]] = {}
    for i in read:
        by_doc.setdefault(units[i].doc, []).append(i)
    out_docs: list[Document] = []
    spans: dict[int, Unit] = {}
    for d in sorted(by_doc):
        parts: list[str] = []
        cursor = 0
        for i in by_doc[d]:
            text = docs[d].text[units[i].start : units[i].end]
            if parts:
                cursor += 1
            spans[i] = Unit(len(out_docs), cursor, cursor + len(text))
            parts.append(text)
            cursor += len(text)
        out_docs.append(replace(docs[d], text=" ".join(parts)))
    return out_docs, [spans[i] for i in read]


def _doc_text(text: str, members: Sequence[Unit], kept: Sequence[Unit]) -> str:
    """Kept sentences of one document in order, each with its original trailing whitespace (so the
    result is a concatenation of substrings of ``text``), right-stripped."""
    starts = [u.start for u in members]
    out = []
    for u in kept:
        nxt = next((s for s in starts if s >= u.end), len(text))
        out.append(text[u.start : nxt])
    return "".join(out).rstrip()


def _context_text(docs: Sequence[Document], units: Sequence[Unit], ordered: Sequence[int]) -> str:
    """The compressed context: per document :func:`_doc_text`, non-empty ones joined by
    DOC_JOINER."""
    parts = []
    for d, doc in enumerate(docs):
        members = [u for u in units if u.doc == d]
        kept = [units[i] for i in ordered if units[i].doc == d]
        if kept:
            parts.append(_doc_text(doc.text, members, kept))
    return DOC_JOINER.join(p for p in parts if p)


__all__ = [
    "DEFAULT_CASCADE",
    "DEFAULT_METHOD",
    "METHODS",
    "PROBE_METHODS",
    "Cascade",
    "Compressor",
    "probe_path",
]
