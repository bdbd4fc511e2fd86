"""Wire formats: msgspec Structs for every request and response body.

Rerank requests accept a superset of Cohere v1/v2, Jina and TEI fields; responses are Cohere's
shape. The model routes' formats (rerank, compress) are :mod:`~ragattn_api.schemas.verbs`,
retrieval and RAG :mod:`~ragattn_api.schemas.rag`, what they share
:mod:`~ragattn_api.schemas.common`. Library results are converted with ``from_result``; the
library knows nothing of JSON. The request and response bodies of the routes are named here (the
OpenAPI document reads the request Structs' bounds from this package).
"""

from __future__ import annotations

from ragattn_api.schemas.common import (
    NOT_SPACE,
    DocumentIn,
    ErrorResponse,
    HealthResponse,
    ProxiesOut,
    ReadyResponse,
)
from ragattn_api.schemas.rag import (
    AskRequest,
    AskResponse,
    RetrievedOut,
    RetrieveRequest,
    RetrieveResponse,
)
from ragattn_api.schemas.verbs import (
    CompressRequest,
    CompressResponse,
    PruneIn,
    PruningOut,
    RerankCompressRequest,
    RerankCompressResponse,
    RerankRequest,
    RerankResponse,
)

__all__ = [
    "NOT_SPACE",
    "AskRequest",
    "AskResponse",
    "CompressRequest",
    "CompressResponse",
    "DocumentIn",
    "ErrorResponse",
    "HealthResponse",
    "PruneIn",
    "ProxiesOut",
    "PruningOut",
    "ReadyResponse",
    "RerankCompressRequest",
    "RerankCompressResponse",
    "RerankRequest",
    "RerankResponse",
    "RetrieveRequest",
    "RetrieveResponse",
    "RetrievedOut",
]
