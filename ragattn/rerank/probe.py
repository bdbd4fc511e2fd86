"""``attention-probe``: documents ranked by a probe over every head's attention, on top of MiniLM.

One forward of the proxy reads the documents in the Sentinel layout (documents, question,
"Answer:") and stops after the probe's deepest layer; every sentence's attention share per head is
pooled per document (:mod:`ragattn.document_probe`), z-scored within the window, and the
:class:`~ragattn.document_probe.DocumentProbe` adds its weighted sum to ``a * z(MiniLM)``, where
MiniLM is z-scored over the whole list.

Order-free by construction: documents are placed in the prompt in a canonical order (by a hash of
their text), never in input order, and every feature is z-scored within its window (MiniLM within
the list), so the same documents in any input order give bit-identical scores. Lists longer than
``docs_per_window`` are read in windows of that many documents in the same canonical order
(reported in ``warnings``); the attention term ranks a document against its window, the MiniLM
base against the whole list, so a window without a relevant document does not lift its best one to
the top. The probe was trained on lists of 20, one window, where both scales are the same.
Documents longer than the probe's ``max_doc_tokens`` proxy tokens are read by their first
``max_doc_tokens`` tokens (reported in ``warnings``): the probe was trained on documents of that
length.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ragattn.document_probe import DocumentProbe, attention_correction
from ragattn.errors import ModelLoadError
from ragattn.lexical import sigmoid
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores
from ragattn.rerank.features import dense_local
from ragattn.sentence_attention import (
    Rows,
    attention_block,
    attention_config,
    units_of,
)
from ragattn.sentences import split_sentences
from ragattn.types import Document

SCALE = (
    "raw_score: the document probe's pairwise log-odds (a x z(MiniLM) + w . z(attention); MiniLM "
    "z-scored within the list, attention within its window of documents); "
    "relevance_score = sigmoid(raw)"
)


def probe_rows(probe: DocumentProbe) -> Rows:
    """The probe's rows as the feature code names them."""
    rows = probe.rows
    if rows not in ("last", "query", "both"):
        raise ModelLoadError(f"document probe has unknown rows {rows!r}")
    return rows  # type: ignore[return-value]


def _canonical(documents: Sequence[Document]) -> list[int]:
    """Document indices in an order that depends only on the texts (ties: input order is
    irrelevant, identical texts get identical features)."""
    keys = [hashlib.sha256(d.text.encode("utf-8", "surrogatepass")).hexdigest() for d in documents]
    return sorted(range(len(documents)), key=lambda i: keys[i])


class AttentionProbeScorer:
    """See the module docstring. ``raw`` is in log-odds units; ``relevance = sigmoid(raw)``."""

    def __init__(
        self,
        proxy: Proxy,
        probe: DocumentProbe,
        *,
        name: str = "attention-probe",
        docs_per_window: int = 20,
    ) -> None:
        self.proxy = proxy
        self.probe = probe
        self.name = name
        self.docs_per_window = docs_per_window
        self.max_doc_tokens = int(probe.config.get("max_doc_tokens", 128))
        self.feature_config = attention_config(proxy, rows=probe_rows(probe), layers=probe.layers)
        probe.check_features(self.feature_config)

    def _cut(self, documents: Sequence[Document]) -> tuple[list[Document], int]:
        enc = self.proxy.tokenizer(
            [d.text for d in documents], add_special_tokens=False, return_offsets_mapping=True
        )
        out: list[Document] = []
        cut = 0
        for doc, offsets in zip(documents, enc["offset_mapping"], strict=True):
            if len(offsets) > self.max_doc_tokens:
                cut += 1
                end = offsets[self.max_doc_tokens - 1][1]
                out.append(Document(text=doc.text[:end], id=doc.id, title=doc.title))
            else:
                out.append(doc)
        return out, cut

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores:
        docs, cut = self._cut(documents)
        order = _canonical(docs)
        raw = np.zeros(len(docs))
        minilm = np.asarray(dense_local(query, docs), dtype=np.float64)
        # one scale for the whole list (a window's best document is not the list's best), summed
        # in the canonical order so that the floating-point result is free of the input order
        base = np.zeros(len(docs))
        base[order] = self.probe.base(minilm[order])
        windows = [
            order[w : w + self.docs_per_window] for w in range(0, len(order), self.docs_per_window)
        ]
        tok = self.proxy.tokenizer
        for window in windows:
            sub = [docs[i] for i in window]
            units = units_of(sub, lambda text: ((s.start, s.end) for s in split_sentences(text)))
            if not units:
                continue
            matrix, names, _ = attention_block(
                self.proxy,
                query,
                sub,
                units,
                rows=probe_rows(self.probe),
                layers=self.probe.layers,
                max_chunk_tokens=1 << 30,
            )
            raw[window] = base[window] + attention_correction(
                self.probe, tok, sub, units, names, matrix, self.feature_config
            )
        warnings: list[str] = []
        if cut:
            warnings.append(
                f"{cut} document(s) longer than {self.max_doc_tokens} proxy tokens were read by "
                f"their first {self.max_doc_tokens} tokens (the probe's training length)"
            )
        if len(windows) > 1:
            warnings.append(
                f"{len(docs)} documents were read in {len(windows)} windows of at most "
                f"{self.docs_per_window}"
            )
        return DocScores(
            raw=raw, relevance=sigmoid(raw), windows=len(windows), warnings=tuple(warnings)
        )
