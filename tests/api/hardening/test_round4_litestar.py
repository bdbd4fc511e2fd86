"""Issue 44 §6 (the service's part): the app declares what Litestar 3 will no longer infer.

Litestar 2.23+ warns, once per handler and app, about dependencies it infers from a parameter's
name (``service``, ``metrics``: now ``NamedDependency[...]``), a ``data`` parameter without a body
marker (now ``JSONBody[...]``) and a path parameter without one (now ``FromPath[...]``); the test
run printed thousands of them. Building the app with every route, and serving one request on each,
emits none.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.exceptions import LitestarDeprecationWarning
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

CORPUS = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome."}]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("litestar-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


async def test_no_litestar_deprecation_warning_is_emitted(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app = make_app(cache_backend="none", index_dir=str(index_dir), generator_max_tokens=2)
        async with AsyncTestClient(app=app) as c:
            small = {"query": "capital", "documents": ["Paris."]}
            for method, path, body in (
                ("POST", "/v2/rerank", small),
                ("POST", "/v1/compress", {**small, "ratio": 0.5}),
                ("POST", "/v1/rerank_compress", {**small, "ratio": 0.5}),
                ("POST", "/v1/retrieve", {"query": "capital", "mode": "bm25", "k": 1}),
                ("POST", "/v1/ask", {"question": "France", "mode": "bm25", "top_k": 1}),
                ("GET", "/metrics", None),
                ("GET", "/ready", None),
                ("GET", "/static/app.js", None),
            ):
                resp = await c.request(method, path, json=body)
                assert resp.status_code == 200, (path, resp.text[:300])
    found = [str(w.message) for w in caught if issubclass(w.category, LitestarDeprecationWarning)]
    assert not found, found[:3]
