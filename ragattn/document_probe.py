"""Document relevance from the sentence attention features of one forward pass.

The compressor's forward (Sentinel layout: documents, then the question, then "Answer:") already
gives, for every sentence, the log share of context attention of every head, from the last
position and from the question span (:func:`ragattn.sentence_attention.attention_block`). Pooled per
document, the same numbers say how much each head reads each document, so one forward can rank the
documents and compress them (Provence's joint design, here with a probe over attention):

- ``mass``: the document's mean share over its tokens (token-weighted over its sentences), log;
- ``best``: its best sentence's share, log.

Each pooled column is z-scored within the call's documents, so the features neither depend on the
input order nor on the number or length of the documents. A :class:`DocumentProbe` scores a
document as ``minilm_weight * z(MiniLM cosine) + weights . z(attention)``: attention is a correction
fitted on top of MiniLM (``ragattn probe train --kind rerank``), so it cannot trade MiniLM away.

Both rerank (``attention-probe``) and compress (``rerank_and_compress``) read it; it imports
neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.assets import required_file
from ragattn.devices import probe_accepts_dtype
from ragattn.embed import dense_scores, document_cosines, text_offset, titled_text
from ragattn.errors import ConfigError
from ragattn.sentence_attention import Unit, unit_widths
from ragattn.types import Document

EPS = 1e-3
"""The floor added before the log in :func:`ragattn.sentence_attention.attention_block`."""
FORMAT = "ragattn-document-probe/1"
PROBE_FILE = "rerank-probe.npz"
"""The document probe's file name in ``models/<proxy>/``."""


def zscore_columns(x: np.ndarray) -> np.ndarray:
    """Each column's z-score over the rows (one call's documents); a constant column gives 0.
    Row order does not change any value."""
    if x.shape[0] == 0:
        return x
    mu = x.mean(axis=0, keepdims=True)
    sd = x.std(axis=0, keepdims=True)
    safe = np.where(sd > 1e-9, sd, 1.0)
    return np.where(sd > 1e-9, (x - mu) / safe, 0.0)


