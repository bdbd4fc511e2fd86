"""RAG route: retrieve, rerank, compress and answer over the configured index."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post

from api.body import ignored_fields
from api.errors import ASK_RESPONSES
from api.routes.rerank import with_cache_header
from api.schemas import AskRequest, AskResponse
from api.service import Service


class AskController(Controller):
    tags = ["ask"]

    @post(
        "/v1/ask",
        status_code=200,
        responses=ASK_RESPONSES,
        summary="Answer a question from the configured index: retrieve, rerank, compress, generate",
    )
    async def ask(
        self, data: AskRequest, service: Service, request: Request[Any, Any, Any]
    ) -> Response[AskResponse]:
        body, hit = await service.ask(data, notes=ignored_fields(request))
        return with_cache_header(body, hit)
