"""Issue 45 §3: a refused value is never echoed whole in an error message.

An unknown ``method`` of 5 MB came back as a 5 MB 400 body, and so did ``rank_fields``, the
``mode`` of ``/v1/retrieve`` and the ``order`` and ``flow`` of ``/v1/ask`` (through msgspec's enum
message) and a repeated 1 MB key. Every value a message names is now cut to 64 characters with its
length stated (``'xxxx…'... (5000000 characters)``), on every route and error path; error bodies
stay a few hundred bytes whatever was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn_api.errors import MAX_MESSAGE_CHARS, error_response
from ragattn_api.logsafe import MAX_ECHO_CHARS, quoted

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
CORPUS = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome."}]
HUGE = 5_000_000
"""Characters of a refused value (a 5 MB body; the server's limit is 10 MB)."""


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("echo-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


def _value(tag: str, n: int = HUGE) -> str:
    """A value that starts with ``tag`` and is ``n`` characters long."""
    return tag + "x" * (n - len(tag))


def _assert_cut(resp: Any, status: int, error_type: str, value: str) -> str:
    """The response refuses ``value`` naming only its first 64 characters and its length."""
    assert resp.status_code == status, resp.text[:500]
    assert len(resp.content) < 1000, len(resp.content)
    body = resp.json()
    assert body["error_type"] == error_type, body
    message: str = body["message"]
    assert f"{value[:MAX_ECHO_CHARS]!r}... ({len(value)} characters)" in message, message
    assert value[: MAX_ECHO_CHARS + 1] not in message
    return message


def test_quoted_cuts_long_values_and_keeps_short_ones() -> None:
    assert quoted("rank") == "'rank'"
    assert quoted("a'b") == repr("a'b")
    assert quoted("y" * 64) == repr("y" * 64)
    assert quoted("y" * 65) == f"{'y' * 64!r}... (65 characters)"
    assert quoted("\U00010000" * 100, limit=3) == f"{chr(0x10000) * 3!r}... (100 characters)"


def test_no_error_message_is_longer_than_the_backstop() -> None:
    resp = error_response("invalid_request", "z" * 100_000)
    message = json.loads(resp.render(resp.content, "application/json"))["message"]
    assert message == "z" * MAX_MESSAGE_CHARS + "... (100000 characters)"


async def test_refused_values_are_cut_on_every_route(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    app = make_app(cache_backend="none", index_dir=str(index_dir))
    docs = {"query": "q", "documents": ["a. b."]}
    async with AsyncTestClient(app=app) as c:
        # Unknown method names: the library's message, with the name cut.
        for route, extra, kind in (
            ("/v1/rerank", {}, "rerank"),
            ("/v2/rerank", {}, "rerank"),
            ("/rerank", {}, "rerank"),
            ("/v1/compress", {"ratio": 0.5}, "compress"),
            ("/v1/rerank_compress", {"ratio": 0.5}, "compress"),
        ):
            method = _value(f"{route}-method-")
            resp = await c.post(route, json={**docs, **extra, "method": method})
            message = _assert_cut(resp, 400, "invalid_request", method)
            assert message.startswith(f"unknown {kind} method "), message
            assert "; valid: " in message
        # Enum values through msgspec's message: rank_fields, mode, order, flow.
        for route, body, field in (
            ("/v2/rerank", {**docs, "rank_fields": [_value("rank-")]}, "rank_fields[0]"),
            ("/v1/retrieve", {"query": "capital", "mode": _value("mode-")}, "mode"),
            ("/v1/ask", {"question": "capital", "order": _value("order-")}, "order"),
            ("/v1/ask", {"question": "capital", "flow": _value("flow-")}, "flow"),
            ("/v1/ask", {"question": "capital", "flow": _value("it's-")}, "flow"),  # "…" repr
        ):
            value = body.get("rank_fields", [None])[0] or body.get(field)
            resp = await c.post(route, json=body)
            message = _assert_cut(resp, 400, "invalid_request", value)
            assert message.startswith("invalid request body: Invalid enum value "), message
            assert message.endswith(f" - at `$.{field}`"), message
        # A repeated 1 MB key, and an unknown 1 MB key inside ``prune`` (an object of ours).
        key = _value("key-", 1_000_000)
        raw = json.dumps({"query": "q", "documents": ["a"]})[:-1] + f', "{key}": 1, "{key}": 2}}'
        resp = await c.post("/v2/rerank", content=raw.encode(), headers=JSON)
        assert "repeats the key" in _assert_cut(resp, 400, "invalid_request", key)
        resp = await c.post("/v2/rerank", json={**docs, "prune": {key: 1}})
        assert "'prune' has no field" in _assert_cut(resp, 400, "invalid_request", key)
        # Header values named by a 415 (the header cap keeps them under 16 KB).
        media = _value("application/x-", 10_000)
        resp = await c.post("/v2/rerank", json=docs, headers={"content-type": media})
        _assert_cut(resp, 415, "unsupported_media_type", media)
        charset = _value("utf-", 10_000)
        declared = {"content-type": f"application/json; charset={charset}"}
        resp = await c.post("/v2/rerank", json=docs, headers=declared)
        _assert_cut(resp, 415, "unsupported_media_type", charset)
        coding = _value("gzip-", 10_000)
        resp = await c.post("/v2/rerank", json=docs, headers={"content-encoding": coding})
        _assert_cut(resp, 415, "unsupported_media_type", coding)
        # Short values are still named whole, as before.
        resp = await c.post("/v2/rerank", json={**docs, "method": "nope"})
        assert resp.json()["message"].startswith("unknown rerank method 'nope'; valid: ")
        resp = await c.post("/v1/ask", json={"question": "capital", "order": "worst_first"})
        assert resp.json()["message"] == (
            "invalid request body: Invalid enum value 'worst_first' - at `$.order`"
        )
