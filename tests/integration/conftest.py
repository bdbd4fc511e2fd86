"""Integration fixtures: a minimal OpenAI-compatible chat server on loopback,
``POST /v1/chat/completions`` answered by the real :class:`~ragattn.generate.LocalGenerator` on the
packaged proxy.

Used because llama-cpp-python (whose ``llama_cpp.server`` would serve the packaged GGUF) has no
prebuilt wheel for this platform on PyPI and compiles llama.cpp from source for minutes. The app
speaks the subset of the OpenAI wire format a chat client needs: ``model``, ``messages``,
``max_tokens``, ``temperature``; Bearer auth; ``choices[0].message.content``, ``usage``; errors as
``{"error": {"message", "type"}}``. Extra routes produce the failures the client must map:
``/slow/v1`` sleeps, ``/broken/v1`` answers 500, ``/notchat/v1`` answers 200 with a non-completion.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from litestar import Litestar, Request, Response, post

from ragattn.generate import ChatMessage, LocalGenerator
from ragattn.proxy import Proxy

SLOW_SECONDS = 3.0


API_KEY = "sk-test-key"


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
    def chat(request: Request[Any, Any, Any], data: dict[str, Any]) -> Response[Any]:
        return _unauthorized(request) or _complete(data)

    @post("/slow/v1/chat/completions", status_code=200)
    async def slow(data: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(SLOW_SECONDS)
        return {}

    @post("/broken/v1/chat/completions", status_code=500)
    async def broken(data: dict[str, Any]) -> dict[str, Any]:
        return {"error": {"message": "the model crashed", "type": "server_error"}}

    @post("/notchat/v1/chat/completions", status_code=200)
    async def notchat(data: dict[str, Any]) -> dict[str, Any]:
        return {"object": "list", "data": []}

    return Litestar(route_handlers=[chat, slow, broken, notchat])


@pytest.fixture(scope="module")
def openai_server(proxy: Proxy, live_server: Any) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT``) of the server, requiring :data:`API_KEY`."""
    with live_server(create_openai_app(proxy, api_key=API_KEY)) as base_url:
        yield base_url
