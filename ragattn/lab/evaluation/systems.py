"""Adapters that put ragattn's rerank and compression methods into the evaluation harness.

Compression methods score the dataset's own gold-segmented sentences (the same units the baselines
score), so every row of a selection table is compared on identical units and budgets. Methods that
share the attention features (fused, sentinel, attention-raw) compute them once per example.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragattn.assets import default_models_dir, proxy_slug
from ragattn.blocks import BlockReader
from ragattn.compress import Compressor
from ragattn.compress.features import SentenceFeatures, Unit, sentence_features
from ragattn.compress.focal import focal_scores
from ragattn.compress.model_files import ModelFiles, probe_path
from ragattn.compress.probe import Probe
from ragattn.document_probe import load_document_probe, score_documents
from ragattn.lab.evaluation.datasets import Passage, RerankQuery
from ragattn.lab.feature_store import FeatureStore
from ragattn.proxy import Proxy
from ragattn.rerank import Reranker
from ragattn.types import Budget, Document


class RerankerSystem:
    """A :class:`Reranker` as a harness ranker.

    With ``first_stage`` (a retriever's setting) the first stage's order is passed on as
    ``first_stage_order``. Without it (the service's setting: query and documents only), the
    candidates are passed in a seeded shuffle of the first stage's order, so that neither a rank
    prior nor the input position can carry the first stage's ranking.
    """

    def __init__(self, reranker: Reranker, *, first_stage: bool = True, seed: int = 13) -> None:
        self.reranker = reranker
        self.first_stage = first_stage
        self.seed = seed

    def __call__(self, query: RerankQuery) -> dict[str, float]:
        cands = sorted(query.candidates, key=lambda c: c.first_stage_rank)
        if not self.first_stage:
            random.Random(f"{self.seed}:{query.qid}").shuffle(cands)
        docs = [Document(text=c.text, id=c.doc_id, title=c.title or None) for c in cands]
        order = list(range(len(docs))) if self.first_stage else None
        raw = self.reranker.score(query.query, docs, first_stage_order=order).raw
        return {c.doc_id: float(s) for c, s in zip(cands, raw, strict=True)}


class CompressorRankSystem:
    """A compressor as a harness ranker: each candidate's score is the one-pass document score of
    :meth:`Compressor.rerank_and_compress` (the document probe read from the same forward where
    the proxy ships one, else the best sentence's keep probability). Candidates are passed in a
    seeded shuffle, as the service would receive them: no first-stage order."""

    def __init__(self, compressor: Compressor, *, seed: int = 13) -> None:
        self.compressor = compressor
        self.seed = seed

    def __call__(self, query: RerankQuery) -> dict[str, float]:
        cands = list(query.candidates)
        random.Random(f"{self.seed}:{query.qid}").shuffle(cands)
        docs = [Document(text=c.text, id=c.doc_id, title=c.title or None) for c in cands]
        ranked, _ = self.compressor.rerank_and_compress(query.query, docs, ratio=1.0)
        return {cands[r.index].doc_id: float(r.raw_score) for r in ranked}


def _documents(passages: Sequence[Passage]) -> tuple[list[Document], list[Unit]]:
    docs = [Document(text=p.text, title=p.title or None) for p in passages]
    units = [Unit(d, a, b) for d, p in enumerate(passages) for a, b in p.sentence_spans]
    return docs, units


def _unflatten(flat: np.ndarray, passages: Sequence[Passage]) -> list[np.ndarray]:
    out, cursor = [], 0
    for p in passages:
        out.append(flat[cursor : cursor + len(p.sentence_spans)])
        cursor += len(p.sentence_spans)
    return out


class FeatureCache:
    """The widest feature blocks of each example (all layers, last and query-span rows, lexical
    and MiniLM columns), computed once and shared by the probe methods. With a
    :class:`~ragattn.lab.feature_store.FeatureStore` they persist on disk across runs."""

    def __init__(
        self,
        proxy: Proxy,
        store: FeatureStore | None = None,
        source: str = "",
        blocks: BlockReader | None = None,
    ) -> None:
        if store is not None and blocks is not None:
            raise ValueError("the feature store holds full-prompt features; read blocks without it")
        self.proxy = proxy
        self.store = store
        self.blocks = blocks
        self.source = source or "eval"
        self._features: dict[tuple[str, tuple[str, ...]], SentenceFeatures] = {}

    def get(self, question: str, passages: Sequence[Passage]) -> SentenceFeatures:
        key = (question, tuple(p.text for p in passages))
        if key not in self._features:
            docs, units = _documents(passages)
            if self.store is not None:
                feats, _ = self.store.get(self.source, question, docs, units)
            else:
                feats = sentence_features(
                    self.proxy, question, docs, units, rows="both", reader=self.blocks
                )
            self._features[key] = feats
        return self._features[key]


class ProbeSystem:
    """A trained probe method (fused / sentinel / lexical, or any given :class:`Probe`) scoring
    gold sentences from the shared features (the probe reads its own columns of them)."""

    def __init__(
        self,
        cache: FeatureCache,
        method: str,
        models_dir: Path | None = None,
        probe: Probe | None = None,
    ) -> None:
        self.cache = cache
        self.probe = probe or Probe.load(
            probe_path(models_dir or default_models_dir(), cache.proxy, method)
        )

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        feats = self.cache.get(question, passages)
        return _unflatten(self.probe.predict(feats.names, feats.matrix, feats.config), passages)


class DocumentAwareSystem:
    """A probe method with document-aware selection (:mod:`ragattn.compress.selection`): each
    sentence's probability weighed by its passage's document-probe score from the same features,
    as :class:`~ragattn.compress.Compressor` does with ``selection="documents"``."""

    def __init__(self, cache: FeatureCache, method: str, models_dir: Path | None = None) -> None:
        folder = models_dir or default_models_dir()
        self.sentences = ProbeSystem(cache, method, folder)
        self.document_probe = load_document_probe(folder, proxy_slug(cache.proxy))
        self.selection = ModelFiles(folder, proxy_slug(cache.proxy)).required_selection()

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        cache = self.sentences.cache
        feats = cache.get(question, passages)
        docs, units = _documents(passages)
        probability = self.sentences.probe.predict(feats.names, feats.matrix, feats.config)
        raw = score_documents(
            self.document_probe,
            cache.proxy.tokenizer,
            question,
            docs,
            units,
            feats.names,
            feats.matrix,
            feats.config,
            minilm=self.selection.reads_minilm,
        )
        combined = self.selection.weigh(question, docs, units, probability, raw)
        return _unflatten(combined, passages)


class CompressorSystem:
    """A :class:`Compressor` scoring the gold sentences as :meth:`Compressor.compress` would
    under ``ratio`` (a cascade cuts the context as it would for that budget; every budget of the
    report then selects from these scores)."""

    def __init__(self, compressor: Compressor, *, ratio: float = 0.2) -> None:
        self.compressor = compressor
        self.budget = Budget(kind="ratio", value=ratio)

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        docs, units = _documents(passages)
        scores, _, _ = self.compressor.context_scores(question, docs, units, self.budget)
        return _unflatten(scores, passages)


class RawAttentionSystem:
    """Untrained baseline: mean over all heads of the log context share (Sentinel features)."""

    def __init__(self, cache: FeatureCache) -> None:
        self.cache = cache

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        feats = self.cache.get(question, passages)
        cols = [i for i, n in enumerate(feats.names) if n.startswith("last:")]
        return _unflatten(feats.matrix[:, cols].mean(axis=1), passages)


class FocalSystem:
    """AttentionRAG's focal answer-prefix token."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    def score(self, question: str, passages: Sequence[Passage]) -> list[np.ndarray]:
        docs, units = _documents(passages)
        return _unflatten(focal_scores(self.proxy, question, docs, units)[0], passages)
