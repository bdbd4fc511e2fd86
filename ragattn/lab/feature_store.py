"""Sentence features on disk: extracted once per example, reused by every later fit and evaluation.

Layout: ``<root>/<proxy-slug>/<config digest>/<source>/<example digest>.npz``. The config digest
covers everything that changes the numbers (proxy, attention rows, layers read, weights' dtype,
chunk size, feature-code version), the example digest the question, the passages and the sentence
units. Files are written atomically (temporary name, then rename), so an interrupted extraction
resumes where it stopped and never reads a half-written file.

The store extracts the widest configuration (all layers, last and query-span rows, lexical and
MiniLM columns); layer- or row-restricted probes read a subset of these columns, which equals what
their own, shallower forward computes (the early-exit test checks this).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.assets import proxy_slug
from ragattn.block_store import BlockStore
from ragattn.blocks import BlockReader
from ragattn.compress.features import Rows, SentenceFeatures, Unit, sentence_features
from ragattn.lab.cache_dirs import lab_cache_dir
from ragattn.proxy import Proxy
from ragattn.types import Document

FEATURE_VERSION = 2
"""Bumped whenever the feature code changes its numbers (old cache entries are then ignored)."""


def default_root(cache_dir: str | Path | None = None) -> Path:
    """``<cache_dir>/features``: ``cache_dir`` is ``RAGATTN_CACHE_DIR`` as the edge read it
    (:attr:`ragattn.settings.Settings.cache_dir`), default ``~/.cache/ragattn``."""
    return lab_cache_dir(cache_dir, "features")


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]


class FeatureStore:
    """Disk cache of :func:`~ragattn.compress.features.sentence_features` for one proxy and one
    feature configuration."""

    def __init__(
        self,
        root: Path,
        proxy: Proxy,
        *,
        rows: Rows = "both",
        layers: int | None = None,
        max_chunk_tokens: int = 2048,
        read_once: bool = False,
    ) -> None:
        self.proxy = proxy
        self.rows: Rows = rows
        self.layers = layers
        self.max_chunk_tokens = max_chunk_tokens
        # Passages read as cached blocks (ragattn.blocks): other numbers, so another folder.
        self.reader = BlockReader(proxy, BlockStore(1 << 30)) if read_once else None
        config: dict[str, Any] = {
            "proxy": proxy.name,
            "rows": rows,
            "layers": proxy.num_layers if layers is None else layers,
            "dtype": str(proxy.dtype),
            "quantize": proxy.quantize,
            "max_chunk_tokens": max_chunk_tokens,
            "version": FEATURE_VERSION,
        }
        if read_once:
            config["reading"] = "blocks"
        self.folder = Path(root) / proxy_slug(proxy) / _digest(config)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "config.json").write_text(json.dumps(config, indent=2))

    def path(
        self, source: str, question: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> Path:
        key = _digest(
            [
                question,
                [(d.title, d.text) for d in documents],
                [(u.doc, u.start, u.end) for u in units],
            ]
        )
        return self.folder / source / f"{key}.npz"

    def get(
        self, source: str, question: str, documents: Sequence[Document], units: Sequence[Unit]
    ) -> tuple[SentenceFeatures, bool]:
        """The features (from disk when present) and whether they were computed now. Values are
        stored, and always returned, rounded to float32, so a fresh and a cached read agree."""
        path = self.path(source, question, documents, units)
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                return (
                    SentenceFeatures(
                        units=tuple(units),
                        names=tuple(str(n) for n in data["names"]),
                        matrix=data["matrix"].astype(np.float64),
                        chunks=int(data["chunks"][0]),
                        config=json.loads(str(data["config"])),
                    ),
                    False,
                )
        feats = sentence_features(
            self.proxy,
            question,
            documents,
            units,
            rows=self.rows,
            layers=self.layers,
            max_chunk_tokens=self.max_chunk_tokens,
            reader=self.reader,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez(
            tmp,
            names=np.asarray(feats.names),
            matrix=feats.matrix.astype(np.float32),
            chunks=np.asarray([feats.chunks]),
            config=np.asarray(json.dumps(dict(feats.config))),
        )
        tmp.replace(path)
        rounded = feats.matrix.astype(np.float32).astype(np.float64)
        return replace(feats, matrix=rounded), True
