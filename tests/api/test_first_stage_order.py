"""``first_stage_order`` over HTTP: ``/v1/compress`` and ``/v1/rerank_compress`` take the caller's
retriever order (the documents' indices, best first), key the cache on it, and refuse an order
that is no permutation of the documents with a 422 ``invalid_order`` before any model runs (one off
the schema: a 400 ``invalid_request``). The real default compressor; the SDK client sends the
order as given."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from ragattn.client.wire import compress_payload
from ragattn.errors import InvalidInputError
from ragattn.types import Document

pytestmark = pytest.mark.anyio

BODY = {
    "query": "In which year was the tower built?",
    "documents": [
        "The Eiffel Tower was built in 1889. It stands in Paris.",
        "The Tokyo Tower was built in 1958. It stands in Minato.",
    ],
    "ratio": 0.5,
}


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/rerank_compress"])
async def test_the_compress_routes_take_an_order_and_key_the_cache_on_it(
    client: AsyncTestClient[Litestar], route: str
) -> None:
    plain = await client.post(route, json=BODY)
    ordered = await client.post(route, json={**BODY, "first_stage_order": [1, 0]})
    again = await client.post(route, json={**BODY, "first_stage_order": [1, 0]})
    other = await client.post(route, json={**BODY, "first_stage_order": [0, 1]})
    assert {r.status_code for r in (plain, ordered, again, other)} == {200}, ordered.text
    assert [r.headers["x-ragattn-cache"] for r in (plain, ordered, again, other)] == [
        "miss",
        "miss",
        "hit",
        "miss",
    ]


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/rerank_compress"])
@pytest.mark.parametrize("order", [[0], [0, 0], [0, 2], [0, 1, 2], [7, 1]])
async def test_an_order_that_is_no_permutation_of_the_documents_is_a_422(
    client: AsyncTestClient[Litestar], route: str, order: Any
) -> None:
    """Integers >= 0 fit the schema, which cannot state the documents' count: ``invalid_order``."""
    resp = await client.post(route, json={**BODY, "first_stage_order": order})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error_type"] == "invalid_order"
    assert "permutation of the document indices 0..1" in body["message"]


@pytest.mark.parametrize("route", ["/v1/compress", "/v1/rerank_compress"])
@pytest.mark.parametrize("order", [[-1, 0], ["0", "1"], 1, [0.5, 1], None])
async def test_an_order_off_the_schema_is_a_400(
    client: AsyncTestClient[Litestar], route: str, order: Any
) -> None:
    resp = await client.post(route, json={**BODY, "first_stage_order": order})
    if order is None:  # null is the default: no order
        assert resp.status_code == 200, resp.text
        return
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["error_type"] == "invalid_request"
    assert "first_stage_order" in body["message"]


def _payload(**order: Any) -> dict[str, Any]:
    docs = [Document(text="a."), Document(text="b.")]
    return compress_payload(
        "q", docs, {"ratio": 0.5}, keep_order=True, top_n=None, method=None, **order
    )


def test_the_client_sends_the_order_as_plain_integers_and_refuses_other_entries() -> None:
    import numpy as np

    payload = _payload(first_stage_order=np.array([1, 0]))
    assert payload["first_stage_order"] == [1, 0]
    assert all(type(i) is int for i in payload["first_stage_order"])
    assert "first_stage_order" not in _payload()
    with pytest.raises(InvalidInputError, match="first_stage_order"):
        _payload(first_stage_order=["1", "0"])
