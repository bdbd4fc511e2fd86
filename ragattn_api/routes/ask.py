"""RAG route: retrieve, rerank, compress and answer over the configured index."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ragattn_api.body import ignored_fields
from ragattn_api.errors import ASK_RESPONSES
from ragattn_api.routes.rerank import with_cache_header
from ragattn_api.schemas import AskRequest, AskResponse
from ragattn_api.service import Service


class AskController(Controller):
    tags = ["ask"]

    @post(
        "/v1/ask",
        status_code=200,
        responses=ASK_RESPONSES,
        summary="Answer a question from the configured index: retrieve, rerank, compress, generate",
    )
    async def ask(
        self,
        data: JSONBody[AskRequest],
        service: NamedDependency[Service],
        request: Request[Any, Any, Any],
    ) -> Response[AskResponse]:
        body, hit = await service.ask(data, notes=ignored_fields(request))
        return with_cache_header(body, hit)
