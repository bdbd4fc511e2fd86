"""Attention shares of sentences: one proxy forward, every head's reading of every sentence.

The prompt is Sentinel's (methods.md §4.2): "Given the following information: <context> Answer the
following question ... <q> Answer:". The attention row of the last prompt token (and/or the rows of
the question span), per (layer, head), is renormalised over the context tokens (a share of context
attention); each sentence gets the mean share over its tokens. Shares are multiplied by the number
of context tokens (1.0 = uniform reading) and log-transformed, so features do not depend on context
length. Long contexts are read in chunks of whole sentences of at most ``max_chunk_tokens`` proxy
tokens; every chunk carries the question, so features stay comparable.

Both the sentence probes of compression (:mod:`ragattn.compress.features`) and the document probe
of reranking (:mod:`ragattn.document_probe`, :mod:`ragattn.rerank.probe`) read these numbers, so
one forward can serve both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.cancel import check_cancelled
from ragattn.errors import ConfigError
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


def units_of(
    documents: Sequence[Document], spans: Callable[[str], Iterable[tuple[int, int]]]
) -> list[Unit]:
    """The units of ``documents``, document by document: ``spans`` of each text (character
    ranges ``[start, end)``, e.g. its sentences or its Markdown units), as :class:`Unit`."""
    return [
        Unit(d, start, end) for d, doc in enumerate(documents) for start, end in spans(doc.text)
    ]


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
    max_chunk_tokens: int = 2048,
    layers: int | None = None,
    rows: Rows = "last",
) -> tuple[np.ndarray, tuple[str, ...], int]:
    """Log-share attention features per unit: ``[n_units, layers*H]`` (twice that with
    rows="both"), from **one** forward per chunk of at most ``max_chunk_tokens`` proxy tokens,
    which stops after layer ``layers - 1``.

    ``layers`` is the number of leading layers read (None: all). The query-span rows and the last
    row come from the same capture, so ``rows="both"`` costs no second forward, and a
    layer-restricted probe's features equal the corresponding columns of the all-layer features.
    """
    engine = engine_for(proxy)
    heads, kinds = head_plan(proxy, rows=rows, layers=layers)
    n_heads = len(heads)
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
        for b, kind in enumerate(kinds):
            out[scored, b * n_heads : (b + 1) * n_heads] = unit_shares(
                cap.weights, kind, ctx, starts, ends
            )
    return np.log(out + EPS), feature_names(heads, kinds), len(chunks)


def head_plan(proxy: Proxy, *, rows: Rows, layers: int | None) -> tuple[HeadSet, list[str]]:
    """Every head of the first ``layers`` layers (None: all) and the row kinds ``rows`` reads."""
    depth = proxy.num_layers if layers is None else layers
    if not 1 <= depth <= proxy.num_layers:
        raise ConfigError(f"layers must be in [1, {proxy.num_layers}], got {layers}")
    kinds = ["last", "query"] if rows == "both" else [str(rows)]
    return HeadSet.from_layers(range(depth), proxy.num_heads), kinds


def feature_names(heads: HeadSet, kinds: Sequence[str]) -> tuple[str, ...]:
    """Column names of the attention block: ``<kind>:L<layer>H<head>``, kind-major."""
    return tuple(f"{kind}:L{layer}H{h}" for kind in kinds for layer, h in heads.pairs)


def unit_shares(
    weights: torch.Tensor,
    kind: str,
    ctx: tuple[int, int],
    starts: Sequence[int],
    ends: Sequence[int],
) -> np.ndarray:
    """Each unit's mean share of context attention, per head: ``[units, heads]`` float64.

    ``weights`` are captured rows ``[heads, R, keys]``; ``kind`` ``"last"`` reads the last row,
    ``"query"`` the mean of all rows. The share is renormalised over the context keys
    ``[ctx[0], ctx[1])`` and multiplied by their number (1.0 = uniform reading); ``starts`` and
    ``ends`` are the units' token ranges relative to ``ctx[0]``.
    """
    n_ctx = max(1, ctx[1] - ctx[0])
    lo = torch.tensor(list(starts), device=weights.device)
    hi = torch.tensor(list(ends), device=weights.device)
    width = (hi - lo).to(torch.float32)
    rows = weights[:, -1] if kind == "last" else weights.mean(dim=1)
    share = rows[:, ctx[0] : ctx[1]]
    share = share / share.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    share = torch.nan_to_num(share) * n_ctx  # [heads, ctx]; 1.0 = uniform reading
    # Mean share over each unit's tokens by prefix sums: one kernel for all units.
    csum = torch.nn.functional.pad(share.double().cumsum(dim=-1), (1, 0))
    means = (csum[:, hi] - csum[:, lo]) / width.double()  # [heads, units]
    return means.T.cpu().numpy()


def attention_config(proxy: Proxy, *, rows: Rows, layers: int | None) -> dict[str, Any]:
    """What a probe must match to read this proxy's attention features: the rows, the number of
    leading layers read and the weights' dtype (bf16 features differ from fp32 ones)."""
    return {
        "rows": rows,
        "layers": proxy.num_layers if layers is None else layers,
        "dtype": "int8" if proxy.quantize == "int8" else str(proxy.dtype).removeprefix("torch."),
    }


def unit_widths(tokenizer: Any, documents: Sequence[Document], units: Sequence[Unit]) -> np.ndarray:
    """Each unit's width in proxy tokens (at least 1): the weight of its share when sentence
    shares are pooled into a document's mass."""
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    if not texts:
        return np.zeros(0)
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return np.array([max(1, len(x)) for x in ids], dtype=np.float64)
