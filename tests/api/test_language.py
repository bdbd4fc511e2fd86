"""The ``language`` of sentence splitting over HTTP: ``/v1/compress``, ``/v1/rerank_compress``,
the rerank routes' ``prune`` and ``/v1/ask`` take one (``auto`` or an ISO 639-1 code), refuse an
unknown one with a 400 ``invalid_request``, split by it, and never answer one language's call
from another's cache entry. The real default compressor on one short German document."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

QUERY = "Wann kam er nach Hause?"
GERMAN = "Er kam am 12. Mai nach Hause zurück. Dann schlief er lange."
"""Two sentences under German rules (which ``auto`` picks for it), three under English ones
("am 12." ends one)."""
BODY = {"query": QUERY, "documents": [GERMAN], "ratio": 1.0}


def _refused(resp: Any) -> None:
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["error_type"] == "invalid_request"
    assert "language" in body["message"]


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/rerank_compress"])
async def test_compress_routes_split_by_the_language_and_key_the_cache_on_it(
    client: AsyncTestClient[Litestar], route: str
) -> None:
    german = await client.post(route, json={**BODY, "language": "de"})
    english = await client.post(route, json={**BODY, "language": "en"})
    auto = await client.post(route, json=BODY)
    again = await client.post(route, json={**BODY, "language": "de"})
    answers = (german, english, auto, again)
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    assert [r.headers["x-ragattn-cache"] for r in answers] == ["miss", "miss", "miss", "hit"]

    def scores(resp: Any) -> list[float]:
        body = resp.json()
        docs = body["documents"] if route == "/v1/compress" else body["compression"]["documents"]
        return list(docs[0]["sentence_scores"])

    # auto identifies German and splits by its rules, as "de" does; English rules cut "am 12."
    assert [len(scores(r)) for r in (german, english, auto)] == [2, 3, 2]
    unknown = await client.post(route, json={**BODY, "language": "xx"})
    _refused(unknown)
    assert "valid languages: auto, am, ar," in unknown.json()["message"]
    _refused(await client.post(route, json={**BODY, "language": None}))


async def test_prune_takes_a_language_and_refuses_an_unknown_one(
    client: AsyncTestClient[Litestar],
) -> None:
    base = {"query": QUERY, "documents": [GERMAN, "Bananen sind gelb."]}
    ok = await client.post("/v2/rerank", json={**base, "prune": {"ratio": 1.0, "language": "de"}})
    assert ok.status_code == 200, ok.text
    assert ok.json()["results"][0]["pruned_text"]
    _refused(
        await client.post("/v2/rerank", json={**base, "prune": {"ratio": 1.0, "language": "xx"}})
    )
    top = await client.post("/v2/rerank", json={**base, "language": "de"})
    _refused(top)
    assert "send it in 'prune'" in top.json()["message"]


def _states_the_languages(spec: dict[str, Any], *names: str) -> None:
    from ragattn.languages import LANGUAGES

    for name in names:
        prop = spec["components"]["schemas"][name]["properties"]["language"]
        assert set(prop.get("enum", [])) == {"auto", *LANGUAGES}, (name, prop)


async def test_the_openapi_document_lists_the_languages(
    client: AsyncTestClient[Litestar],
) -> None:
    spec = (await client.get("/schema/openapi.json")).json()
    _states_the_languages(spec, "CompressRequest", "RerankCompressRequest", "PruneIn")


CORPUS = [
    {"id": "heimkehr", "text": GERMAN},
    {"id": "banane", "text": "Bananen sind gelb. Sie wachsen in den Tropen."},
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("language-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


async def test_ask_takes_a_language_where_it_compresses(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    base = {"question": QUERY, "mode": "bm25", "top_k": 2}
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        bad = await c.post("/v1/ask", json={**base, "language": "xx"})
        whole = await c.post("/v1/ask", json={**base, "compress": False, "language": "de"})
        ok = await c.post("/v1/ask", json={**base, "language": "de", "return_text": True})
        spec = (await c.get("/schema/openapi.json")).json()
    _states_the_languages(spec, "AskRequest")
    import jsonschema_rs

    schema = {"$ref": "#/components/schemas/AskRequest", "components": spec["components"]}
    valid = jsonschema_rs.validator_for(schema)
    assert valid.is_valid({"question": "q", "language": "de"})
    assert valid.is_valid({"question": "q", "compress": False, "language": "auto"})
    assert not valid.is_valid({"question": "q", "compress": False, "language": "de"})
    assert not valid.is_valid({"question": "q", "language": "xx"})
    _refused(bad)
    _refused(whole)
    assert "compress=false" in whole.json()["message"]
    assert ok.status_code == 200, ok.text
    (source,) = [s for s in ok.json()["sources"] if s["id"] == "heimkehr"]
    kept = [span["text"] for span in source["kept_spans"]]
    # German rules: "am 12. Mai" ends no sentence
    assert kept and set(kept) <= {"Er kam am 12. Mai nach Hause zurück.", "Dann schlief er lange."}
