"""In-Context Reranking (ICR, Chen et al. 2024) over a selectable head set, plus ReAttn
re-weighting.

All candidates go into one listwise prompt (best first-stage document last, nearest the query);
the query span (late instruction + ``Query: q`` + chat suffix) attends to the documents. Per head,
the attention rows of the query span are averaged; the same is done for the content-free twin
(``N/A`` as the query), whose document prefix is encoded once and reused through the KV cache.

Scores, per document d with tokens T_d (ICR's ``masked_NA_calibration``):
    s_t = Σ_{(l,h) ∈ S} mean_q a^{l,h}_{q→t}        (attention probability mass)
    δ_t = s_t − c_t                                  (c: the same for the N/A twin)
    τ_d = mean_{T_d} δ − 2·std_{T_d} δ
    raw(d) = Σ_{t ∈ T_d, δ_t > τ_d} δ_t
raw is in units of attention probability summed over the head set S. relevance_score maps it to
[0, 1] by ``sigmoid(raw / (|S| · 0.01))``: a document that gains one percentage point of attention
per head over calibration scores 0.73.

Long lists are split into windows of at most ``max_window_tokens`` prompt tokens with about equal
document counts; raw scores are multiplied by the window's document count so that mass per slot
stays comparable across windows (a uniform reader gives 1/n per document). The split is reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ragattn.attention import Capture, HeadSet, engine_for
from ragattn.cancel import check_cancelled
from ragattn.errors import InvalidInputError
from ragattn.lexical import sigmoid
from ragattn.limits import cut_at_tokens
from ragattn.prompt import (
    CALIBRATION_QUERY,
    BuiltPrompt,
    assemble,
    document_text,
    rerank_pieces,
    shared_prefix_length,
    with_query,
)
from ragattn.proxy import Proxy
from ragattn.rerank.base import DocScores
from ragattn.types import Document


@dataclass(frozen=True, slots=True)
class WindowAttention:
    """Calibrated per-head, per-token attention of one window.

    ``delta`` is ``[n_heads, n_keys]`` fp32 (real minus N/A when calibrated); ``prompt`` gives the
    token span of each document; ``docs`` are the input indices in prompt order.
    """

    prompt: BuiltPrompt
    delta: torch.Tensor
    docs: tuple[int, ...]


def _heads_for(proxy: Proxy, heads: HeadSet | str) -> HeadSet:
    if isinstance(heads, HeadSet):
        return heads
    if heads == "all":
        layers = proxy.full_attention_layers()
        return HeadSet.from_layers(layers, proxy.num_heads)
    if heads == "middle":
        lo, hi = int(0.35 * proxy.num_layers), int(0.65 * proxy.num_layers)
        middle = [layer for layer in proxy.full_attention_layers() if lo <= layer <= hi]
        return HeadSet.from_layers(middle or proxy.full_attention_layers(), proxy.num_heads)
    raise InvalidInputError(f"unknown head set {heads!r}; use 'all', 'middle' or a HeadSet")


def plan_windows(token_counts: Sequence[int], order: Sequence[int], budget: int) -> list[list[int]]:
    """Split ``order`` (prompt order) into consecutive windows of about equal document count whose
    token counts each fit ``budget``."""
    total = sum(token_counts[i] for i in order)
    n_windows = max(1, math.ceil(total / max(1, budget)))
    while True:
        size = math.ceil(len(order) / n_windows)
        windows = [list(order[i : i + size]) for i in range(0, len(order), size)]
        if all(sum(token_counts[i] for i in w) <= budget for w in windows) or size == 1:
            return windows
        n_windows += 1


class AttentionMemo:
    """Shares one capture of *all* full-attention heads between scorers that read the same list.

    For evaluations and ablations: several methods (head subsets, ReAttn, fusion) over the same
    query and candidates cost one forward pass instead of one each; each scorer slices its heads
    out of the memoised rows. Results equal a direct capture of the subset.
    """

    def __init__(self) -> None:
        self._store: dict[tuple, tuple[list[WindowAttention], list[str]]] = {}

    def get(self, key: tuple) -> tuple[list[WindowAttention], list[str]] | None:
        return self._store.get(key)

    def put(self, key: tuple, value: tuple[list[WindowAttention], list[str]]) -> None:
        self._store[key] = value


class WindowedAttention:
    """Builds listwise windows and captures calibrated query→document attention for each."""

    def __init__(
        self,
        proxy: Proxy,
        heads: HeadSet | str = "all",
        *,
        calibrate: bool = True,
        instruction: str = "ie",
        max_window_tokens: int = 3072,
        max_doc_tokens: int = 400,
        memo: AttentionMemo | None = None,
        query_first: bool = False,
        docs_per_window: int | None = None,
    ) -> None:
        if docs_per_window is not None and docs_per_window < 1:
            raise InvalidInputError(f"docs_per_window must be >= 1, got {docs_per_window}")
        self.proxy = proxy
        self.engine = engine_for(proxy)
        self.heads = _heads_for(proxy, heads)
        self.calibrate = calibrate
        self.instruction = instruction
        self.max_window_tokens = max_window_tokens
        self.max_doc_tokens = max_doc_tokens
        self.memo = memo
        self.query_first = query_first
        self.docs_per_window = docs_per_window

    def _truncate(
        self, documents: Sequence[Document]
    ) -> tuple[list[Document], list[int], list[str]]:
        tok = self.proxy.tokenizer
        out, counts, warnings = [], [], []
        for i, doc in enumerate(documents):
            body, offset = document_text(doc)
            enc = tok(body, add_special_tokens=False, return_offsets_mapping=True)
            n = len(enc["input_ids"])
            cut = cut_at_tokens(enc["offset_mapping"], self.max_doc_tokens)
            if cut is not None:
                text_cut = max(0, cut - offset)
                warnings.append(
                    f"document {i} truncated to its first {self.max_doc_tokens} proxy tokens "
                    "for scoring "
                    f"({n} tokens); it is returned whole"
                )
                doc = Document(
                    text=doc.text[:text_cut], id=doc.id, title=doc.title, metadata=doc.metadata
                )
                n = self.max_doc_tokens
            out.append(doc)
            counts.append(n + 8)
        return out, counts, warnings

    def run(
        self, query: str, documents: Sequence[Document], prompt_order: Sequence[int]
    ) -> tuple[list[WindowAttention], list[str]]:
        """Capture calibrated attention for the documents laid out in ``prompt_order`` (last =
        nearest the query). Returns one :class:`WindowAttention` per window and the warnings."""
        if self.memo is None:
            return self._run(query, documents, prompt_order, self.heads)
        superset = _heads_for(self.proxy, "all")
        key = (
            query,
            tuple((d.title, d.text) for d in documents),
            tuple(prompt_order),
            self.calibrate,
            self.instruction,
            self.max_window_tokens,
            self.max_doc_tokens,
            self.query_first,
            self.docs_per_window,
        )
        found = self.memo.get(key)
        if found is None:
            found = self._run(query, documents, prompt_order, superset)
            self.memo.put(key, found)
        rows = torch.tensor(
            [superset.pairs.index(p) for p in self.heads.pairs],
            dtype=torch.long,
            device=self.proxy.device,
        )
        windows, warnings = found
        return [
            WindowAttention(prompt=w.prompt, delta=w.delta.index_select(0, rows), docs=w.docs)
            for w in windows
        ], list(warnings)

    def _run(
        self, query: str, documents: Sequence[Document], prompt_order: Sequence[int], heads: HeadSet
    ) -> tuple[list[WindowAttention], list[str]]:
        docs, counts, warnings = self._truncate(documents)
        q_tokens = len(self.proxy.tokenizer(query, add_special_tokens=False)["input_ids"])
        budget = self.max_window_tokens - (2 if self.query_first else 1) * q_tokens - 64
        if budget < max(counts):
            raise InvalidInputError(
                f"the query is too long ({q_tokens} proxy tokens) to fit a scoring window of "
                f"{self.max_window_tokens} tokens"
            )
        windows = plan_windows(counts, prompt_order, budget)
        if self.docs_per_window is not None:
            size = self.docs_per_window
            windows = [w[i : i + size] for w in windows for i in range(0, len(w), size)]
        if len(windows) > 1:
            warnings.append(
                f"{len(documents)} documents were scored in {len(windows)} windows of at most "
                f"{self.max_window_tokens} proxy tokens; raw scores are scaled by window size"
            )
        results = [self._window(query, docs, w, heads) for w in windows]
        return results, warnings

    def _window(
        self, query: str, docs: Sequence[Document], order: Sequence[int], heads: HeadSet
    ) -> WindowAttention:
        check_cancelled()  # a window boundary
        family = self.proxy.chat_family
        pieces = rerank_pieces(
            query,
            docs,
            order,
            family=family,
            instruction=self.instruction,
            query_first=self.query_first,
        )
        real = assemble(pieces, self.proxy.tokenizer)
        rows_real = range(real.query_span.start, real.query_span.end)
        if not self.calibrate:
            cap = self.engine.capture(real.input_ids, list(rows_real), heads, reduce="mean")
            return WindowAttention(prompt=real, delta=cap.weights[:, 0, :], docs=tuple(order))
        twin = assemble(with_query(pieces, CALIBRATION_QUERY), self.proxy.tokenizer)
        prefix = min(shared_prefix_length(real, twin), real.query_span.start, twin.query_span.start)
        last_doc = max(real.document(i).tokens.end for i in order)
        if prefix < last_doc:
            raise InvalidInputError("the calibration twin does not share the document prefix")
        ids_r, ids_t = real.input_ids, twin.input_ids
        caps: list[Capture] = self.engine.capture_shared_prefix(
            ids_r[:prefix],
            [
                (ids_r[prefix:], list(rows_real)),
                (ids_t[prefix:], list(range(twin.query_span.start, twin.query_span.end))),
            ],
            heads,
            reduce="mean",
        )
        s = caps[0].weights[:, 0, :prefix]
        c = caps[1].weights[:, 0, :prefix]
        return WindowAttention(prompt=real, delta=s - c, docs=tuple(order))


def masked_sum(delta: np.ndarray, sigma: float | None) -> float:
    """ICR's per-document rule: drop tokens below mean − sigma·std, sum the rest."""
    if delta.size == 0:
        return 0.0
    if sigma is None:
        return float(delta.sum())
    tau = float(delta.mean() - sigma * delta.std())
    return float(delta[delta > tau].sum())


