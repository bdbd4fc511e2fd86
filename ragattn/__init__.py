"""ragattn: attention-based reranking and compression of retrieved context for RAG."""

from __future__ import annotations

from ragattn.client import AsyncClient, Client
from ragattn.compress import Compressor
from ragattn.errors import InvalidInputError, RagattnError
from ragattn.proxy import Proxy, load_proxy
from ragattn.rerank import Reranker
from ragattn.types import CompressionResult, Document, RerankResult, RerankResults

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "CompressionResult",
    "Compressor",
    "Document",
    "InvalidInputError",
    "Proxy",
    "RagattnError",
    "RerankResult",
    "RerankResults",
    "Reranker",
    "__version__",
    "load_proxy",
]
