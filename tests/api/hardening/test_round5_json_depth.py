"""Issue "Hardening, round five" §2: unbalanced deep JSON is a 400, never a 500.

The nesting pre-check counted balanced pairs only, so a body of 1,100 ``[`` never closed (also
``{"a":`` repeated, and ``"documents":`` followed by 2,000 ``[``) passed it, and the decoder then
overflowed its stack: a 500. The check now refuses deep bodies whether or not their brackets
balance, and a decoder's stack overflow (or any other decoder failure) is a 400 whatever caused it.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.errors import InvalidInputError
from ragattn_api.body import MAX_JSON_DEPTH, decode_strict, nesting_exceeds
from ragattn_api.schemas import (
    AskRequest,
    CompressRequest,
    RerankCompressRequest,
    RerankRequest,
    RetrieveRequest,
)

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
CORPUS = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome."}]
TOO_DEEP = f"the JSON body nests arrays/objects more than {MAX_JSON_DEPTH} levels deep"
ROUTES = (
    "/v2/rerank",
    "/v1/rerank",
    "/rerank",
    "/v1/compress",
    "/v1/rerank_compress",
    "/v1/retrieve",
    "/v1/ask",
)
UNBALANCED: dict[str, bytes] = {
    "1,100 [ never closed": b"[" * 1_100,
    '{"a": repeated': b'{"a":' * 1_100,
    '"documents": then 2,000 [': b'{"query": "q", "documents": ' + b"[" * 2_000,
    "deep, then a stray closer": b'{"query": "q", "documents": ' + b"[" * 2_000 + b"}",
    "deep, then mismatched closers": b'{"query": "q", "x": ' + b"{" * 500 + b"]" * 500 + b"}",
    "a lone surrogate, then 2,000 [": b'{"query": "\\ud800", "documents": ' + b"[" * 2_000,
}
"""The reported bodies and their neighbours: each overflowed the decoder (a 500) before."""


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("depth-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


def test_the_scan_counts_unclosed_levels() -> None:
    limit = MAX_JSON_DEPTH
    for name, raw in UNBALANCED.items():
        assert nesting_exceeds(raw, limit), name
    assert nesting_exceeds(b"[" * (limit + 1), limit)
    assert not nesting_exceeds(b"[" * limit, limit)  # malformed, but no deeper than allowed
    # Levels already closed count as the passes that removed them: depth 20 + 13 unclosed.
    assert nesting_exceeds(b"[" * 13 + b"[" * 20 + b"]" * 20, limit)
    assert not nesting_exceeds(b"[" * 12 + b"[" * 20 + b"]" * 20, limit)
    # A stray closer ends what a decoder reads: the openers after it are never reached.
    assert not nesting_exceeds(b"]" + b"[" * 40, limit)
    # Brackets in strings never count, closed or not.
    assert not nesting_exceeds(b'{"query": "' + b"[" * 2_000 + b'"}', limit)
    # Shallow malformed bodies are left to the decoder, whose message says where.
    assert not nesting_exceeds(b'{"query": "q", "documents": ["a"', limit)


@pytest.mark.parametrize(
    "kind", [RerankRequest, CompressRequest, RerankCompressRequest, RetrieveRequest, AskRequest]
)
def test_every_request_type_refuses_unbalanced_deep_bodies(kind: Any) -> None:
    for name, raw in UNBALANCED.items():
        with pytest.raises(InvalidInputError) as refused:
            decode_strict(raw, kind)
        assert str(refused.value) == TOO_DEEP, name


def test_a_decoder_stack_overflow_is_a_400_at_any_depth() -> None:
    """A real overflow of the decoder's stack, the stack made short (the limit of 32 levels is
    not what stops these): with the recursion limit raised one frame at a time, decoding goes
    from an overflow in the server's own frames before the decoder (``R``: a place no body
    reaches with 32 levels), through overflows inside the decoder, to reading the body. Each
    overflow inside the decoder is a 400 ``InvalidInputError`` (``I``), never a RecursionError
    (a 500): ``R`` never follows ``I``."""
    body = (
        b'{"query": "q", "documents": [{"text": "a", "metadata": {"x": '
        + b"[" * 28
        + b"]" * 28
        + b"}}]}"
    )
    assert decode_strict(body, RerankRequest)[0].query == "q"  # within the limit: read
    outcomes = []
    depth = len(inspect.stack(0))
    old = sys.getrecursionlimit()
    for margin in range(1, 400):
        try:
            sys.setrecursionlimit(depth + margin)
        except RecursionError:  # below the frames already in use
            continue
        try:
            decode_strict(body, RerankRequest)
            outcomes.append("o")
        except InvalidInputError as exc:
            outcomes.append("I" if str(exc) == TOO_DEEP else "?")
        except RecursionError:
            outcomes.append("R")
        finally:
            sys.setrecursionlimit(old)
    assert re.fullmatch(r"R*I+o+", "".join(outcomes)), "".join(outcomes)


async def test_unbalanced_deep_bodies_are_a_400_on_every_route(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    app = make_app(cache_backend="none", index_dir=str(index_dir))
    async with AsyncTestClient(app=app) as c:
        for route in ROUTES:
            for name, raw in UNBALANCED.items():
                resp = await c.post(route, content=raw, headers=JSON)
                assert resp.status_code == 400, (route, name, resp.text[:300])
                assert resp.json() == {"error_type": "invalid_request", "message": TOO_DEEP}
            # A shallow malformed body still gets the decoder's message (where it failed).
            short = await c.post(route, content=b'{"query": "q", "documents": ["a"', headers=JSON)
            assert short.status_code == 400
            assert short.json()["message"].startswith("malformed JSON body: "), short.text


def test_a_live_server_answers_400_not_500(
    production_server: Callable[..., Any], index_dir: Path
) -> None:
    """Through uvicorn and the production server config, as the issue reported them."""
    with production_server(index_dir=str(index_dir), cache_backend="none") as live:
        _post_unbalanced_bodies(live.url)


def _post_unbalanced_bodies(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        for route in ROUTES:
            for name, raw in UNBALANCED.items():
                resp = c.post(route, content=raw, headers=JSON)
                assert resp.status_code == 400, (route, name, resp.text[:300])
                assert resp.json()["message"] == TOO_DEEP
        # The server is still serving.
        ok = c.post("/v2/rerank", json={"query": "q", "documents": ["a", "b"]})
        assert ok.status_code == 200, ok.text