def reattn_weights(
    token_ids: Sequence[np.ndarray], query_ids: set[int], *, normalise: bool = True
) -> list[np.ndarray]:
    """ReAttn's cross-document IDF (RECONSTRUCTION, methods.md §3.3; not the paper's exact formula).

    Tokens that also occur in the query get ``w = log((N+1)/(df+1)) + 1`` where df counts the
    candidates containing the token; other tokens get 1. With ``normalise`` the query-token weights
    are divided by ``log(N+1) + 1`` so that they lie in (0, 1]: a query word present in every
    candidate is down-weighted most.
    """
    n = len(token_ids)
    df: dict[int, int] = {}
    for ids in token_ids:
        for t in set(ids.tolist()):
            df[t] = df.get(t, 0) + 1
    top = math.log(n + 1) + 1 if normalise else 1.0
    out = []
    for ids in token_ids:
        w = np.ones(len(ids), dtype=np.float64)
        for j, t in enumerate(ids.tolist()):
            if t in query_ids:
                w[j] = (math.log((n + 1) / (df[t] + 1)) + 1) / top
        out.append(w)
    return out


def entropy_weight(mass: np.ndarray, lam: float) -> float:
    """ReAttn's entropy term (RECONSTRUCTION): ``1 + λ · H(p) / log|d|`` over non-negative mass."""
    pos = np.clip(mass, 0.0, None)
    total = pos.sum()
    if total <= 0 or len(pos) < 2:
        return 1.0
    p = pos / total
    nz = p[p > 0]
    return 1.0 + lam * float(-(nz * np.log(nz)).sum() / math.log(len(pos)))


