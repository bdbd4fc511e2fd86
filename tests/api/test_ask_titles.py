"""``POST /v1/ask`` over an index of the shipped demo corpus (Markdown files, each opening with a
``# Title`` heading): the sources carry the headings as titles, as the one read got them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.pipeline import demo_corpus_dir
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("demo-index") / "idx"
    Index.build(demo_corpus_dir(), out, dense=False)
    return out


async def test_ask_sources_carry_the_markdown_titles(
    make_app: Callable[..., Litestar], demo_index: Path
) -> None:
    payload = {"question": "Who designed the Eiffel Tower?", "mode": "bm25", "top_k": 3}
    app = make_app(index_dir=str(demo_index), generator_max_tokens=4)
    async with AsyncTestClient(app=app) as c:
        resp = await c.post("/v1/ask", json=payload)
    assert resp.status_code == 200, resp.text
    sources = resp.json()["sources"]
    assert sources and all(s["title"] for s in sources)
    assert {"id": "eiffel-tower.md", "title": "Eiffel Tower"} in [
        {"id": s["id"], "title": s["title"]} for s in sources
    ]
