"""Issue 16 §9 and issue 18: the OpenAPI document is as strict as the server, the docs pages work
offline, a missing optional module is a 501 naming its extra, and nothing is clamped silently."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn_api.routes.page import ASSETS
from ragattn_api.schemas import NOT_SPACE

pytestmark = pytest.mark.anyio


async def _spec(app: Litestar) -> dict[str, Any]:
    async with AsyncTestClient(app=app) as c:
        return (await c.get("/schema/openapi.json")).json()


def _request_schema(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A request body schema, standalone (components inlined by reference) for validation."""
    return {**spec["components"]["schemas"][name], "components": spec["components"]}


def _validator(spec: dict[str, Any], name: str) -> Any:
    schema = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    return jsonschema_rs.validator_for(schema)


# (body, accepted by the server) — the document must say the same of each.
RERANK_CASES: list[tuple[dict[str, Any], bool]] = [
    ({"query": "q", "documents": ["a"]}, True),
    ({"query": "q", "texts": ["a"]}, True),
    ({"query": "q", "documents": ["a"], "texts": None}, True),
    ({"query": "q"}, False),
    ({"query": "q", "documents": ["a"], "texts": ["b"]}, False),
    ({"query": "q", "documents": []}, False),
    ({"query": "", "documents": ["a"]}, False),
    ({"query": " \t", "documents": ["a"]}, False),
    ({"query": "\x1f\x1f", "documents": ["a"]}, False),  # space to Python, not to ECMA-262
    ({"query": "\ufeff", "documents": ["a"]}, False),  # space to ECMA-262, not to Python
    ({"query": "\x00", "documents": ["a"]}, True),
    ({"query": "q", "documents": ["a"], "top_n": 1, "top_k": 1}, False),
    ({"query": "q", "documents": ["a"], "top_n": 1, "top_k": None}, True),
    ({"query": "q", "documents": ["a"], "top_n": "1"}, False),
    ({"query": "q", "documents": ["a"], "rank_fields": ["title"]}, False),
    ({"query": "q", "documents": ["a"], "rank_fields": ["text"]}, True),
    ({"query": "q", "documents": ["a", "b", "c"]}, False),  # over max_documents=2
    ({"query": "q", "documents": ["a"], "method": "minilm"}, True),
    ({"query": "q", "documents": ["a"], "method": None}, True),
    ({"query": "q", "documents": ["a"], "method": "no-such-method"}, False),
    ({"query": "q", "documents": ["a"], "method": ""}, False),
    ({"query": "q", "documents": ["a. b."], "prune": {}}, True),  # no budget: DEFAULT_BUDGET
    ({"query": "q", "documents": ["a. b."], "prune": {"max_tokens": 8}}, True),
    ({"query": "q", "documents": ["a. b."], "prune": {"ratio": 0.2, "threshold": 0.5}}, False),
    ({"query": "q", "documents": ["a. b."], "prune": {"target_tokens": 3, "max_tokens": 8}}, False),
]
COMPRESS_CASES: list[tuple[dict[str, Any], bool]] = [
    ({"query": "q", "documents": ["a. b."], "ratio": 0.5}, True),
    ({"query": "q", "context": "a. b.", "rate": 0.5}, True),
    ({"query": "q", "context": ["a. b."], "target_token": 3}, True),
    ({"query": "q", "documents": ["a. b."], "threshold": 0.5, "ratio": None}, True),
    ({"query": "q", "documents": ["a. b."]}, True),  # no budget: DEFAULT_BUDGET
    ({"query": "q", "documents": ["a. b."], "max_tokens": 8}, True),  # its ceiling replaced
    ({"query": "q", "documents": ["a. b."], "threshold": 0.5, "max_tokens": 8}, False),
    ({"query": "q", "documents": ["a. b."], "rate": 0.5, "target_token": 3}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 0.5, "rate": 0.5}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 0.5, "target_tokens": 3}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 0}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 1.5}, False),
    ({"query": "q", "documents": ["a. b."], "context": "c.", "ratio": 0.5}, False),
    ({"query": "q", "ratio": 0.5}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 0.5, "method": "no-such-method"}, False),
    ({"query": "q", "documents": ["a. b."], "ratio": 0.5, "method": ""}, False),
]


