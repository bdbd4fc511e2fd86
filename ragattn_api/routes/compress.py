"""Compression routes: sentence pruning under one budget (ratio, target tokens or threshold)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ragattn_api.body import ignored_fields
from ragattn_api.errors import MODEL_ROUTE_RESPONSES
from ragattn_api.routes.rerank import with_cache_header
from ragattn_api.schemas import (
    CompressRequest,
    CompressResponse,
    RerankCompressRequest,
    RerankCompressResponse,
)
from ragattn_api.service import Service


class CompressController(Controller):
    tags = ["compress"]

    @post(
        "/v1/compress",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Prune documents to the sentences that answer the query",
    )
    async def compress(
        self,
        data: JSONBody[CompressRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[CompressResponse]:
        body, hit = await service.compress(data, notes=ignored_fields(request))
        return with_cache_header(body, hit)


class RerankCompressController(Controller):
    tags = ["compress"]

    @post(
        "/v1/rerank_compress",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Rank documents and compress the best of them from one scoring pass",
    )
    async def rerank_compress(
        self,
        data: JSONBody[RerankCompressRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RerankCompressResponse]:
        body, hit = await service.rerank_compress(data, notes=ignored_fields(request))
        return with_cache_header(body, hit)
