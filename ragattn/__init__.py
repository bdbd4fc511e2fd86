"""ragattn: attention-based reranking and compression of retrieved context for RAG."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
