"""``meta.stage_seconds`` over HTTP: a fresh answer of the compressor's routes says where its time
went, stage by stage; a cached one claims no seconds; plain rerank bodies stay Cohere's."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.compress.read import STAGES

pytestmark = pytest.mark.anyio

QUERY = "When was the Eiffel Tower completed?"
DOCS = [
    "The Eiffel Tower is in Paris. It was completed in 1889. Bananas are yellow.",
    "Mount Everest is the highest mountain. It lies in the Himalayas.",
    "Paris is the capital of France. The Exposition Universelle of 1889 was held there.",
]
COMPRESS_STAGES = [s for s in STAGES if s != "ranking"]


def _without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def _check_seconds(seconds: dict[str, float], stages: list[str]) -> None:
    assert list(seconds) == stages
    assert all(isinstance(s, float) and s >= 0.0 for s in seconds.values())


async def test_compress_meta_has_the_stage_seconds_of_a_fresh_answer_only(
    client: AsyncTestClient[Litestar],
) -> None:
    payload = {"query": QUERY, "documents": DOCS, "ratio": 0.5}
    fresh = await client.post("/v1/compress", json=payload)
    cached = await client.post("/v1/compress", json=payload)
    assert fresh.status_code == cached.status_code == 200, fresh.text
    assert (fresh.headers["x-ragattn-cache"], cached.headers["x-ragattn-cache"]) == ("miss", "hit")
    body = fresh.json()
    assert list(body["meta"]) == ["stage_seconds"]
    _check_seconds(body["meta"]["stage_seconds"], COMPRESS_STAGES)
    assert "meta" not in cached.json()  # a hit claims no seconds
    assert _without(cached.json(), "id") == _without(body, "id", "meta")


async def test_rerank_compress_meta_has_every_stage_and_a_hit_none(
    client: AsyncTestClient[Litestar],
) -> None:
    payload = {"query": QUERY, "documents": DOCS, "ratio": 0.5, "top_n": 2}
    fresh = (await client.post("/v1/rerank_compress", json=payload)).json()
    cached = await client.post("/v1/rerank_compress", json=payload)
    assert cached.headers["x-ragattn-cache"] == "hit"
    assert list(fresh["meta"]) == ["api_version", "billed_units", "warnings", "stage_seconds"]
    _check_seconds(fresh["meta"]["stage_seconds"], list(STAGES))
    hit = cached.json()
    assert "stage_seconds" not in hit["meta"]
    fresh["meta"].pop("stage_seconds")
    assert _without(hit, "id") == _without(fresh, "id")


@pytest.mark.parametrize("route", ["/v1/rerank", "/v2/rerank", "/rerank"])
async def test_rerank_meta_has_stage_seconds_with_prune_only(
    client: AsyncTestClient[Litestar], route: str
) -> None:
    pruned = await client.post(
        route, json={"query": QUERY, "documents": DOCS, "prune": {"ratio": 0.5}}
    )
    plain = await client.post(route, json={"query": QUERY, "documents": DOCS})
    assert pruned.status_code == plain.status_code == 200, pruned.text
    meta = pruned.json()["meta"]
    assert list(meta) == ["api_version", "billed_units", "warnings", "pruning", "stage_seconds"]
    _check_seconds(meta["stage_seconds"], list(STAGES))
    assert list(plain.json()["meta"]) == ["api_version", "billed_units", "warnings"]
    again = await client.post(
        route, json={"query": QUERY, "documents": DOCS, "prune": {"ratio": 0.5}}
    )
    assert again.headers["x-ragattn-cache"] == "hit"
    assert "stage_seconds" not in again.json()["meta"]
