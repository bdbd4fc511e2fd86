"""ragattn: attention-based reranking and compression of retrieved context for RAG.

The public names load on first use (module ``__getattr__``): ``from ragattn import Client`` or
``import ragattn.client`` does not import torch or transformers; ``from ragattn import Reranker``
does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragattn._version import __version__

if TYPE_CHECKING:
    from ragattn.client import AsyncClient, Client
    from ragattn.compress import Compressor
    from ragattn.errors import InvalidInputError, RagattnError
    from ragattn.generate import LocalGenerator, OpenAIChatGenerator
    from ragattn.languages import LANGUAGES
    from ragattn.pipeline import PipelineOptions, PipelineResult, RAGPipeline
    from ragattn.proxy import Proxy, load_proxy
    from ragattn.rerank import Reranker
    from ragattn.types import CompressionResult, Document, RerankResult, RerankResults

_EXPORTS = {
    "AsyncClient": "ragattn.client",
    "Client": "ragattn.client",
    "CompressionResult": "ragattn.types",
    "Compressor": "ragattn.compress",
    "Document": "ragattn.types",
    "InvalidInputError": "ragattn.errors",
    "LANGUAGES": "ragattn.languages",
    "LocalGenerator": "ragattn.generate",
    "OpenAIChatGenerator": "ragattn.generate",
    "PipelineOptions": "ragattn.pipeline",
    "PipelineResult": "ragattn.pipeline",
    "Proxy": "ragattn.proxy",
    "RAGPipeline": "ragattn.pipeline",
    "RagattnError": "ragattn.errors",
    "RerankResult": "ragattn.types",
    "RerankResults": "ragattn.types",
    "Reranker": "ragattn.rerank",
    "load_proxy": "ragattn.proxy",
}
"""Each public name and the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ragattn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "AsyncClient",
    "Client",
    "CompressionResult",
    "Compressor",
    "Document",
    "InvalidInputError",
    "LANGUAGES",
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
