"""Hardening over HTTP: deny-by-default auth on every route, one error shape, limits, bad input.

The route walk enumerates ``app.routes`` (never a hard-coded list), so a route added later is
covered automatically and fails here if it is served without a key. Error bodies are validated
against the app's own OpenAPI ``ErrorResponse`` schema and must not leak internals or input text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema_rs
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

import ragattn_api.auth

pytestmark = pytest.mark.anyio

KEY = "hardening-key-1"
OTHER_KEY = "hardening-key-2"
AUTH = {"Authorization": f"Bearer {KEY}"}

PROBES = {"/health", "/ready", "/metrics"}
"""Public for orchestrators: they carry no data and cost nothing."""
PAGE = {"/", "/demo.json"}
"""The web page and its built-in example: static, no data; its requests to the API carry the key."""
PUBLIC_PREFIXES = ("/schema", "/static")
"""The OpenAPI documents (the API's shape is not a secret) and the page's static assets."""

SECRET = "SECRET-DOCUMENT-TEXT-7f3a"
"""Marker in request bodies: no error body may echo it back."""
LEAK_PATTERNS = [
    re.compile(r"Traceback"),
    re.compile(r"File \""),
    re.compile(r"/work/|site-packages|\.py\b"),
    re.compile(SECRET),
]


def _is_public(path: str) -> bool:
    return path in PROBES or path in PAGE or path.startswith(PUBLIC_PREFIXES)


def _concrete(path: str) -> str:
    """A request path for a route template (path parameters filled with a harmless value)."""
    return re.sub(r"\{[^}]+\}", "app.js", path)


async def _error_schema(client: AsyncTestClient[Litestar]) -> dict[str, Any]:
    spec = (await client.get("/schema/openapi.json")).json()
    return spec["components"]["schemas"]["ErrorResponse"]


def _assert_error_shape(resp: Any, schema: dict[str, Any], status: int, error_type: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    jsonschema_rs.validate(schema, body)
    assert set(body) == {"error_type", "message"}
    assert body["error_type"] == error_type, body
    for pattern in LEAK_PATTERNS:
        assert not pattern.search(resp.text), (pattern.pattern, resp.text)


async def test_every_registered_route_denies_without_a_key(
    make_app: Callable[..., Litestar],
) -> None:
    app = make_app(api_keys=(KEY, OTHER_KEY))
    walked: set[str] = set()
    async with AsyncTestClient(app=app) as c:
        schema = await _error_schema(c)
        for route in app.routes:
            path = _concrete(route.path)
            for method in sorted(route.methods):
                walked.add(f"{method} {route.path}")
                anonymous = await c.request(method, path)
                wrong = await c.request(method, path, headers={"Authorization": "Bearer x"})
                keyed = await c.request(method, path, headers=AUTH)
                if _is_public(route.path):
                    # OPTIONS of the page may still ask for a key (CORS is off); GET must not.
                    if method in {"GET", "HEAD"}:
                        assert anonymous.status_code != 401, (method, path)
                    continue
                for resp in (anonymous, wrong):
                    _assert_error_shape(resp, schema, 401, "unauthorized")
                    assert resp.headers["www-authenticate"] == "Bearer"
                # With the key the guard lets it through (to a 2xx, or a 4xx about the body).
                assert keyed.status_code != 401, (method, path, keyed.text)
    # The walk really covered the model routes (all HTTP methods, OPTIONS and HEAD included).
    assert {
        "POST /v1/rerank",
        "POST /v2/rerank",
        "POST /rerank",
        "POST /v1/compress",
        "POST /v1/rerank_compress",
        "OPTIONS /v2/rerank",
        "GET /health",
        "GET /schema/openapi.json",
    } <= walked


async def test_keys_are_compared_in_constant_time_against_every_key(
    make_app: Callable[..., Litestar], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = ragattn_api.auth.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(ragattn_api.auth.hmac, "compare_digest", spy)
    async with AsyncTestClient(app=make_app(api_keys=(KEY, OTHER_KEY))) as c:
        resp = await c.post("/v2/rerank", json={}, headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 400  # authorised, then the empty body is refused
    # Both keys were compared even though the first matched: timing reveals no key position.
    assert [b for _, b in calls] == [KEY.encode(), OTHER_KEY.encode()]


async def test_every_error_is_one_shape_declared_in_openapi(
    make_app: Callable[..., Litestar],
) -> None:
    """400, 401, 404, 405, 413 (body, count, tokens), 429 and 503 all share one documented shape."""
    doc = {"query": "q", "documents": [SECRET]}
    app = make_app(
        api_keys=(KEY,),
        max_documents=2,
        max_query_tokens=8,
        max_tokens_per_doc=16,
        max_body_bytes=2000,
        rate_limit_per_minute=1000,
    )
    async with AsyncTestClient(app=app) as c:
        spec = (await c.get("/schema/openapi.json")).json()
        schema = spec["components"]["schemas"]["ErrorResponse"]
        cases: list[tuple[str, str, dict[str, Any], int, str]] = [
            (
                "POST",
                "/v2/rerank",
                {"content": b'{"query": "' + SECRET.encode()},
                400,
                "invalid_request",
            ),
            (
                "POST",
                "/v2/rerank",
                {"json": {"query": 7, "documents": [SECRET]}},
                400,
                "invalid_request",
            ),
            ("POST", "/v1/compress", {"json": {**doc, "ratio": 2}}, 400, "invalid_request"),
            (
                "POST",
                "/v1/compress",
                {"json": {**doc, "ratio": 0.2, "target_tokens": 8}},
                400,
                "invalid_request",
            ),  # two budgets (none is the default budget, not an error)
            (
                "POST",
                "/v2/rerank",
                {"json": {"query": "q", "documents": [SECRET] * 3}},
                413,
                "input_too_large",
            ),
            (
                "POST",
                "/v2/rerank",
                {"json": {"query": "q", "documents": [SECRET * 40]}},
                413,
                "input_too_large",
            ),
            (
                "POST",
                "/v2/rerank",
                {"json": {"query": "q", "documents": ["x" * 3000]}},
                413,
                "input_too_large",
            ),
            (
                "POST",
                "/v2/rerank",
                {"content": b'{"query": "q"}', "headers": {"content-type": "text/plain"}},
                415,
                "unsupported_media_type",
            ),
            ("GET", "/v9/nothing", {}, 404, "not_found"),
            ("GET", "/v2/rerank", {}, 405, "method_not_allowed"),
        ]
        for method, path, kwargs, status, error_type in cases:
            headers = {**AUTH, "content-type": "application/json", **kwargs.pop("headers", {})}
            resp = await c.request(method, path, headers=headers, **kwargs)
            _assert_error_shape(resp, schema, status, error_type)
            operation = spec["paths"].get(path, {}).get(method.lower())
            if operation is not None:
                declared = operation["responses"][str(status)]["content"]["application/json"]
                assert declared["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
        _assert_error_shape(await c.post("/v2/rerank", json=doc), schema, 401, "unauthorized")
    # 503 before the model is loaded (no lifespan yet), with Retry-After.
    cold = AsyncTestClient(app=make_app())
    not_ready = await cold.post("/v2/rerank", json=doc)
    _assert_error_shape(not_ready, schema, 503, "not_ready")
    assert not_ready.headers["retry-after"] == "1"
    # 429 from the rate limiter (a guard, outside the handlers).
    async with AsyncTestClient(app=make_app(rate_limit_per_minute=1)) as c:
        await c.get("/v9/nothing")  # 404s are not limited
        await c.post("/v2/rerank", json={"query": "q"})
        limited = await c.post("/v2/rerank", json={"query": "q"})
        _assert_error_shape(limited, schema, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize("route", ["/v2/rerank", "/v1/compress", "/v1/rerank_compress"])
async def test_limits_name_the_limit(make_app: Callable[..., Litestar], route: str) -> None:
    budget = {} if route == "/v2/rerank" else {"ratio": 0.5}
    app = make_app(max_documents=3, max_query_tokens=8, max_tokens_per_doc=32)
    async with AsyncTestClient(app=app) as c:
        many = await c.post(route, json={"query": "q", "documents": ["a"] * 4, **budget})
        assert many.status_code == 413
        assert "at most 3" in many.json()["message"]
        assert "RAGATTN_MAX_DOCUMENTS" in many.json()["message"]
        long_query = await c.post(route, json={"query": "word " * 40, "documents": ["a"], **budget})
        assert long_query.status_code == 413
        assert "the limit is 8" in long_query.json()["message"]
        long_doc = await c.post(route, json={"query": "q", "documents": ["word " * 100], **budget})
        assert long_doc.status_code == 413
        assert "the limit is 32" in long_doc.json()["message"]


async def test_an_over_long_document_is_truncated_with_a_warning_when_asked(
    make_app: Callable[..., Litestar],
) -> None:
    async with AsyncTestClient(app=make_app(max_tokens_per_doc=32)) as c:
        resp = await c.post(
            "/v2/rerank",
            json={"query": "q", "documents": ["word " * 100, "short"], "max_tokens_per_doc": 16},
        )
    assert resp.status_code == 200
    warnings = resp.json()["meta"]["warnings"]
    assert re.fullmatch(r"documents\[0\] truncated from \d+ to 16 tokens.*", warnings[0]), warnings
    assert len(warnings) == 1  # the short document is untouched


# --- the bad-input corpus ----------------------------------------------------------------------

MODEL_ROUTES = ["/v2/rerank", "/v1/rerank", "/rerank", "/v1/compress", "/v1/rerank_compress"]

RTL = "مرحبا بالعالم، باريس عاصمة فرنسا. שלום עולם, ירושלים."
COMBINING = "e\u0301\u0308 a\u030a n\u0303 Z\u0335\u0321\u0322\u0327a\u0338lg\u0334o."
EMOJI_CJK = "👩‍👩‍👧‍👦🇫🇷 東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다."

# (name, raw JSON for "query", raw JSON for "documents"); raw so lone surrogates stay escapes.
CORPUS: list[tuple[str, str, str]] = [
    ("empty query", '""', '["a"]'),
    ("whitespace query", '" \\t\\n "', '["a"]'),
    ("empty document", '"q"', '[""]'),
    ("whitespace documents", '"q"', '["   ", "\\n\\t"]'),
    ("documents []", '"q"', "[]"),
    ("documents null", '"q"', "null"),
    ("documents 123", '"q"', "123"),
    ("documents [1,2,3]", '"q"', "[1, 2, 3]"),
    ("query []", "[]", '["a"]'),
    ("query null", "null", '["a"]'),
    ("query 123", "123", '["a"]'),
    (
        "NUL and controls",
        '"capital\\u0000 of\\u0001 France\\u001b?"',
        '["Paris\\u0000 is\\u0007 the capital.\\u007f", "x\\u0000"]',
    ),
    ("lone high surrogate", '"q"', '["Paris \\ud800 is the capital."]'),
    ("lone low surrogate", '"q \\udfff"', '["a"]'),
    ("RTL and combining", json.dumps(RTL), json.dumps([RTL, COMBINING])),
    ("emoji and CJK", json.dumps("首都は？ 🏙️"), json.dumps([EMOJI_CJK, "🙂" * 50])),
]


def _body(route: str, query: str, documents: str) -> bytes:
    extra = ', "ratio": 0.5' if "compress" in route else ', "return_documents": true'
    return f'{{"query": {query}, "documents": {documents}{extra}}}'.encode()


def _check_success(route: str, sent: dict[str, Any], body: dict[str, Any]) -> None:
    docs = sent["documents"]
    texts = [d if isinstance(d, str) else d["text"] for d in docs]
    results = body.get("results")
    if results is not None:
        assert sorted(r["index"] for r in results) == list(range(len(texts)))
        assert all(0.0 <= r["relevance_score"] <= 1.0 for r in results)
    compression = body.get("compression", body if "compressed_text" in body else None)
    if compression is not None:
        for doc in compression["documents"]:
            text = texts[doc["index"]]  # doc["text"] is the document's compressed text
            for span in doc["kept_spans"]:
                # Spans are exact character slices of the input document.
                assert text[span["start"] : span["end"]] == span["text"]
                assert span["text"] in text
                assert span["text"] in doc["text"]


@pytest.fixture
async def keyed_small(make_app: Callable[..., Litestar]) -> Any:
    # No request deadline: these tests are about input handling, not speed on a loaded box.
    async with AsyncTestClient(app=make_app(max_tokens_per_doc=512, request_timeout_s=0)) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("route", MODEL_ROUTES)
@pytest.mark.parametrize(("name", "query", "documents"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_bad_input_is_never_a_server_error(
    keyed_small: AsyncTestClient[Litestar], route: str, name: str, query: str, documents: str
) -> None:
    raw = _body(route, query, documents)
    resp = await keyed_small.post(route, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code < 500, (name, resp.text)
    if resp.status_code >= 400:
        assert set(resp.json()) == {"error_type", "message"}
        return
    _check_success(route, json.loads(raw), resp.json())


@pytest.mark.slow
@pytest.mark.parametrize("route", MODEL_ROUTES)
async def test_a_one_megabyte_document_is_refused_not_crashed(
    keyed_small: AsyncTestClient[Litestar], route: str
) -> None:
    doc = ("Paris is the capital of France. " * 40_000)[:1_000_000]
    resp = await keyed_small.post(
        route,
        content=_body(route, '"capital?"', json.dumps([doc])),
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 413
    assert resp.json()["error_type"] == "input_too_large"
    assert "RAGATTN_MAX_TOKENS_PER_DOC" in resp.json()["message"]
