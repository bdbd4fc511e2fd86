"""Issue 45 §5: a labelled content coding is refused, and ``/v1/rerank_compress`` names its
ranking method.

- The server decodes no content coding: a body labelled ``Content-Encoding: gzip`` (or br, zstd,
  anything but ``identity``) was read as if unlabelled when it was plain JSON, and a real gzip
  body was a 400 about NUL bytes. Both are now a 415 ``unsupported_media_type`` with
  ``Accept-Encoding: identity`` (RFC 7694), decided before the body is read.
- ``/v1/rerank_compress`` ranks from the compressor's one read, not with the rerank method; its
  response now says which method ranked (``method``, the library's ``RerankResults.method``,
  e.g. ``sentinel:document-probe``) next to ``compression.method``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.types import Document

pytestmark = pytest.mark.anyio

SMALL = {"query": "capital of France", "documents": ["Paris is in France.", "Bananas."]}
RAW = json.dumps(SMALL).encode()


async def test_a_body_with_a_content_coding_is_a_415(make_app: Callable[..., Litestar]) -> None:
    async with AsyncTestClient(app=make_app(cache_backend="none")) as c:
        for coding in ("gzip", "br", "zstd", "deflate", "GZIP", "x-gzip", "gzip, identity"):
            for route, body in (
                ("/v2/rerank", RAW),
                ("/v1/compress", json.dumps({**SMALL, "ratio": 0.5}).encode()),
            ):
                resp = await c.post(
                    route,
                    content=body,
                    headers={"content-type": "application/json", "content-encoding": coding},
                )
                assert resp.status_code == 415, (coding, resp.text)
                assert resp.json()["error_type"] == "unsupported_media_type"
                assert resp.headers["accept-encoding"] == "identity"
                named = ", ".join(c for c in coding.lower().split(", ") if c != "identity")
                assert f"(got Content-Encoding {named!r})" in resp.json()["message"]
        # A real gzip body: refused as labelled, not parsed as broken UTF-8.
        resp = await c.post(
            "/v2/rerank",
            content=gzip.compress(RAW),
            headers={"content-type": "application/json", "content-encoding": "gzip"},
        )
        assert resp.status_code == 415, resp.text
        # Two Content-Encoding lines: any coding among them is refused.
        resp = await c.post(
            "/v2/rerank",
            content=RAW,
            headers=[
                ("content-type", "application/json"),
                ("content-encoding", "identity"),
                ("content-encoding", "br"),
            ],
        )
        assert resp.status_code == 415, resp.text
        # ``identity`` (any case) is no coding: accepted, as is a GET with the header.
        for coding in ("identity", "Identity", " identity "):
            resp = await c.post(
                "/v2/rerank",
                content=RAW,
                headers={"content-type": "application/json", "content-encoding": coding},
            )
            assert resp.status_code == 200, (coding, resp.text)
        assert (await c.get("/health", headers={"content-encoding": "gzip"})).status_code == 200


async def test_rerank_compress_names_the_method_that_ranked(
    make_app: Callable[..., Litestar], compressor: Any
) -> None:
    docs = [
        "Bananas are yellow. They grow in the tropics.",
        "Paris is the capital of France. It lies on the Seine.",
    ]
    ranked, compressed = compressor.rerank_and_compress(
        "capital of France?", [Document(text=d) for d in docs], ratio=0.5
    )
    assert ranked.method and ranked.method != compressed.method
    async with AsyncTestClient(app=make_app()) as c:
        body = {"query": "capital of France?", "documents": docs, "ratio": 0.5}
        fresh = await c.post("/v1/rerank_compress", json=body)
        assert fresh.status_code == 200, fresh.text
        assert fresh.json()["method"] == ranked.method  # e.g. "sentinel:document-probe"
        assert fresh.json()["compression"]["method"] == compressed.method
        assert [r["index"] for r in fresh.json()["results"]] == [r.index for r in ranked]
        hit = await c.post("/v1/rerank_compress", json=body)
        assert hit.headers["x-ragattn-cache"] == "hit"
        assert hit.json()["method"] == ranked.method
        spec = (await c.get("/schema/openapi.json")).json()
        schema = spec["components"]["schemas"]["RerankCompressResponse"]
        assert "method" in schema["required"] and schema["properties"]["method"]["type"] == "string"
