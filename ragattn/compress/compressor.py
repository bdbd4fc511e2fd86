"""The :class:`Compressor`: the compress methods' facade, from keyword call to result.

The methods and their needs are listed in :mod:`ragattn.compress.registry` (:data:`METHODS`).
Probe weights load from ``models/<proxy>/<method>.npz`` (``ragattn probe train`` writes them).
A call is one read of its context, stage by stage, in :mod:`ragattn.compress.read` (the
sentences, the cascade's cut, one forward, the document scores, the document-aware selection, the
ranking, the assembly); the compressor builds that read with its loaded parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.assets import default_models_dir
from ragattn.blocks import BlockReader, BlockStore
from ragattn.call_language import ENGLISH, call_language, sentence_rules
from ragattn.compress.assembly import Counting
from ragattn.compress.cascade import (
    DEFAULT_CASCADE,
    Cascade,
)
from ragattn.compress.features import Unit
from ragattn.compress.model_files import ModelFiles
from ragattn.compress.probe import Probe
from ragattn.compress.read import ContextRead, FirstPass, ReadParts, sentence_units
from ragattn.compress.registry import (
    DEFAULT_METHOD,
    METHODS,
    PROBE_METHODS,
    CompressSpec,
    ScorerInputs,
    UnitScorerFactory,
)
from ragattn.compress.scorers import ProbeScorer
from ragattn.compress.selection import (
    DEFAULT_FIRST_STAGE_PRIOR,
    DocumentSelection,
    Selection,
    check_first_stage_prior,
    check_selection,
)
from ragattn.contract import CompressVerbs, VerbArgs, input_documents
from ragattn.document_probe import DocumentProbe
from ragattn.errors import ModelLoadError
from ragattn.facade import ProxyFacade
from ragattn.languages import AUTO, check_language
from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY, Proxy, resolve_tokenizer
from ragattn.types import (
    Budget,
    CompressionResult,
    Document,
    DocumentLike,
    RerankResults,
)
from ragattn.validation import check_query

MULTILINGUAL_FIRST_PASS: FirstPass = "bm25"
"""The ``candidates`` stage of the multilingual compressor's read (the rule that chose it:
docs/research/languages.md)."""


class Compressor(
    ProxyFacade[UnitScorerFactory],
    CompressVerbs[CompressionResult, tuple[RerankResults, CompressionResult]],
):
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
            :class:`~ragattn.block_store.BlockStore`. Only for methods that read attention; the
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
        first_stage_prior: how much a call's ``first_stage_order`` (its retriever's order,
            when it passes one) moves the document-aware selection: the weight of the order's
            rank prior ``1/log2(rank+1)`` beside the document probe's score, both z-scored over
            the call's documents (:func:`~ragattn.compress.selection.with_rank_prior`; 0: the
            order is checked and not read). It moves which sentences are kept; the ranking of
            :meth:`rerank_and_compress` stays the document probe's. Default
            :data:`~ragattn.compress.selection.DEFAULT_FIRST_STAGE_PRIOR`, chosen by the rule in
            docs/research/context.md.
        dtype, threads: passed to :func:`load_proxy` when ``proxy`` is a name (``dtype="auto"``:
            bf16 where the device runs it natively, CUDA or a CPU with AVX-512 BF16 or AMX,
            else fp32; ``threads`` is applied even when no proxy is loaded).
        proxy_cache_dir: where a named GGUF proxy's dequantized weights are cached (this one's
            and the multilingual proxy's; default ``~/.cache/ragattn``).
        multilingual: the proxy that reads calls not in English (:mod:`ragattn.call_language`:
            the documents' language, else the query's): ``"auto"`` (default) is
            :data:`~ragattn.proxy.MULTILINGUAL_PROXY` (Gemma-3-270M) where ``proxy`` is the
            packaged English default, and no second proxy for any other ``proxy`` (a proxy you
            chose reads every language); a name, path or loaded :class:`Proxy`; None: ``proxy``
            reads every language. The second compressor is built on the first such call, with
            this one's settings; its token counts are in its own tokenizer (``tokenizer`` names it,
            unless the call names one). Where it cannot load (its package is missing, or it has
            no probe for ``method``), English's proxy reads every call and the log says why, once.
        first_pass: what the read's ``candidates`` stage scores documents with, where the
            document probe or the cascade reads them: ``"minilm"`` (the packaged English
            MiniLM's cosines) or ``"bm25"`` (BM25 over the call's texts, counting character
            bigrams where a script writes no spaces). The multilingual compressor gets
            :data:`MULTILINGUAL_FIRST_PASS`.

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
        proxy_cache_dir: str | Path | None = None,
        read_once: bool | BlockStore = False,
        selection: Selection = "documents",
        cascade: Cascade | None = DEFAULT_CASCADE,
        first_stage_prior: float = DEFAULT_FIRST_STAGE_PRIOR,
        multilingual: str | Proxy | None = "auto",
        first_pass: FirstPass = "minilm",
    ) -> None:
        self.selection: Selection = check_selection(selection)
        self.first_stage_prior = check_first_stage_prior(first_stage_prior)
        self._bind(
            method,
            METHODS,
            proxy,
            device=device,
            dtype=dtype,
            threads=threads,
            cache_dir=proxy_cache_dir,
        )
        self._cascade_probe: ProbeScorer | None = None
        self.max_chunk_tokens = max_chunk_tokens
        self.first_pass: FirstPass = first_pass
        self.models_dir = Path(models_dir) if models_dir else default_models_dir()
        self.files = ModelFiles(self.models_dir, self._proxy.name)
        self.cascade = self._usable_cascade(cascade)
        self.probe: Probe | None = self._load_probe() if self.spec.needs_probe else None
        self._start()
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
        self.multilingual: str | Proxy | None = (
            (MULTILINGUAL_PROXY if self._proxy.name == DEFAULT_PROXY else None)
            if multilingual == "auto"
            else multilingual
        )
        self._like_this = partial(
            Compressor,
            method=method,
            models_dir=models_dir,
            max_chunk_tokens=max_chunk_tokens,
            device=device,
            dtype=dtype,
            threads=threads,
            proxy_cache_dir=proxy_cache_dir,
            selection=selection,
            cascade=cascade,
            first_stage_prior=first_stage_prior,
            multilingual=None,
            first_pass=MULTILINGUAL_FIRST_PASS,
        )
        self._second: Compressor | None = None

    @property
    def multilingual_compressor(self) -> Compressor | None:
        """The compressor that reads calls not in English, once a call has built it (None
        before, and where this one reads every language)."""
        return self._second

    def route(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[Compressor, VerbArgs]:
        """The compressor that reads a checked call and the arguments it reads it with.

        With ``language="auto"`` (the default) the call's language is read once
        (:func:`~ragattn.call_language.call_language`): it chooses the proxy
        (:meth:`engine_for`) and, for a Latin-script language the splitter has rules for
        (:data:`~ragattn.call_language.SPLIT_BY_IDENTIFIER`: German, French, Spanish, ...), the
        sentence rules, which the script alone cannot name ("am 12. Mai" ends no sentence in
        German). An English call keeps its arguments; a named ``language`` is used as given.
        """
        if args.language != AUTO:
            return self.engine_for(query, documents, args.language), args
        language = call_language(query, documents)
        rules = sentence_rules(language)
        if rules != AUTO:
            args = replace(args, language=rules)
        return self.engine_for(query, documents, language), args

    def engine_for(self, query: str, documents: Sequence[Document], language: str) -> Compressor:
        """The compressor that reads a call: this one for English (or where no multilingual
        proxy is set), else the multilingual one, built on first use. ``language``: the call's
        (``"auto"``: :func:`~ragattn.call_language.call_language` of the query and documents)."""
        if self.multilingual is None:
            return self
        if language == AUTO:
            language = call_language(query, documents)
        if language == ENGLISH:
            return self
        return self._multilingual_engine(language)

    def _usable_cascade(self, cascade: Cascade | None) -> Cascade | None:
        """``cascade`` where it can run: None for a method that reads no attention (no forward to
        save); the default cascade is dropped for a proxy whose models folder has no ``lexical``
        probe (it was measured with the packaged one), while an explicit one fails here, at
        construction, rather than on the first long context."""
        if cascade is None or not self.spec.reads_attention:
            return None
        if cascade.scorer == "lexical" and not self.files.has_probe("lexical"):
            if cascade is DEFAULT_CASCADE:
                return None
            path = self.files.probe_path("lexical")
            raise ModelLoadError(f"the lexical cascade needs the lexical probe at {path}")
        return cascade

    def _load_probe(self) -> Probe:
        return self.files.probe(self.method)

    def _counting(self, tokenizer: Any) -> Counting:
        """The tokenizer that counts a result's tokens: ``tokenizer`` when given, else the
        proxy's (its tokenizer alone when the weights are not loaded)."""
        counting, name = (
            self._proxy.tokenizer() if tokenizer is None else resolve_tokenizer(tokenizer)
        )
        return Counting(tokenizer=counting, name=name)

    # -- the checked entries (CompressVerbs: compress, rerank_and_compress) -----------------

    def compress_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> CompressionResult:
        """:meth:`compress` of a checked call (:class:`~ragattn.contract.CompressVerbs`): the
        read of :mod:`ragattn.compress.read`, whose stages' seconds the result carries
        (``stage_seconds``)."""
        engine, args = self.route(query, documents, args)
        if engine is not self:
            return engine.compress_checked(query, documents, args)
        return self._context_read().compress(query, documents, args)

    def rerank_and_compress_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> tuple[RerankResults, CompressionResult]:
        """:meth:`rerank_and_compress` of a checked call: rank and compress from one read
        (Provence-style).

        The read is :meth:`compress`'s own (:mod:`ragattn.compress.read`: the cascade's cut, then
        one forward, the document-aware selection), so with ``top_n`` left at None the kept
        sentences are those :meth:`compress` keeps, the context arranged best document first. When
        the proxy has a document probe (:mod:`ragattn.document_probe`, ``rerank-probe.npz``) and
        the method's features feed it (a probe method reading attention), a document's score is
        the document probe's, read from the same forward: ``raw_score`` in its log-odds units,
        ``relevance_score`` its sigmoid (results' ``method`` ends in ``:document-probe``); a
        document the cascade dropped whole is ranked by the probe's MiniLM term alone. Otherwise
        a document's score is its best sentence's keep score (raw and ``relevance_score`` alike,
        in [0, 1]; ``:max-sentence``). The best ``top_n`` documents (default: all) are then
        compressed under the budget, in rank order; ``CompressedDocument.index`` and
        ``KeptSpan.doc_index`` refer to the input positions. The compression's
        ``stage_seconds`` include the ``ranking`` stage. How well each ranks is measured in
        BENCHMARKS.md §2.
        """
        engine, args = self.route(query, documents, args)
        if engine is not self:
            return engine.rerank_and_compress_checked(query, documents, args)
        return self._context_read().rerank_and_compress(query, documents, args)

    def _context_read(self) -> ContextRead:
        """The read (:class:`~ragattn.compress.read.ContextRead`) with this compressor's parts;
        the cascade's probe, the document probe and the selection load on first use."""
        return ContextRead(
            ReadParts(
                method=self.method,
                scorer=self.scorer,
                cascade=self.cascade,
                lexical=self._cascade_scorer,
                tokenizer=lambda: self._proxy.tokenizer()[0],
                document_probe=self._document_probe,
                selection=self.document_selection,
                counting=self._counting,
                max_chunk_tokens=self.max_chunk_tokens,
                first_stage_prior=self.first_stage_prior,
                first_pass=self.first_pass,
            )
        )

    def _prepare(
        self, query: str, documents: str | Sequence[DocumentLike], language: str = AUTO
    ) -> tuple[list[Document], list[Unit]]:
        """A keyword call's query checked and documents converted, with their sentences (split
        by ``language``, as the read's ``sentences`` stage splits them)."""
        check_query(query)
        docs = input_documents(documents)
        return docs, sentence_units(docs, check_language(language))

    # -- scoring ---------------------------------------------------------------------------

    def score_units(
        self, query: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[np.ndarray, int]:
        """Keep scores in [0, 1] for ``units`` and the number of proxy chunks read."""
        if not units:
            return np.zeros(0), 0
        return self.scorer.score(query, documents, units)

    def context_scores(
        self, query: str, docs: Sequence[Document], units: Sequence[Unit], budget: Budget
    ) -> tuple[np.ndarray, int, tuple[str, ...]]:
        """The keep scores :meth:`compress` selects ``units`` by under ``budget``: in [0, 1],
        document-aware when a selection applies, 0 for a sentence the cascade dropped; with the
        number of proxy chunks read and the notes the result's warnings carry (what the cascade
        cut). The read's stages from ``candidates`` to ``selection``
        (:meth:`~ragattn.compress.read.ContextRead.keep_scores`)."""
        read = self._context_read().keep_scores(query, docs, units, budget)
        return read.scores, read.chunks, read.notes

    def _cascade_scorer(self) -> ProbeScorer:
        """The ``lexical`` probe as the cascade's first pass (loaded on first use)."""
        if self._cascade_probe is None:
            self._cascade_probe = ProbeScorer(
                None,
                self.files.probe("lexical"),
                PROBE_METHODS["lexical"],
                max_chunk_tokens=self.max_chunk_tokens,
            )
        return self._cascade_probe

    def _document_probe(self) -> DocumentProbe | None:
        """The proxy's document probe when this method's features can feed it, else None."""
        return self._fitting_document_probe

    @cached_property
    def _fitting_document_probe(self) -> DocumentProbe | None:
        if not (isinstance(self.scorer, ProbeScorer) and self.scorer.features.attention):
            return None
        probe = self.files.document_probe()
        features = self.scorer.features
        fits = probe is not None and (
            features.rows in (probe.rows, "both")
            and (features.layers is None or features.layers >= probe.layers)
        )
        return probe if fits else None

    def document_selection(self) -> DocumentSelection | None:
        """The document-aware selection this compressor applies to calls with several
        documents, or None (``selection="sentences"``, a method whose features do not feed the
        document probe, or no ``selection.json`` fitted for this method and proxy)."""
        return self._document_selection

    @cached_property
    def _document_selection(self) -> DocumentSelection | None:
        if self.selection != "documents" or self._document_probe() is None:
            return None
        selection = self.files.selection()
        return selection if selection is not None and selection.method == self.method else None


__all__ = ["Compressor"]
