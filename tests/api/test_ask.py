"""``POST /v1/ask`` over a small BM25 index: the real pipeline (default rerank and compression,
local 135M generator) behind the service's worker and cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

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


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("ask-index") / "idx"
    Index.build(CORPUS, out, dense=False, chunk_words=None)
    return out


async def test_ask_answers_with_sources_and_caches(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    payload = {"question": QUESTION, "mode": "bm25", "top_k": 3, "top_n": 2, "ratio": 0.5}
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        first = await c.post("/v1/ask", json={**payload, "return_text": True})
        second = await c.post("/v1/ask", json={**payload, "return_text": True})
    assert first.status_code == 200, first.text
    body = first.json()
    assert first.headers["x-ragattn-cache"] == "miss"
    assert body["cache_hit"] is False
    assert body["answer"].strip()
    assert body["model"] == "smollm2-135m"
    assert [s["id"] for s in body["sources"]][0] == "eiffel"
    assert len(body["sources"]) == 2
    top = body["sources"][0]
    assert top["context_position"] == 1
    assert 0.0 <= top["relevance_score"] <= 1.0
    for span in top["kept_spans"]:
        assert top["text"][span["start"] : span["end"]] == span["text"]
    assert 0 < body["tokens_after"] <= body["tokens_before"]
    assert body["ratio"] == pytest.approx(body["tokens_after"] / body["tokens_before"])
    assert body["prompt_tokens"] > 0 and body["completion_tokens"] > 0
    assert body["timings"]["generate"] > 0
    # the default flow: one read ranks and prunes every candidate
    assert body["flow"] == "one_read"
    assert body["ranked_by"] == "sentinel:document-probe"
    assert body["timings"]["read"] > 0 and body["timings"]["rerank"] == 0.0
    assert second.status_code == 200, second.text
    again = second.json()
    assert second.headers["x-ragattn-cache"] == "hit"
    assert again["cache_hit"] is True
    assert again["timings"]["generate"] == 0.0
    assert again["id"] != body["id"]
    for key in ("answer", "sources", "tokens_before", "tokens_after", "prompt_tokens"):
        assert again[key] == body[key]


async def test_ask_switches_and_orders(make_app: Callable[..., Litestar], index_dir: Path) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        resp = await c.post(
            "/v1/ask",
            json={
                "question": QUESTION,
                "mode": "bm25",
                "top_k": 3,
                "top_n": 3,
                "rerank": False,
                "compress": False,
                "order": "best_last",
            },
        )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["order"] == "best_last"
    assert body["tokens_before"] == body["tokens_after"]
    assert all("relevance_score" not in s for s in body["sources"])
    assert [s["retrieval_rank"] for s in body["sources"]] == [1, 2, 3]
    # best_last: the first-stage best passage sits last, next to the question.
    assert [s["context_position"] for s in body["sources"]] == [3, 2, 1]


async def test_ask_errors(make_app: Callable[..., Litestar], index_dir: Path) -> None:
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir), max_documents=5)) as c:
        empty = await c.post("/v1/ask", json={"question": " ", "top_k": 3, "mode": "bm25"})
        too_many = await c.post("/v1/ask", json={"question": "q", "top_k": 6, "mode": "bm25"})
        bad_order = await c.post("/v1/ask", json={"question": "q", "order": "middle"})
        bad_ratio = await c.post("/v1/ask", json={"question": "q", "top_k": 3, "ratio": 0})
        bad_flow = await c.post("/v1/ask", json={"question": "q", "flow": "both"})
    assert (empty.status_code, empty.json()["error_type"]) == (400, "invalid_request")
    assert (too_many.status_code, too_many.json()["error_type"]) == (413, "input_too_large")
    assert (bad_order.status_code, bad_order.json()["error_type"]) == (400, "invalid_request")
    assert (bad_ratio.status_code, bad_ratio.json()["error_type"]) == (400, "invalid_request")
    assert "ratio" in bad_ratio.json()["message"]
    assert (bad_flow.status_code, bad_flow.json()["error_type"]) == (400, "invalid_request")
    assert "$.flow" in bad_flow.json()["message"]


async def test_ask_two_pass_flow_reranks_then_compresses(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    payload = {"question": QUESTION, "mode": "bm25", "top_k": 3, "flow": "two_pass"}
    async with AsyncTestClient(app=make_app(index_dir=str(index_dir))) as c:
        resp = await c.post("/v1/ask", json=payload)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["flow"], body["ranked_by"]) == ("two_pass", "minilm")
    assert body["timings"]["read"] == 0.0 and body["timings"]["compress"] > 0
    assert len(body["sources"]) == 3 and body["sources"][0]["id"] == "eiffel"


async def test_ask_caps_the_context_at_max_context_tokens(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    """The default budget is 0.2 with a 1,024-token ceiling (it does not bind on this small
    index); ``max_context_tokens`` caps a caller's ratio too."""
    app = make_app(index_dir=str(index_dir), generator_max_tokens=2, cache_backend="none")
    base = {"question": QUESTION, "mode": "bm25", "top_k": 4}
    async with AsyncTestClient(app=app) as c:
        default = await c.post("/v1/ask", json=base)
        whole = await c.post("/v1/ask", json={**base, "ratio": 1.0})
        capped = await c.post("/v1/ask", json={**base, "ratio": 1.0, "max_context_tokens": 16})
        refused = await c.post(
            "/v1/ask", json={**base, "compress": False, "max_context_tokens": 16}
        )
    for resp in (default, whole, capped):
        assert resp.status_code == 200, resp.text
    before = default.json()["tokens_before"]
    assert default.json()["tokens_after"] <= min(1024, int(0.2 * before))
    assert capped.json()["tokens_after"] <= 16 < whole.json()["tokens_after"]
    assert (refused.status_code, refused.json()["error_type"]) == (400, "invalid_request")
    assert "max_context_tokens" in refused.json()["message"]


async def test_ask_is_absent_without_an_index(make_app: Callable[..., Litestar]) -> None:
    async with AsyncTestClient(app=make_app()) as c:
        resp = await c.post("/v1/ask", json={"question": QUESTION})
    assert resp.status_code == 404


async def test_unreachable_generator_endpoint_is_a_502(
    make_app: Callable[..., Litestar], index_dir: Path
) -> None:
    import socket

    with socket.socket() as s:  # a loopback port with no listener
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_app(
        index_dir=str(index_dir),
        generator_base_url=f"http://127.0.0.1:{port}/v1",
        generator_model="m",
        generator_api_key="sk-secret",
    )
    async with AsyncTestClient(app=app) as c:
        resp = await c.post("/v1/ask", json={"question": QUESTION, "top_k": 3, "mode": "bm25"})
    assert (resp.status_code, resp.json()["error_type"]) == (502, "generator_error")
    assert "cannot reach the generator" in resp.json()["message"]
    assert "sk-secret" not in repr(app.state.settings)


def test_generator_settings_are_validated() -> None:
    from ragattn.errors import ConfigError
    from ragattn.settings import Settings

    with pytest.raises(
        ConfigError, match="RAGATTN_GENERATOR_BASE_URL needs RAGATTN_GENERATOR_MODEL"
    ):
        Settings.from_env({"RAGATTN_GENERATOR_BASE_URL": "http://127.0.0.1:1/v1"})
    with pytest.raises(
        ConfigError, match="RAGATTN_GENERATOR_MAX_TOKENS must be a positive integer"
    ):
        Settings.from_env({"RAGATTN_GENERATOR_MAX_TOKENS": "0"})
