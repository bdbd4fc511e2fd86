"""Retrieval route: first-stage search over the configured index, optionally reranked."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ragattn_api.body import ignored_fields
from ragattn_api.errors import MODEL_ROUTE_RESPONSES
from ragattn_api.routes.rerank import with_cache_header
from ragattn_api.schemas import RetrieveRequest, RetrieveResponse
from ragattn_api.service import Service


class RetrieveController(Controller):
    tags = ["retrieve"]

    @post(
        "/v1/retrieve",
        status_code=200,
        responses=MODEL_ROUTE_RESPONSES,
        summary="Search the configured index (BM25, dense or hybrid); optionally rerank the hits",
    )
    async def retrieve(
        self,
        data: JSONBody[RetrieveRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[RetrieveResponse]:
        body, hit = await service.retrieve(data, notes=ignored_fields(request))
        return with_cache_header(body, hit)
