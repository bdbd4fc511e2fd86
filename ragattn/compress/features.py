"""Per-sentence features from one proxy forward pass (Sentinel) plus cheap lexical/dense signals.

Attention features (Sentinel, methods.md §4.2): the prompt is "Given the following information:
<context> Answer the following question ... <q> Answer:"; the attention row of the last prompt
token, per (layer, head), is renormalised over the context tokens (a share of context attention);
each sentence gets the mean share over its tokens. Shares are multiplied by the number of context
tokens (1.0 = uniform reading) and log-transformed, so features do not depend on context length.
Optionally the rows of the whole question span are averaged as a second block (ICR-style).

Long contexts are read in chunks of whole sentences of at most ``max_chunk_tokens`` proxy tokens;
every chunk carries the question, so features stay comparable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.cancel import check_cancelled
from ragattn.errors import ConfigError
from ragattn.lexical import bm25_scores, dense_scores, words
from ragattn.prompt import assemble, sentinel_pieces
from ragattn.proxy import Proxy
from ragattn.types import Document

EPS = 1e-3
Rows = Literal["last", "query", "both"]


@dataclass(frozen=True, slots=True)
class Unit:
    """A sentence: document index and character range ``[start, end)`` of that document's text."""

    doc: int
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSet:
    """Which feature blocks a sentence probe reads: Sentinel attention (``rows`` says which
    attention rows), the lexical block (BM25, position, length) and its MiniLM columns."""

    attention: bool
    lexical: bool
    dense: bool
    rows: Rows = "last"
    layers: int | None = None  # leading layers the attention block reads (None: all)


@dataclass(frozen=True, slots=True, kw_only=True)
class SentenceFeatures:
    """A ``[len(units), len(names)]`` float64 matrix, one row per unit, columns named.

    ``config`` says how the attention block was computed (``rows``, ``layers`` read, weights'
    ``dtype``; empty without attention): a probe refuses features computed another way.
    """

    units: tuple[Unit, ...]
    names: tuple[str, ...]
    matrix: np.ndarray
    chunks: int
    config: Mapping[str, Any] = field(default_factory=dict)


def plan_chunks(
    proxy: Proxy, documents: Sequence[Document], units: Sequence[Unit], budget: int
) -> list[list[int]]:
    """Group unit indices into chunks of whole sentences of at most ``budget`` tokens (in order)."""
    tok = proxy.tokenizer
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    costs = (
        [len(ids) + 1 for ids in tok(texts, add_special_tokens=False)["input_ids"]] if texts else []
    )
    chunks: list[list[int]] = [[]]
    used = 0
    for i, cost in enumerate(costs):
        if chunks[-1] and used + cost > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(i)
        used += cost
    return [c for c in chunks if c]


def chunk_context(
    documents: Sequence[Document], units: Sequence[Unit], chunk: Sequence[int]
) -> tuple[list[Document], dict[int, tuple[int, int]]]:
    """The sub-documents a chunk reads: per document, the text from its first to its last unit in
    the chunk (original text between them kept, so spans stay exact). Returns them and, per input
    document, ``(sub-document index, character offset of the sub-document in the original)``."""
    sub_docs: list[Document] = []
    offsets: dict[int, tuple[int, int]] = {}
    for d in sorted({units[i].doc for i in chunk}):
        members = [units[i] for i in chunk if units[i].doc == d]
        lo, hi = members[0].start, members[-1].end
        offsets[d] = (len(sub_docs), lo)
        sub_docs.append(Document(text=documents[d].text[lo:hi]))
    return sub_docs, offsets


