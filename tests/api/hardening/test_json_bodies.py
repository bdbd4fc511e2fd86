"""Issue 16 §2 and §9: JSON bodies are read strictly, on every route that takes one.

Deeply nested JSON is a 400 (it was a 500 from the decoder's recursion), duplicate keys are a 400,
numbers are never read from strings, a body that is not declared ``application/json`` is a 415,
and unknown fields are ignored but named in the response's warnings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn_api.body import MAX_JSON_DEPTH, nesting_exceeds

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
CORPUS = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome."}]

BODIES: dict[str, dict[str, Any]] = {
    "/v2/rerank": {"query": "q", "documents": ["a"]},
    "/v1/rerank": {"query": "q", "documents": ["a"]},
    "/rerank": {"query": "q", "texts": ["a"]},
    "/v1/compress": {"query": "q", "documents": ["a. b."], "ratio": 0.5},
    "/v1/rerank_compress": {"query": "q", "documents": ["a. b."], "ratio": 0.5},
    "/v1/retrieve": {"query": "capital", "mode": "bm25", "k": 2},
    "/v1/ask": {"question": "capital", "mode": "bm25", "top_k": 2, "compress": False},
}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("json-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


def _deep(levels: int) -> bytes:
    return b'{"query": "q", "documents": ["a"], "metadata": ' + b"[" * levels + b"]" * levels + b"}"


def test_the_nesting_scan_counts_levels_exactly() -> None:
    assert not nesting_exceeds(b"[" * 32 + b"]" * 32, 32)
    assert nesting_exceeds(b"[" * 33 + b"]" * 33, 32)
    assert not nesting_exceeds(b'["' + b"[" * 100 + b'"]', 32)  # brackets inside a string
    assert nesting_exceeds(b"{" + b'"a":[' * 40 + b"]" * 40 + b"}", 32)
    assert nesting_exceeds(b"[[[[", 2)  # never closed: as deep to a decoder (round five)


@pytest.mark.slow
async def test_deep_json_is_a_400_on_every_route_of_a_live_server(
    make_app: Callable[..., Litestar], live_server: Any, index_dir: Path
) -> None:
    app = make_app(index_dir=str(index_dir), cache_backend="none")
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            for route in BODIES:
                for levels in (990, 5000, MAX_JSON_DEPTH + 1):
                    resp = await c.post(route, content=_deep(levels), headers=JSON)
                    assert resp.status_code == 400, (route, levels, resp.text)
                    assert resp.json() == {
                        "error_type": "invalid_request",
                        "message": "the JSON body nests arrays/objects more than "
                        f"{MAX_JSON_DEPTH} levels deep",
                    }
            # Nesting within the limit is read (metadata is free-form) and served.
            ok = await c.post(
                "/v2/rerank",
                content=b'{"query": "q", "documents": [{"text": "a", "metadata": {"x": '
                + b"[" * 20
                + b"]" * 20
                + b"}}]}",
                headers=JSON,
            )
            assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"query": "q", "query": "r", "documents": ["a"]}', "repeats the key 'query'"),
        (b'{"query": "q", "documents": [{"text": "a", "text": "b"}]}', "repeats the key 'text'"),
        (b'{"query": "q", "documents": ["a"], "top_n": "3"}', "Expected `int | null`, got `str`"),
        (b'{"query": "q", "documents": ["a"], "top_n": true}', "Expected `int | null`, got `bool`"),
        (b'{"query": "q", "documents": ["a"], "raw_scores": "true"}', "Expected `bool`, got `str`"),
        (b'{"query": "q", "documents": ["a"], "top_n": NaN}', "malformed JSON body"),
    ],
)
async def test_strict_bodies(client: AsyncTestClient[Litestar], raw: bytes, message: str) -> None:
    resp = await client.post("/v2/rerank", content=raw, headers=JSON)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error_type"] == "invalid_request"
    assert message in resp.json()["message"]


async def test_an_integral_float_is_an_integer(client: AsyncTestClient[Litestar]) -> None:
    """As in JSON Schema: ``1.0`` is an integer; ``1.5`` is not."""
    raw = b'{"query": "q", "documents": ["a", "b"], "top_n": 1.0}'
    ok = await client.post("/v2/rerank", content=raw, headers=JSON)
    assert ok.status_code == 200 and len(ok.json()["results"]) == 1
    bad = await client.post("/v2/rerank", content=raw.replace(b"1.0", b"1.5"), headers=JSON)
    assert bad.status_code == 400
    assert "Expected `int | null`, got `float`" in bad.json()["message"]


async def test_strings_are_not_numbers_on_compress(client: AsyncTestClient[Litestar]) -> None:
    body = {"query": "q", "documents": ["a. b."], "ratio": "0.5"}
    resp = await client.post("/v1/compress", json=body)
    assert resp.status_code == 400
    assert "Expected `float | null`, got `str` - at `$.ratio`" in resp.json()["message"]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None]
)
@pytest.mark.parametrize("route", ["/v2/rerank", "/v1/compress", "/v1/rerank_compress"])
async def test_a_body_not_sent_as_json_is_a_415(
    client: AsyncTestClient[Litestar], route: str, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    resp = await client.post(route, content=b'{"query": "q", "documents": ["a"]}', headers=headers)
    assert resp.status_code == 415, resp.text
    assert resp.json()["error_type"] == "unsupported_media_type"
    assert resp.headers["x-content-type-options"] == "nosniff"


async def test_json_with_a_charset_is_json(client: AsyncTestClient[Litestar]) -> None:
    resp = await client.post(
        "/v2/rerank",
        content=b'{"query": "q", "documents": ["a"]}',
        headers={"content-type": "Application/JSON; charset=utf-8"},
    )
    assert resp.status_code == 200, resp.text


async def test_unknown_fields_are_named_in_the_warnings(
    client: AsyncTestClient[Litestar],
) -> None:
    body = {
        "query": "q",
        "documents": ["a", {"text": "b", "colour": "red"}],
        "temperature": 0.2,
    }
    resp = await client.post("/v2/rerank", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["meta"]["warnings"] == [
        "unknown field 'documents[1].colour' ignored",
        "unknown field 'temperature' ignored",
    ]
    # The warning belongs to that request: the cached answer to a clean request has none.
    again = await client.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
    assert again.headers["x-ragattn-cache"] == "hit"
    assert again.json()["meta"]["warnings"] == []
    compress = await client.post(
        "/v1/compress", json={"query": "q", "documents": ["a. b."], "ratio": 0.5, "rat": 1}
    )
    assert compress.json()["warnings"][0] == "unknown field 'rat' ignored"