class IcrScorer:
    """ICR document scores over a head set; optional calibration, mask and ReAttn terms."""

    def __init__(
        self,
        proxy: Proxy,
        *,
        heads: HeadSet | str = "all",
        calibrate: bool = True,
        mask_sigma: float | None = 2.0,
        idf: bool = False,
        entropy_lambda: float = 0.0,
        instruction: str = "ie",
        max_window_tokens: int = 3072,
        name: str = "icr",
        memo: AttentionMemo | None = None,
        query_first: bool = False,
        docs_per_window: int | None = None,
        orders: int = 1,
    ) -> None:
        if orders not in (1, 2):
            raise InvalidInputError(f"orders must be 1 or 2, got {orders}")
        self.name = name
        self.orders = orders
        self.windows = WindowedAttention(
            proxy,
            heads,
            calibrate=calibrate,
            instruction=instruction,
            max_window_tokens=max_window_tokens,
            memo=memo,
            query_first=query_first,
            docs_per_window=docs_per_window,
        )
        self.mask_sigma = mask_sigma
        self.idf = idf
        self.entropy_lambda = entropy_lambda

    @property
    def heads(self) -> HeadSet:
        return self.windows.heads

    def score(
        self, query: str, documents: Sequence[Document], first_stage_order: Sequence[int] | None
    ) -> DocScores:
        """Raw score of a document: its calibrated attention mass (probability units summed over
        the selected heads and the document's kept tokens) times the number of documents in its
        window, so windows of different sizes stay comparable; with ``orders=2`` the mean over the
        first-stage order (best last, nearest the query) and its reverse. Without a first-stage
        order the documents are read in input order: ICR is listwise, so its scores keep a residual
        dependence on that order (BENCHMARKS.md §2 measures it)."""
        tok = self.windows.proxy.tokenizer
        query_ids = set(tok(query.lower(), add_special_tokens=False)["input_ids"])
        query_ids |= set(tok(query, add_special_tokens=False)["input_ids"])
        order = range(len(documents)) if first_stage_order is None else first_stage_order
        prompt_order = list(reversed(order))
        raw, n_windows, warnings = self._raw(query, documents, prompt_order, query_ids)
        if self.orders == 2:
            raw2, n2, _ = self._raw(query, documents, prompt_order[::-1], query_ids)
            raw = (raw + raw2) / 2.0
            n_windows += n2
            warnings.append(
                "scored in two document orders (position-bias averaging): twice the forward cost"
            )
        scale = len(self.heads) * 0.01
        return DocScores(
            raw=raw, relevance=sigmoid(raw / scale), windows=n_windows, warnings=tuple(warnings)
        )

    def _raw(
        self,
        query: str,
        documents: Sequence[Document],
        prompt_order: Sequence[int],
        query_ids: set[int],
    ) -> tuple[np.ndarray, int, list[str]]:
        windows, warnings = self.windows.run(query, documents, prompt_order)
        raw = np.zeros(len(documents), dtype=np.float64)
        for win in windows:
            per_token = win.delta.sum(dim=0).cpu().numpy().astype(np.float64)
            spans = [win.prompt.document(i).tokens for i in win.docs]
            masses = [per_token[sp.as_slice()] for sp in spans]
            if self.idf:
                ids = [np.asarray(win.prompt.input_ids[sp.as_slice()]) for sp in spans]
                weights = reattn_weights(ids, query_ids)
                masses = [m * np.where(m > 0, w, 1.0) for m, w in zip(masses, weights, strict=True)]
            for i, mass in zip(win.docs, masses, strict=True):
                value = masked_sum(mass, self.mask_sigma)
                if self.entropy_lambda:
                    value *= entropy_weight(mass, self.entropy_lambda) if value > 0 else 1.0
                raw[i] = value * len(win.docs)
        return raw, len(windows), list(warnings)
