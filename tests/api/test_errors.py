"""Bad inputs over HTTP: the documented status, a stable ``error_type`` and one JSON shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn_api.errors import STATUS_BY_ERROR_TYPE

pytestmark = pytest.mark.anyio


def _assert_error(resp: Any, status: int, error_type: str, fragment: str = "") -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error_type", "message"}
    assert body["error_type"] == error_type
    assert STATUS_BY_ERROR_TYPE[error_type] == status
    assert fragment in body["message"]


@pytest.fixture
async def small(make_app: Callable[..., Litestar]) -> Any:
    app = make_app(max_documents=3, max_query_tokens=8, max_tokens_per_doc=32, max_body_bytes=4000)
    async with AsyncTestClient(app=app) as c:
        yield c


@pytest.mark.parametrize(
    ("payload", "status", "error_type", "fragment"),
    [
        (
            {"query": "", "documents": ["a"]},
            400,
            "invalid_request",
            "query must be a non-empty string",
        ),
        (
            {"query": "   ", "documents": ["a"]},
            400,
            "invalid_request",
            "query must be a non-empty string",
        ),
        ({"query": "q"}, 400, "invalid_request", "'documents' is required"),
        ({"query": "q", "documents": []}, 400, "invalid_request", "at least one document"),
        ({"query": "q", "documents": ["a"], "texts": ["b"]}, 400, "invalid_request", "not both"),
        ({"query": "q", "documents": ["a"] * 4}, 413, "input_too_large", "at most 3 per request"),
        (
            {"query": "q", "documents": ["word " * 100]},
            413,
            "input_too_large",
            "RAGATTN_MAX_TOKENS_PER_DOC",
        ),
        (
            {"query": "word " * 20, "documents": ["a"]},
            413,
            "input_too_large",
            "RAGATTN_MAX_QUERY_TOKENS",
        ),
        ({"query": 7, "documents": ["a"]}, 400, "invalid_request", "Expected `str`, got `int`"),
        ({"query": "q", "documents": "a"}, 400, "invalid_request", "documents"),
        ({"query": "q", "documents": [3]}, 400, "invalid_request", "documents"),
        ({"query": "q", "documents": [{"id": 1}]}, 400, "invalid_request", "text"),
        ({"query": "q", "documents": ["a"], "top_n": 0}, 400, "invalid_request", "top_n"),
        (
            {"query": "q", "documents": ["a"], "top_n": 1, "top_k": 2},
            400,
            "invalid_request",
            "not both",
        ),
        (
            {"query": "q", "documents": ["a"], "rank_fields": ["title"]},
            400,
            "invalid_request",
            "rank_fields",
        ),
        (
            {"query": "q", "documents": ["x" * 5000]},
            413,
            "input_too_large",
            "RAGATTN_MAX_BODY_BYTES",
        ),
    ],
)
async def test_bad_rerank_requests(
    small: Any, payload: Any, status: int, error_type: str, fragment: str
) -> None:
    resp = await small.post("/v2/rerank", json=payload)
    _assert_error(resp, status, error_type, fragment)


async def test_invalid_json_is_400(small: Any) -> None:
    resp = await small.post(
        "/v1/rerank", content=b'{"query": "q", ', headers={"content-type": "application/json"}
    )
    _assert_error(resp, 400, "invalid_request")


async def test_non_object_body_is_400(small: Any) -> None:
    resp = await small.post("/v1/rerank", json=["q", "a"])
    _assert_error(resp, 400, "invalid_request")


async def test_unknown_route_and_wrong_method(small: Any) -> None:
    _assert_error(await small.get("/v3/rerank"), 404, "not_found")
    _assert_error(await small.get("/v2/rerank"), 405, "method_not_allowed")


async def test_not_ready_before_the_lifespan_ran(make_app: Callable[..., Litestar]) -> None:
    # Without ``async with`` the lifespan never starts, as before the model is loaded.
    c = AsyncTestClient(app=make_app())
    assert (await c.get("/health")).json() == {"status": "ok"}
    ready = await c.get("/ready")
    _assert_error(ready, 503, "not_ready")
    assert ready.headers["retry-after"] == "1"
    _assert_error(
        await c.post("/v2/rerank", json={"query": "q", "documents": ["a"]}), 503, "not_ready"
    )


async def test_ready_and_schema(small: Any) -> None:
    ready = await small.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    schema = (await small.get("/schema/openapi.json")).json()
    for path in ("/v1/rerank", "/v2/rerank", "/rerank", "/health", "/ready", "/metrics"):
        assert path in schema["paths"]
    assert "RerankRequest" in schema["components"]["schemas"]
    assert (await small.get("/health")).headers["x-content-type-options"] == "nosniff"
