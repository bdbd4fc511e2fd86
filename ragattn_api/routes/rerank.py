"""Rerank routes: Cohere v1 and v2, and ``/rerank`` for Jina/TEI-style clients.

The three routes are one handler (:func:`_rerank_route`) at three paths: they differ only in the
``api_version`` their response reports and in their summary.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.handlers import HTTPRouteHandler
from litestar.params import JSONBody

from ragattn_api.body import ignored_fields
from ragattn_api.errors import MODEL_ROUTE_RESPONSES
from ragattn_api.schemas import RerankRequest, RerankResponse
from ragattn_api.service import Service

CACHE_HEADER = "x-ragattn-cache"


def with_cache_header(body: Any, hit: bool) -> Response[Any]:
    return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})


def _rerank_route(path: str, api_version: str, summary: str, name: str) -> HTTPRouteHandler:
    """The rerank handler at ``path``, answering in ``api_version``'s shape; ``name`` is the
    handler's (its OpenAPI ``operationId`` is made of the path and this name)."""

    async def handler(
        self: Controller,
        data: JSONBody[RerankRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RerankResponse]:
        notes = ignored_fields(request)
        body, hit = await service.rerank(data, api_version=api_version, notes=notes)
        return with_cache_header(body, hit)

    handler.__name__ = handler.__qualname__ = name
    return post(path, status_code=200, responses=MODEL_ROUTE_RESPONSES, summary=summary)(handler)


class RerankController(Controller):
    tags = ["rerank"]

    rerank_v1 = _rerank_route(
        "/v1/rerank", "1", "Rerank documents (Cohere v1 shape)", name="rerank_v1"
    )
    rerank_v2 = _rerank_route(
        "/v2/rerank", "2", "Rerank documents (Cohere v2 shape)", name="rerank_v2"
    )
    rerank = _rerank_route(
        "/rerank", "1", "Rerank documents; also accepts TEI's 'texts'", name="rerank"
    )
