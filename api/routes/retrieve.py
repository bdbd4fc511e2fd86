"""Retrieval route: first-stage search over the configured index, optionally reranked."""

from __future__ import annotations

from litestar import Controller, Response, post

from api.errors import MODEL_ROUTE_RESPONSES
from api.routes.rerank import CACHE_HEADER
from api.schemas import RetrieveRequest, RetrieveResponse
from api.service import Service


class RetrieveController(Controller):
    tags = ["retrieve"]

    @post(
        "/v1/retrieve",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Search the configured index (BM25, dense or hybrid); optionally rerank the hits",
    )
    async def retrieve(self, data: RetrieveRequest, service: Service) -> Response[RetrieveResponse]:
        body, hit = await service.retrieve(data)
        return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})
