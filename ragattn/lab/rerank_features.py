"""Per-head document features of ranking lists, extracted once into the compression feature store.

One forward per list reads all 20 documents in the Sentinel layout (documents, then the question,
then "Answer:"), and the store keeps, for every sentence of every document, the log share of the
attention of every head of every layer from the last position and from the query span
(:func:`ragattn.sentence_attention.attention_block`). Documents are one chunk (``max_chunk_tokens``
is raised above the list's length), so every document of a list is read by the same forward.

Document features are pooled from those sentence rows here, at training time, so the expensive part
is shared with compression and the pooling can change without a new extraction:

``mass`` (the document's token-weighted mean share) and ``best`` (its best sentence's share), per
head and row kind, as :func:`ragattn.document_probe.pool_documents` computes them at run time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ragattn.compress.features import SentenceFeatures, Unit
from ragattn.document_probe import pool_documents as pool
from ragattn.lab.feature_store import FeatureStore
from ragattn.lab.rerank_lists import RankingList
from ragattn.proxy import Proxy
from ragattn.sentence_attention import unit_widths
from ragattn.sentences import split_sentences

LIST_CHUNK_TOKENS = 8192
"""A list is one chunk: 20 documents of at most 160 tokens stay far below this."""


def list_units(ranking: RankingList) -> list[Unit]:
    """The sentences of every document of the list (the compression units)."""
    return [
        Unit(d, s.start, s.end)
        for d, doc in enumerate(ranking.documents)
        for s in split_sentences(doc.text)
    ]


def store_for(root: Path, proxy: Proxy, *, layers: int | None = None) -> FeatureStore:
    """The feature store of ranking lists: last and query-span rows, one chunk, and the first
    ``layers`` layers of the proxy (None: all). A recipe that reads only early layers (Gemma's
    5 and 11) extracts with the forward stopped after its deepest layer, as it is served; the
    layers it keeps are identical to a full forward's (the early-exit test checks this)."""
    return FeatureStore(root, proxy, rows="both", layers=layers, max_chunk_tokens=LIST_CHUNK_TOKENS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListFeatures:
    """A list's sentence features and what pooling needs: the unit of each row and its width in
    proxy tokens (the weight of its share in the document's mass)."""

    ranking: RankingList
    features: SentenceFeatures
    widths: np.ndarray


def extract(
    store: FeatureStore,
    lists: Sequence[RankingList],
    *,
    progress: bool = True,
    cached_only: bool = False,
) -> Iterator[ListFeatures]:
    """Features of every list (computed once, then read from disk), with a progress bar showing
    the extraction rate of the lists computed now."""
    tok = store.proxy.tokenizer
    bar = tqdm(lists, desc="lists", unit="list", disable=not progress)
    computed, seconds = 0, 0.0
    for ranking in bar:
        units = list_units(ranking)
        if not units:
            continue
        path = store.path(ranking.source, ranking.query, ranking.documents, units)
        if cached_only and not path.is_file():
            continue
        started = time.perf_counter()
        feats, fresh = store.get(ranking.source, ranking.query, ranking.documents, units)
        if fresh:
            computed += 1
            seconds += time.perf_counter() - started
            bar.set_postfix(s_per_list=f"{seconds / computed:.2f}")
        widths = unit_widths(tok, ranking.documents, units)
        yield ListFeatures(ranking=ranking, features=feats, widths=widths)


def pool_documents(item: ListFeatures) -> tuple[tuple[str, ...], np.ndarray]:
    """Per-document pooled attention columns of a list (see :mod:`ragattn.document_probe`)."""
    feats = item.features
    return pool(
        feats.names,
        feats.matrix,
        [u.doc for u in feats.units],
        item.widths,
        len(item.ranking.documents),
    )
