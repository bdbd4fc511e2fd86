"""Dense retrieval: packaged MiniLM embeddings searched with FAISS by inner product (= cosine).

Up to ``exact_max`` vectors (default 50,000) the index is exact (``IndexFlatIP``): at 384
dimensions a brute-force scan of 50k vectors costs a few milliseconds, so exactness is free.
Above it an HNSW graph (``IndexHNSWFlat``, ``M=32``, ``efConstruction=80``, ``efSearch=128``)
keeps a query well under a millisecond of search time at the cost of a small recall loss.
Scores are cosine similarities in [-1, 1] because the embedder returns unit vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragattn._optional import require
from ragattn.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from ragattn.errors import InvalidInputError
from ragattn.retrieve.corpus import Hit, indexable_text
from ragattn.types import Document

DEFAULT_EXACT_MAX = 50_000
IndexKind = Literal["flat", "hnsw"]


class DenseRetriever:
    """Nearest-neighbour search over document embeddings.

    Args:
        documents: the corpus; ids must be set and unique.
        embedder: encodes documents and queries; default the packaged MiniLM (shared instance).
        vectors: precomputed unit vectors ``[len(documents), dim]`` (float32) to skip encoding.
        exact_max: largest corpus indexed exactly; bigger corpora get HNSW.
        hnsw_m: HNSW graph degree (links per node).
        ef_construction: HNSW build-time beam width.
        ef_search: HNSW query-time beam width (raised to ``k`` when ``k`` is larger).
        show_progress: show the encoding progress bar.

    Raises:
        InvalidInputError: no documents, or ``vectors`` of the wrong shape.
        MissingDependencyError: faiss or sentence-transformers is not installed.
    """

    def __init__(
        self,
        documents: Sequence[Document],
        *,
        embedder: Embedder | None = None,
        vectors: np.ndarray | None = None,
        exact_max: int = DEFAULT_EXACT_MAX,
        hnsw_m: int = 32,
        ef_construction: int = 80,
        ef_search: int = 128,
        show_progress: bool = False,
    ) -> None:
        if not documents:
            raise InvalidInputError("cannot build a dense index over no documents; add documents")
        self.documents = tuple(documents)
        self.embedder = embedder or shared_embedder(DEFAULT_EMBEDDER)
        if vectors is None:
            vectors = self.embedder.encode(
                [indexable_text(d) for d in self.documents],
                show_progress=show_progress,
                cache=False,
            )
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (len(self.documents), self.embedder.dim):
            raise InvalidInputError(
                f"vectors must have shape ({len(self.documents)}, {self.embedder.dim}), "
                f"got {vectors.shape}"
            )
        self.ef_search = ef_search
        self.kind: IndexKind = "flat" if len(self.documents) <= exact_max else "hnsw"
        self._params = {
            "exact_max": exact_max,
            "hnsw_m": hnsw_m,
            "ef_construction": ef_construction,
        }
        self._index = self._make_index(vectors, hnsw_m, ef_construction)

    def _make_index(self, vectors: np.ndarray, hnsw_m: int, ef_construction: int) -> Any:
        faiss = require("faiss", extra="faiss")
        if self.kind == "flat":
            index = faiss.IndexFlatIP(self.embedder.dim)
        else:
            index = faiss.IndexHNSWFlat(self.embedder.dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
        index.add(vectors)
        return index

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The ``k`` nearest documents by cosine similarity, best first.

        Raises:
            InvalidInputError: ``k < 1``.
        """
        return self.search_vector(self.embedder.encode([query])[0], k)

    def search_vector(self, vector: np.ndarray, k: int = 10) -> list[Hit]:
        """Like :meth:`search` for an already-encoded unit query vector of length ``dim``."""
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        k = min(k, len(self.documents))
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        if self.kind == "hnsw":
            # per-call parameters, so concurrent searches never share a mutated efSearch
            faiss = require("faiss", extra="faiss")
            params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
            scores, ids = self._index.search(query, k, params=params)
        else:
            scores, ids = self._index.search(query, k)
        hits: list[Hit] = []
        for score, i in zip(scores[0], ids[0], strict=True):
            if i < 0:  # HNSW may return fewer than k
                break
            doc = self.documents[int(i)]
            hits.append(
                Hit(
                    doc_id=str(doc.id),
                    score=float(score),
                    rank=len(hits) + 1,
                    text=doc.text,
                    title=doc.title,
                    index=int(i),
                )
            )
        return hits

    def config(self) -> dict[str, Any]:
        """Parameters written to index manifests."""
        return {
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "index": self.kind,
            "ef_search": self.ef_search,
            **self._params,
        }

    def save(self, path: Path) -> None:
        """Write the FAISS index (vectors included) to ``path``."""
        require("faiss", extra="faiss").write_index(self._index, str(path))

    @classmethod
    def load(
        cls,
        path: Path,
        documents: Sequence[Document],
        config: dict[str, Any],
        *,
        embedder: Embedder | None = None,
    ) -> DenseRetriever:
        """Reload a retriever saved with :meth:`save` and described by :meth:`config`.

        Raises:
            InvalidInputError: the stored index does not match the documents or the embedder.
        """
        faiss = require("faiss", extra="faiss")
        self = cls.__new__(cls)
        self.documents = tuple(documents)
        self.embedder = embedder or shared_embedder(config["embedder"])
        self._index = faiss.read_index(str(path))
        if self._index.ntotal != len(self.documents) or self._index.d != self.embedder.dim:
            raise InvalidInputError(
                f"dense index {path} holds {self._index.ntotal} vectors of dimension "
                f"{self._index.d}, expected {len(self.documents)} of {self.embedder.dim}; "
                "rebuild it"
            )
        self.kind = config["index"]
        self.ef_search = config["ef_search"]
        self._params = {key: config[key] for key in ("exact_max", "hnsw_m", "ef_construction")}
        return self


__all__ = ["DEFAULT_EXACT_MAX", "DenseRetriever"]
