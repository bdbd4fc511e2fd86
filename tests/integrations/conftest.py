"""Integration fixtures: the in-process engines, a live service on loopback serving them, and an
OpenAI-compatible chat server for the generator client.

The service is a real uvicorn on 127.0.0.1 (a free port) running ``api.create_app`` with the same
loaded engines, so remote answers must equal in-process ones exactly.

The chat server answers ``POST /v1/chat/completions`` with the real
:class:`~ragattn.generate.LocalGenerator` on the packaged proxy. Used because llama-cpp-python
(whose ``llama_cpp.server`` would serve the packaged GGUF) has no prebuilt wheel for this platform
on PyPI and compiles llama.cpp from source for minutes. The app speaks the subset of the OpenAI
wire format a chat client needs: ``model``, ``messages``, ``max_tokens``, ``temperature``; Bearer
auth; ``choices[0].message.content``, ``usage``; errors as ``{"error": {"message", "type"}}``.
Extra routes produce the failures the client must map: ``/slow/v1`` sleeps, ``/broken/v1`` answers
500, ``/notchat/v1`` answers 200 with a non-completion.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from litestar import Litestar, Request, Response, post
from litestar.params import JSONBody

from ragattn.client import Client
from ragattn.generate import ChatMessage, LocalGenerator
from ragattn.proxy import Proxy

API_KEY = "integrations-test-key"


@dataclass(frozen=True)
class Corpus:
    """A hand-built query and three documents with ids and metadata; index 1 answers it."""

    query: str = "What is the capital of France?"
    texts: tuple[str, ...] = (
        "Bananas are a yellow fruit rich in potassium. They grow in the tropics.",
        "Paris is the capital and largest city of France. It lies on the Seine.",
        "The Rhine flows through Germany and the Netherlands. It ends in the North Sea.",
    )
    ids: tuple[str, ...] = ("fruit", "paris", "rhine")
    metadata: tuple[dict[str, Any], ...] = field(
        default_factory=lambda: (
            {"source": "wiki/banana"},
            {"source": "wiki/paris", "year": 2024},
            {"source": "wiki/rhine"},
        )
    )


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture(scope="session")
def server_url(reranker: Any, compressor: Any, live_server: Any) -> Iterator[str]:
    """A live service (API key required) over the session's engines."""
    from ragattn.settings import Settings
    from ragattn_api import create_app

    app = create_app(Settings(api_keys=(API_KEY,)), reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        yield url


@pytest.fixture(scope="session")
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url, api_key=API_KEY, timeout_s=300) as c:
        yield c


@pytest.fixture(params=["local", "remote"])
def engines(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(reranker, compressor): the in-process engines, or one Client for both."""
    if request.param == "local":
        return request.getfixturevalue("reranker"), request.getfixturevalue("compressor")
    c = request.getfixturevalue("client")
    return c, c


# ---- an OpenAI-compatible chat server ------------------------------------------------------

SLOW_SECONDS = 3.0
OPENAI_API_KEY = "sk-test-key"


def create_openai_app(proxy: Proxy, *, api_key: str | None = None) -> Litestar:
    """The server app; greedy answers from ``proxy``; ``api_key`` (if given) is required."""

    def _unauthorized(request: Request[Any, Any, Any]) -> Response[Any] | None:
        if api_key is None or request.headers.get("authorization") == f"Bearer {api_key}":
            return None
        return Response(
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
            status_code=401,
        )

    def _complete(body: dict[str, Any]) -> Response[Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not body.get("model"):
            return Response(
                {"error": {"message": "model and messages are required", "type": "invalid"}},
                status_code=400,
            )
        generator = LocalGenerator(proxy, max_new_tokens=int(body.get("max_tokens") or 16))
        answer = generator.chat(
            [ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        )
        return Response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "total_tokens": (answer.prompt_tokens or 0) + (answer.completion_tokens or 0),
                },
            }
        )

    @post("/v1/chat/completions", status_code=200, sync_to_thread=True)
    def chat(request: Request[Any, Any, Any], data: JSONBody[dict[str, Any]]) -> Response[Any]:
        return _unauthorized(request) or _complete(data)

    @post("/slow/v1/chat/completions", status_code=200)
    async def slow(data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
        await asyncio.sleep(SLOW_SECONDS)
        return {}

    @post("/broken/v1/chat/completions", status_code=500)
    async def broken(data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
        return {"error": {"message": "the model crashed", "type": "server_error"}}

    @post("/notchat/v1/chat/completions", status_code=200)
    async def notchat(data: JSONBody[dict[str, Any]]) -> dict[str, Any]:
        return {"object": "list", "data": []}

    return Litestar(route_handlers=[chat, slow, broken, notchat])


@pytest.fixture(scope="module")
def openai_server(proxy: Proxy, live_server: Any) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of the server, requiring :data:`OPENAI_API_KEY`."""
    with live_server(create_openai_app(proxy, api_key=OPENAI_API_KEY)) as base_url:
        yield base_url