def attention_block(
    proxy: Proxy,
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    *,
    rows: Rows = "last",
    layers: int | None = None,
    max_chunk_tokens: int = 2048,
) -> tuple[np.ndarray, tuple[str, ...], int]:
    """Log-share attention features per unit: ``[n_units, layers*H]`` (twice that with
    rows="both"), from **one** forward per chunk that stops after layer ``layers - 1``.

    ``layers`` is the number of leading layers read (None: all). The query-span rows and the last
    row come from the same capture, so ``rows="both"`` costs no second forward, and a
    layer-restricted probe's features equal the corresponding columns of the all-layer features.
    """
    engine = engine_for(proxy)
    depth = proxy.num_layers if layers is None else layers
    if not 1 <= depth <= proxy.num_layers:
        raise ConfigError(f"layers must be in [1, {proxy.num_layers}], got {layers}")
    heads = HeadSet.from_layers(range(depth), proxy.num_heads)
    n_heads = len(heads)
    kinds: list[str] = ["last", "query"] if rows == "both" else [rows]
    out = np.zeros((len(units), n_heads * len(kinds)), dtype=np.float64)
    chunks = plan_chunks(proxy, documents, units, max_chunk_tokens)
    for chunk in chunks:
        check_cancelled()  # a chunk boundary
        sub_docs, offsets = chunk_context(documents, units, chunk)
        built = assemble(sentinel_pieces(query, sub_docs), proxy.tokenizer)
        ctx = (built.document(0).tokens.start, built.document(len(sub_docs) - 1).tokens.end)
        last = len(built.input_ids) - 1
        span_rows = [last] if rows == "last" else list(range(built.query_span.start, last + 1))
        cap = engine.capture(built.input_ids, span_rows, heads, reduce="none")
        n_ctx = max(1, ctx[1] - ctx[0])
        scored: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        for i in chunk:
            unit = units[i]
            sub, base = offsets[unit.doc]
            span = built.document_text_tokens(sub, unit.start - base, unit.end - base)
            if len(span) == 0:
                continue
            scored.append(i)
            starts.append(span.start - ctx[0])
            ends.append(span.end - ctx[0])
        if not scored:
            continue
        lo = torch.tensor(starts, device=cap.weights.device)
        hi = torch.tensor(ends, device=cap.weights.device)
        width = (hi - lo).to(torch.float32)
        for b, kind in enumerate(kinds):
            weights = cap.weights[:, -1] if kind == "last" else cap.weights.mean(dim=1)
            share = weights[:, ctx[0] : ctx[1]]
            share = share / share.sum(dim=-1, keepdim=True).clamp_min(1e-12)
            share = torch.nan_to_num(share) * n_ctx  # [heads, ctx]; 1.0 = uniform reading
            # Mean share over each unit's tokens by prefix sums: one kernel for all units.
            csum = torch.nn.functional.pad(share.double().cumsum(dim=-1), (1, 0))
            means = (csum[:, hi] - csum[:, lo]) / width.double()  # [heads, units]
            out[scored, b * n_heads : (b + 1) * n_heads] = means.T.cpu().numpy()
    names = tuple(f"{kind}:L{layer}H{h}" for kind in kinds for layer, h in heads.pairs)
    return np.log(out + EPS), names, len(chunks)


def lexical_block(
    query: str, documents: Sequence[Document], units: Sequence[Unit], *, dense: bool
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Cheap features: BM25 share, MiniLM cosine (and its rank share), position and length."""
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    cols = [bm25_scores(query, texts)]
    names = ["bm25"]
    if dense:
        cos = dense_scores(query, texts)
        cols += [cos, cos - cos.max()]
        names += ["dense", "dense_gap"]
    per_doc: dict[int, list[int]] = {}
    for i, u in enumerate(units):
        per_doc.setdefault(u.doc, []).append(i)
    position = np.zeros(len(units))
    first = np.zeros(len(units))
    for members in per_doc.values():
        for rank, i in enumerate(members):
            position[i] = rank / max(1, len(members) - 1)
            first[i] = 1.0 if rank == 0 else 0.0
    length = np.array([math.log(1 + len(words(t))) for t in texts])
    cols += [position, first, length]
    names += ["position", "first", "log_words"]
    return np.stack(cols, axis=1), tuple(names)


def sentence_features(
    proxy: Proxy | None,
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    *,
    attention: bool = True,
    lexical: bool = True,
    dense: bool = True,
    rows: Rows = "last",
    layers: int | None = None,
    max_chunk_tokens: int = 2048,
) -> SentenceFeatures:
    """All requested feature blocks for ``units``, concatenated in a fixed order."""
    blocks: list[np.ndarray] = []
    names: list[str] = []
    chunks = 0
    config: dict[str, Any] = {}
    if attention:
        if proxy is None:
            raise ConfigError("attention features need a loaded proxy")
        block, block_names, chunks = attention_block(
            proxy,
            query,
            documents,
            units,
            rows=rows,
            layers=layers,
            max_chunk_tokens=max_chunk_tokens,
        )
        blocks.append(block)
        names += block_names
        config = attention_config(proxy, rows=rows, layers=layers)
    if lexical:
        block, block_names = lexical_block(query, documents, units, dense=dense)
        blocks.append(block)
        names += block_names
    matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(units), 0))
    return SentenceFeatures(
        units=tuple(units), names=tuple(names), matrix=matrix, chunks=chunks, config=config
    )


def attention_config(proxy: Proxy, *, rows: Rows, layers: int | None) -> dict[str, Any]:
    """What a probe must match to read this proxy's attention features: the rows, the number of
    leading layers read and the weights' dtype (bf16 features differ from fp32 ones)."""
    return {
        "rows": rows,
        "layers": proxy.num_layers if layers is None else layers,
        "dtype": "int8" if proxy.quantize == "int8" else str(proxy.dtype).removeprefix("torch."),
    }
