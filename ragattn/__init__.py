"""ragattn: attention-based reranking and compression of retrieved context for RAG."""

from __future__ import annotations

from ragattn._version import __version__
from ragattn.client import AsyncClient, Client
from ragattn.compress import Compressor
from ragattn.errors import InvalidInputError, RagattnError
from ragattn.generate import LocalGenerator, OpenAIChatGenerator
from ragattn.pipeline import PipelineOptions, PipelineResult, RAGPipeline
from ragattn.proxy import Proxy, load_proxy
from ragattn.rerank import Reranker
from ragattn.types import CompressionResult, Document, RerankResult, RerankResults

__all__ = [
    "AsyncClient",
    "Client",
    "CompressionResult",
    "Compressor",
    "Document",
    "InvalidInputError",
    "LocalGenerator",
    "OpenAIChatGenerator",
    "PipelineOptions",
    "PipelineResult",
    "Proxy",
    "RAGPipeline",
    "RagattnError",
    "RerankResult",
    "RerankResults",
    "Reranker",
    "__version__",
    "load_proxy",
]
