"""Issue "Hardening, round five" §6: ``/v1/ask`` honours every option or refuses it; ``HEAD`` is
answered wherever ``GET`` is.

``/v1/ask`` with the one-read flow ignored ``"rerank": false`` silently (the answer's
``ranked_by`` was set, no warning). Now an option a flow cannot honour is a 400 naming the option
and the flow, and without a flow named the switches choose the flow that honours them. ``HEAD /``
was a 405 while ``GET /`` was served; now every ``GET`` route answers ``HEAD`` with ``GET``'s
status and headers and no body.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

CORPUS = [
    {
        "id": "eiffel",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower is a lattice tower in Paris. It was completed on 31 March 1889. "
        "It is 330 metres tall.",
    },
    {"id": "pisa", "text": "The Leaning Tower stands in Pisa. Pisa is a city in Italy."},
    {"id": "banana", "text": "Bananas are yellow fruit sold in Paris markets."},
    {"id": "rhine", "text": "The Rhine flows through Germany and the Netherlands."},
]
QUESTION = "When was the Eiffel Tower in Paris completed?"
BASE = {"question": QUESTION, "mode": "bm25", "top_k": 3}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("round5-ask-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


# --- /v1/ask: every option honoured or refused ----------------------------------------------


REFUSED = [
    ({"flow": "one_read", "rerank": False}, ("rerank=false", "flow=one_read")),
    ({"flow": "one_read", "compress": False}, ("compress=false", "flow=one_read")),
    ({"flow": "one_read", "rerank": False, "compress": False}, ("=false", "flow=one_read")),
    ({"compress": False, "ratio": 0.5}, ("ratio", "compress=false", "flow=two_pass")),
    ({"flow": "two_pass", "compress": False, "ratio": 0.3}, ("ratio", "compress=false")),
    (
        {"compress": False, "max_context_tokens": 512},
        ("max_context_tokens", "compress=false", "flow=two_pass"),
    ),
]
"""Options the flow cannot honour, and what the 400 names."""


async def test_an_option_the_flow_cannot_honour_is_a_400_naming_both(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        for options, named in REFUSED:
            resp = await c.post("/v1/ask", json={**BASE, **options})
            assert resp.status_code == 400, (options, resp.text)
            body = resp.json()
            assert body["error_type"] == "invalid_request"
            for word in named:
                assert word in body["message"], (options, body["message"])


async def test_the_openapi_document_states_what_the_flow_refuses(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    """A body the schema accepts is one the server accepts (schemathesis's positive-data check):
    the options a flow cannot honour are stated in ``AskRequest``, and the honoured ones fit."""
    import jsonschema

    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        document = (await c.get("/schema/openapi.json")).json()
    ask = document["components"]["schemas"]["AskRequest"]
    schema = {**ask, "components": document["components"]}
    resolver = jsonschema.validators.Draft202012Validator(schema)
    for options, _ in REFUSED:
        assert not resolver.is_valid({**BASE, **options}), options
    for options, *_ in HONOURED:
        assert resolver.is_valid({**BASE, **options}), options


HONOURED = [
    # (options, flow that runs, reranked by the proxy, compressed)
    ({}, "one_read", True, True),
    ({"flow": "one_read"}, "one_read", True, True),
    ({"rerank": False}, "two_pass", False, True),
    ({"compress": False}, "two_pass", True, False),
    ({"rerank": False, "compress": False}, "two_pass", False, False),
    ({"flow": "two_pass", "rerank": False}, "two_pass", False, True),
    ({"flow": "two_pass", "compress": False}, "two_pass", True, False),
    ({"max_context_tokens": 16}, "one_read", True, True),
    ({"ratio": 0.9, "max_context_tokens": 16}, "one_read", True, True),
]


@pytest.mark.slow
async def test_every_accepted_option_is_honoured(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    """What the response says is what was asked for: the flow, who ranked, what was cut."""
    app = make_app(index_dir=str(index_dir), generator_max_tokens=2, cache_backend="none")
    async with AsyncTestClient(app=app) as c:
        for options, flow, reranked, compressed in HONOURED:
            resp = await c.post("/v1/ask", json={**BASE, "top_n": 3, **options})
            assert resp.status_code == 200, (options, resp.text)
            body = resp.json()
            assert body["flow"] == flow, options
            sources = body["sources"]
            assert sources, options
            if reranked:
                assert body["ranked_by"], options
                assert all("relevance_score" in s for s in sources), options
            else:
                # First-stage order, untouched: nobody ranked, no relevance is claimed.
                assert body["ranked_by"] is None, options
                assert all("relevance_score" not in s for s in sources), options
                assert [s["retrieval_rank"] for s in sources] == list(range(1, len(sources) + 1)), (
                    options
                )
            if compressed:
                assert body["tokens_after"] < body["tokens_before"], options
            else:
                assert body["tokens_after"] == body["tokens_before"], options
            assert not any("ignored" in w for w in body["warnings"]), body["warnings"]


def test_the_library_holds_the_same_rule() -> None:
    """:class:`PipelineOptions` (the CLI and the library callers) refuses and resolves alike."""
    from ragattn.errors import InvalidInputError
    from ragattn.pipeline import PipelineOptions

    with pytest.raises(InvalidInputError, match=re.escape("rerank=false does not apply to flow=")):
        PipelineOptions(flow="one_read", rerank=False)
    with pytest.raises(InvalidInputError, match=re.escape("compress=false does not apply to flow")):
        PipelineOptions(flow="one_read", compress=False)
    with pytest.raises(InvalidInputError, match="ratio is the compression budget"):
        PipelineOptions(compress=False, ratio=0.4)
    with pytest.raises(InvalidInputError, match="max_context_tokens caps the compression budget"):
        PipelineOptions(compress=False, max_context_tokens=512)
    assert PipelineOptions().flow == "one_read"
    assert PipelineOptions(rerank=False).flow == "two_pass"
    assert PipelineOptions(compress=False).flow == "two_pass"
    huge = 10**400
    with pytest.raises(InvalidInputError) as refused:
        PipelineOptions(top_k=huge)
    assert "top_k must be a positive integer of at most 1000000" in str(refused.value)
    assert len(str(refused.value)) < 200


# --- HEAD wherever GET ------------------------------------------------------------------------


def _get_paths(app: Litestar) -> list[str]:
    """A concrete path for every route that answers GET (path parameters filled in)."""
    paths = []
    for route in app.routes:
        if "GET" not in getattr(route, "methods", ()):
            continue
        path = route.path.replace("{file_path:path}", "app.js").replace("{path:str}", "nowhere")
        paths.append(path)
    return paths


async def test_head_is_answered_wherever_get_is(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    app = make_app(index_dir=str(index_dir))
    paths = _get_paths(app)
    assert {"/", "/demo.json", "/metrics", "/schema", "/static/app.js", "/health"} <= set(paths)
    async with AsyncTestClient(app=app) as c:
        for path in paths:
            get = await c.get(path)
            head = await c.head(path)
            assert head.status_code == get.status_code, (path, head.status_code, get.status_code)
            assert head.status_code != 405, path
            assert head.content == b"", path
            assert head.headers.get("content-type") == get.headers.get("content-type"), path
            assert "content-length" not in head.headers, path
        # A route without GET still refuses HEAD.
        post_only = await c.head("/v2/rerank")
        assert post_only.status_code == 405
        assert "GET" not in post_only.headers.get("allow", "")


def test_head_on_a_live_server(production_server: Callable[..., Any], raw_http: Any) -> None:
    """Through uvicorn: ``HEAD /`` is a 200 without a body (a ``GET`` sent right behind it on
    the same connection is the next bytes read), and the metrics count it as a HEAD on its
    route."""
    with production_server() as live:
        pipelined = raw_http.head(live.port, "HEAD", "/") + raw_http.head(
            live.port, "GET", "/health"
        )
        with raw_http.connect(live.port) as sock:
            sock.sendall(pipelined)
            data = _read_until(sock, lambda d: d.count(b"HTTP/1.1 ") == 2 and d.endswith(b"}"))
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), data[:500]
        assert b"content-security-policy" in head.lower()
        assert b"text/html" in head.lower()
        assert rest.startswith(b"HTTP/1.1 200"), data[:500]  # no body between the two
        with httpx.Client(base_url=live.url, timeout=30) as c:
            for path in ("/", "/demo.json", "/metrics", "/schema/openapi.json"):
                resp = c.head(path)
                assert resp.status_code == 200 and resp.content == b"", path
            metrics = c.get("/metrics").text
        counted = re.search(
            r'ragattn_requests_total\{(?=[^}]*route="/")(?=[^}]*method="HEAD")'
            r'(?=[^}]*status="200")[^}]*\} (\d+)',
            metrics,
        )
        assert counted is not None and float(counted.group(1)) >= 2, metrics[:2000]


def _read_until(sock: Any, done: Callable[[bytes], bool]) -> bytes:
    sock.settimeout(30)
    data = b""
    while not done(data):
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    return data
