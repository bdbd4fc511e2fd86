"""RAG route: retrieve, rerank, compress and answer over the configured index."""

from __future__ import annotations

from litestar import Controller, Response, post

from api.ask import answer
from api.errors import ASK_RESPONSES
from api.routes.rerank import CACHE_HEADER
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
    async def ask(self, data: AskRequest, service: Service) -> Response[AskResponse]:
        body, hit = await answer(service, data)
        return Response(body, headers={CACHE_HEADER: "hit" if hit else "miss"})
