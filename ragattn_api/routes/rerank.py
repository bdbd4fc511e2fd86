"""Rerank routes: Cohere v1 and v2, and ``/rerank`` for Jina/TEI-style clients."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ragattn_api.body import ignored_fields
from ragattn_api.errors import MODEL_ROUTE_RESPONSES
from ragattn_api.schemas import RerankRequest, RerankResponse
from ragattn_api.service import Service

CACHE_HEADER = "x-ragattn-cache"


def with_cache_header(body: Any, hit: bool) -> Response[Any]:
    return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})


class RerankController(Controller):
    tags = ["rerank"]

    @post(
        "/v1/rerank",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Rerank documents (Cohere v1 shape)",
    )
    async def rerank_v1(
        self,
        data: JSONBody[RerankRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RerankResponse]:
        body, hit = await service.rerank(data, api_version="1", notes=ignored_fields(request))
        return with_cache_header(body, hit)

    @post(
        "/v2/rerank",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Rerank documents (Cohere v2 shape)",
    )
    async def rerank_v2(
        self,
        data: JSONBody[RerankRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RerankResponse]:
        body, hit = await service.rerank(data, api_version="2", notes=ignored_fields(request))
        return with_cache_header(body, hit)

    @post(
        "/rerank",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Rerank documents; also accepts TEI's 'texts'",
    )
    async def rerank(
        self,
        data: JSONBody[RerankRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RerankResponse]:
        body, hit = await service.rerank(data, api_version="1", notes=ignored_fields(request))
        return with_cache_header(body, hit)
