"""First-stage retrieval: BM25 (bm25s or rank_bm25), dense FAISS over MiniLM, and RRF hybrid.

Every retriever has ``search(query, k) -> list[Hit]``. :class:`Index` builds all three from a
corpus, persists them atomically, and loads them back::

    index = Index.build("corpus.jsonl", "my-index")      # or Index.load("my-index")
    hits = index.search("what causes scurvy?", k=10)     # hybrid; mode="bm25" | "dense"
"""

from __future__ import annotations

from ragattn.retrieve.bm25 import BACKENDS, Analyzer, BM25Retriever
from ragattn.retrieve.corpus import Corpus, Hit, Retriever, chunk_documents, read_corpus
from ragattn.retrieve.dense import DenseRetriever
from ragattn.retrieve.hybrid import HybridRetriever, rrf_fuse
from ragattn.retrieve.index import MODES, Index, Manifest

__all__ = [
    "BACKENDS",
    "MODES",
    "Analyzer",
    "BM25Retriever",
    "Corpus",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "Index",
    "Manifest",
    "Retriever",
    "chunk_documents",
    "read_corpus",
    "rrf_fuse",
]