def pool_documents(
    names: Sequence[str],
    matrix: np.ndarray,
    unit_docs: Sequence[int],
    widths: np.ndarray,
    n_docs: int,
) -> tuple[tuple[str, ...], np.ndarray]:
    """Per-document attention columns from per-sentence ones.

    Args:
        names: the sentence features' column names (``last:L..H..`` / ``query:L..H..`` are read).
        matrix: ``[n_units, len(names)]`` log shares (``log(share + EPS)``).
        unit_docs: each unit's document index.
        widths: each unit's width in proxy tokens (the weight of its share in the document mass).
        n_docs: the number of documents (a document without units gets the floor).

    Returns:
        ``("mass:<name>"..., "best:<name>"...)`` and ``[n_docs, 2 * n_attention]`` log values.
    """
    cols = [i for i, n in enumerate(names) if n.startswith(("last:", "query:"))]
    share = np.exp(matrix[:, cols]) - EPS
    docs = np.asarray(unit_docs)
    mass = np.zeros((n_docs, len(cols)))
    best = np.full((n_docs, len(cols)), np.log(EPS))
    for d in range(n_docs):
        rows = docs == d
        if not rows.any():
            continue
        w = widths[rows]
        mass[d] = (share[rows] * w[:, None]).sum(axis=0) / w.sum()
        best[d] = np.log(share[rows].max(axis=0) + EPS)
    att = [names[i] for i in cols]
    pooled_names = (*(f"mass:{n}" for n in att), *(f"best:{n}" for n in att))
    return pooled_names, np.concatenate([np.log(mass + EPS), best], axis=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentProbe:
    """A linear document scorer over z-scored pooled attention columns plus z(MiniLM).

    ``config`` holds how the features must be computed (``rows``, ``layers``, ``dtype``,
    ``max_doc_tokens``) and how the probe was made (sources, list counts, CV scores), so a probe
    is never applied to other features.
    """

    columns: tuple[str, ...]
    weights: np.ndarray
    minilm_weight: float
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> str:
        """The attention rows the probe reads: ``last``, ``query`` or ``both``."""
        return str(self.config["rows"])

    @property
    def layers(self) -> int:
        """Leading layers the forward must read: the deepest layer with a non-zero weight + 1."""
        return int(self.config["layers"])

    def check_features(self, config: Mapping[str, Any]) -> None:
        """Refuse features computed with another configuration than the probe was trained on.

        Wider features are accepted: ``rows="both"`` holds the last and the query rows, and more
        layers hold the probe's layers. The weights' dtype follows
        :func:`ragattn.devices.probe_accepts_dtype`: float32 and bfloat16 features are
        interchangeable (the packaged probe, fitted in fp32, reads a bf16 proxy's features), int8
        features only match an int8 probe.

        Raises:
            ConfigError: rows, layers or dtype that do not hold the probe's features.
        """
        problems = {
            "rows": config.get("rows") not in (self.config.get("rows"), "both"),
            "dtype": not probe_accepts_dtype(self.config.get("dtype"), config.get("dtype")),
        }
        for key, bad in problems.items():
            if bad:
                raise ConfigError(
                    f"this document probe was trained on features with {key}="
                    f"{self.config.get(key)!r}, but these were computed with {key}="
                    f"{config.get(key)!r}; retrain it with: ragattn probe train --kind rerank"
                )
        if int(config.get("layers", -1)) < self.layers:
            raise ConfigError(
                f"this document probe reads layers < {self.layers}, but the features stop at "
                f"layer {config.get('layers')}; compute them to at least that depth"
            )

    def score(
        self,
        pooled_names: Sequence[str],
        pooled: np.ndarray,
        minilm: np.ndarray,
        config: Mapping[str, Any],
    ) -> np.ndarray:
        """Raw document scores (log-odds units of the pairwise model; higher is better): the
        MiniLM base plus the attention correction, both z-scored over these documents."""
        return self.base(minilm) + self.correction(pooled_names, pooled, config)

    def base(self, cosines: np.ndarray) -> np.ndarray:
        """MiniLM's term (log-odds units): ``minilm_weight`` times the cosines (in [-1, 1])
        z-scored over these documents."""
        z = zscore_columns(np.asarray(cosines, dtype=np.float64)[:, None])[:, 0]
        return np.asarray(self.minilm_weight * z, dtype=np.float64)

    def correction(
        self, pooled_names: Sequence[str], pooled: np.ndarray, config: Mapping[str, Any]
    ) -> np.ndarray:
        """The attention term alone (log-odds units), its columns z-scored over the documents of
        one forward. A list read in several forwards adds each forward's correction to a MiniLM
        base z-scored over the whole list, so every document's base is on one scale."""
        self.check_features(config)
        index = {n: i for i, n in enumerate(pooled_names)}
        missing = [c for c in self.columns if c not in index]
        if missing:
            raise ConfigError(f"features lack {len(missing)} probe columns, e.g. {missing[0]!r}")
        x = zscore_columns(pooled[:, [index[c] for c in self.columns]])
        return np.asarray(x @ self.weights, dtype=np.float64)

    def save(self, path: str | Path) -> None:
        np.savez(
            Path(path),
            format=np.asarray(FORMAT),
            columns=np.asarray(self.columns),
            weights=self.weights.astype(np.float64),
            minilm_weight=np.asarray([self.minilm_weight]),
            config=np.asarray(json.dumps(dict(self.config))),
        )

    @classmethod
    def load(cls, path: str | Path) -> DocumentProbe:
        with np.load(Path(path), allow_pickle=False) as arrays:
            if str(arrays["format"]) != FORMAT:
                raise ConfigError(f"{path} is not a {FORMAT} file")
            return cls(
                columns=tuple(str(c) for c in arrays["columns"]),
                weights=arrays["weights"].astype(np.float64),
                minilm_weight=float(arrays["minilm_weight"][0]),
                config=json.loads(str(arrays["config"])),
            )


@dataclass(frozen=True, slots=True)
class CandidateCosines:
    """MiniLM's cosines to the query (in [-1, 1]) from its one pass over every candidate
    document, handed from the read's ``candidates`` stage to the stages that read them.

    Attributes:
        documents: one per document, by input position (:func:`document_cosines`: title and
            text).
        units: one per sentence of the call, pooled from the same pass
            (:func:`document_and_unit_cosines`), where a reader needs them; else None.
    """

    documents: np.ndarray
    units: np.ndarray | None = None


def document_and_unit_cosines(
    query: str, documents: Sequence[Document], units: Sequence[Unit]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`document_cosines` and, from the same MiniLM pass, each unit's cosine to the query
    (in [-1, 1]): the mean of MiniLM's token states over the unit's characters in its document
    (:meth:`ragattn.embed.Embedder.encode_spans`), so the sentences cost no forward of their own.
    A unit past MiniLM's window (256 wordpieces of title and text) is encoded alone, as
    :func:`ragattn.embed.dense_scores` does. The document cosines are bit for bit
    :func:`document_cosines`'."""
    from ragattn.embed import shared_embedder

    texts = [titled_text(d) for d in documents]
    shifts = [text_offset(d) for d in documents]
    spans: list[list[tuple[int, int]]] = [[] for _ in documents]
    slots: list[tuple[int, int]] = []
    for u in units:
        shift, size = shifts[u.doc], len(texts[u.doc])
        slots.append((u.doc, len(spans[u.doc])))
        start = min(max(0, u.start + shift), size)  # blanks the strip removed fall outside
        spans[u.doc].append((start, min(max(start, u.end + shift), size)))
    embedder = shared_embedder()
    q = embedder.encode([query])[0]
    vectors, pooled = embedder.encode_spans(texts, spans)
    both = np.vstack([q[None, :], vectors])  # as dense_scores lays them out: the same sums
    cosines = np.asarray(both[1:] @ both[0], dtype=np.float64)
    unit_cos = np.asarray([float(pooled[d][j] @ q) for d, j in slots], dtype=np.float64)
    alone = [int(i) for i in np.flatnonzero(np.isnan(unit_cos))]
    if alone:
        unit_cos[alone] = dense_scores(
            query, [documents[units[i].doc].text[units[i].start : units[i].end] for i in alone]
        )
    return cosines, unit_cos


def attention_correction(
    probe: DocumentProbe,
    tokenizer: Any,
    documents: Sequence[Document],
    units: Sequence[Unit],
    names: Sequence[str],
    matrix: np.ndarray,
    config: Mapping[str, Any],
) -> np.ndarray:
    """The document probe's attention correction (:meth:`DocumentProbe.correction`, log-odds
    units), one per document, from the sentence features of one forward (``names``/``matrix``/
    ``config`` of :class:`~ragattn.compress.features.SentenceFeatures`): each unit's share
    pooled per document, weighted by its width in ``tokenizer``'s tokens.

    Raises:
        ConfigError: features the probe was not trained on (:meth:`DocumentProbe.check_features`).
    """
    widths = unit_widths(tokenizer, documents, units)
    pooled_names, pooled = pool_documents(
        names, matrix, [u.doc for u in units], widths, len(documents)
    )
    return probe.correction(pooled_names, pooled, config)


def score_documents(
    probe: DocumentProbe,
    tokenizer: Any,
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    names: Sequence[str],
    matrix: np.ndarray,
    config: Mapping[str, Any],
    *,
    minilm: bool = True,
) -> np.ndarray:
    """The document probe's raw scores (log-odds units; higher is more relevant) of documents
    read whole, for the studies and training that score a stored forward: its MiniLM base over
    ``documents`` (:func:`document_cosines`, one pass) plus :func:`attention_correction`; with
    ``minilm=False`` the correction alone, and MiniLM never runs (the document input of a
    selection fitted on it, ``document_score="attention"``). A read scores its documents once,
    with :class:`DocumentRelevance`.

    Raises:
        ConfigError: features the probe was not trained on (:meth:`DocumentProbe.check_features`).
    """
    correction = attention_correction(probe, tokenizer, documents, units, names, matrix, config)
    if not minilm:
        return correction
    return probe.base(document_cosines(query, documents)) + correction


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentRelevance:
    """A read's document relevance, computed once: the attention correction of the documents
    attention read and MiniLM's cosines of every document of the call, which the selection,
    the ranking and the attention-probe reranker combine as ``minilm_weight * z(cosine) +
    correction`` (log-odds units).

    Attributes:
        probe: the document probe (its ``minilm_weight`` weighs the base).
        correction: :func:`attention_correction` of the read documents, in read order.
        read: each read document's position in the call.
        cosines: MiniLM's cosine of every document of the call (in [-1, 1], by input
            position), or None where nothing reads the MiniLM base.
    """

    probe: DocumentProbe
    correction: np.ndarray
    read: Sequence[int]
    cosines: np.ndarray | None

    def of_read(self, *, minilm: bool) -> np.ndarray:
        """The read documents' scores, the base z-scored over them (``minilm=False``: the
        correction alone, a selection fitted on it)."""
        if not minilm:
            return self.correction
        return self.probe.base(self._cosines()[list(self.read)]) + self.correction

    def of_call(self) -> np.ndarray:
        """Every document's score, by input position, the base z-scored over all of them: a
        document attention did not read gets the correction's mean, 0 (it ranks by MiniLM)."""
        cosines = self._cosines()
        correction = np.zeros(len(cosines))
        correction[list(self.read)] = self.correction
        return self.probe.base(cosines) + correction

    def _cosines(self) -> np.ndarray:
        if self.cosines is None:
            raise ValueError("this read ran no MiniLM pass; its plan reads no MiniLM base")
        return self.cosines


def document_probe_path(models_dir: Path, proxy_slug: str) -> Path:
    """Where the document probe of a proxy lives."""
    return models_dir / proxy_slug / PROBE_FILE


def load_document_probe(models_dir: Path, proxy_slug: str) -> DocumentProbe:
    """The document probe of a proxy (packaged, or in ``models_dir``).

    Raises:
        ModelLoadError: there is none.
    """
    path = required_file(
        document_probe_path(models_dir, proxy_slug),
        f"document probe for proxy {proxy_slug!r}",
        "train it with: ragattn probe train --kind rerank",
    )
    return DocumentProbe.load(path)
