"""Compression route: sentence pruning under one budget (ratio, target tokens or threshold)."""

from __future__ import annotations

from litestar import Controller, Response, post

from api.errors import MODEL_ROUTE_RESPONSES
from api.routes.rerank import CACHE_HEADER
from api.schemas import (
    CompressRequest,
    CompressResponse,
    RerankCompressRequest,
    RerankCompressResponse,
)
from api.service import Service


class CompressController(Controller):
    tags = ["compress"]

    @post(
        "/v1/compress",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Prune documents to the sentences that answer the query",
    )
    async def compress(self, data: CompressRequest, service: Service) -> Response[CompressResponse]:
        body, hit = await service.compress(data)
        return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})


class RerankCompressController(Controller):
    tags = ["compress"]

    @post(
        "/v1/rerank_compress",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Rank documents and compress the best of them from one scoring pass",
    )
    async def rerank_compress(
        self, data: RerankCompressRequest, service: Service
    ) -> Response[RerankCompressResponse]:
        body, hit = await service.rerank_compress(data)
        return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})