@pytest.mark.parametrize(
    ("route", "schema", "cases"),
    [
        ("/v2/rerank", "RerankRequest", RERANK_CASES),
        ("/v1/compress", "CompressRequest", COMPRESS_CASES),
    ],
)
async def test_the_document_accepts_exactly_what_the_server_accepts(
    make_app: Callable[..., Litestar], route: str, schema: str, cases: list[Any]
) -> None:
    app = make_app(max_documents=2)
    spec = await _spec(app)
    validator = _validator(spec, schema)
    async with AsyncTestClient(app=app) as c:
        for body, accepted in cases:
            resp = await c.post(route, json=body)
            assert (resp.status_code == 200) is accepted, (body, resp.text)
            assert validator.is_valid(body) is accepted, body


async def test_the_document_declares_security_errors_and_bounds(
    make_app: Callable[..., Litestar],
) -> None:
    keyed = await _spec(make_app(api_keys=("k",), max_documents=7))
    assert keyed["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "One of the server's RAGATTN_API_KEYS as 'Authorization: Bearer'",
    }
    for path, methods in keyed["paths"].items():
        for method, op in methods.items():
            public = path in {"/health", "/ready", "/metrics"}
            assert op.get("security") == (None if public else [{"bearer": []}]), (path, method)
            if method == "post":
                assert {"400", "401", "408", "413", "415", "429", "431", "501", "503"} <= set(
                    op["responses"]
                ), path
                assert list(op["requestBody"]["content"]) == ["application/json"]
    rerank = keyed["components"]["schemas"]["RerankRequest"]["properties"]
    assert rerank["query"]["minLength"] == 1 and rerank["query"]["pattern"] == NOT_SPACE
    assert rerank["documents"]["maxItems"] == 7
    compress = keyed["components"]["schemas"]["CompressRequest"]["properties"]
    ratio = next(s for s in compress["ratio"]["oneOf"] if s.get("type") == "number") or {}
    assert compress["ratio"].get("exclusiveMinimum", ratio.get("exclusiveMinimum")) == 0
    open_ = await _spec(make_app())
    assert "securitySchemes" not in open_["components"]
    assert all("security" not in op for m in open_["paths"].values() for op in m.values())


async def test_the_docs_pages_load_nothing_from_elsewhere(client: Any) -> None:
    for page in ("/schema", "/schema/swagger"):
        html = (await client.get(page)).text
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
        assert urls, html
        for url in urls:
            assert url.startswith("/static/"), url
            asset = await client.get(url)
            assert asset.status_code == 200, url
            assert url.removeprefix("/static/") in ASSETS
        assert "http://" not in html and "https://" not in html.replace("https://swagger.io", "")


class _MissingModuleReranker:
    """The real reranker on a deployment that lacks an optional module (the ``retrieve`` extra's
    ``bm25s``): its scorer's import fails at request time."""

    def __init__(self, inner: Any) -> None:
        self.proxy = inner.proxy
        self.method = inner.method

    def rerank_checked(self, *args: Any, **kwargs: Any) -> Any:
        raise ModuleNotFoundError("No module named 'bm25s'", name="bm25s")


async def test_a_missing_optional_module_is_a_501_naming_the_extra(
    make_app: Callable[..., Litestar], reranker: Any
) -> None:
    app = make_app(reranker=_MissingModuleReranker(reranker))
    async with AsyncTestClient(app=app) as c:
        resp = await c.post("/v2/rerank", json={"query": "q", "documents": ["a"]})
    assert resp.status_code == 501, resp.text
    assert resp.json() == {
        "error_type": "missing_dependency",
        "message": "the optional module 'bm25s' is not installed; install it with: "
        "pip install 'ragattn[retrieve]'",
    }


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("contract-index") / "idx"
    corpus = [
        {"id": "eiffel", "text": "The Eiffel Tower was completed on 31 March 1889."},
        {"id": "pisa", "text": "The Leaning Tower stands in Pisa."},
        {"id": "rhine", "text": "The Rhine flows through Germany."},
    ]
    Index.build(corpus, out, dense=False, chunk_words=None)
    return out


@pytest.mark.slow
async def test_ask_says_when_top_n_exceeds_top_k(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        resp = await c.post(
            "/v1/ask",
            json={
                "question": "When was the Eiffel Tower completed?",
                "mode": "bm25",
                "top_k": 2,
                "top_n": 5,
                "compress": False,
            },
        )
    assert resp.status_code == 200, resp.text
    assert resp.json()["warnings"][0] == "top_n=5 is more than top_k=2: at most top_k passages"
    assert len(resp.json()["sources"]) == 2
