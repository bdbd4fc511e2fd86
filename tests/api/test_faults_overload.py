"""Scorer faults, overload, deadlines, abandoned work and concurrency isolation.

The NaN fault is injected into the real packaged proxy (a forward hook that poisons the token
embeddings for the next forward passes): a test double for the model, not for the service.
Overload and deadline tests hold the model thread with ``GatedReranker`` (the real reranker behind
an event) on a live uvicorn server, so queueing, 429s and disconnects go through real sockets.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio.to_thread
import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

pytestmark = pytest.mark.anyio

QUERY = "What is the capital of France?"
DOCS = [
    "Paris is the capital of France. It lies on the Seine.",
    "Rome is the capital of Italy. It has the Colosseum.",
    "Bananas are rich in potassium. They grow in the tropics.",
]


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` less what belongs to one computation: ``id``, and the seconds of a fresh read
    (``meta.stage_seconds``)."""
    out = {k: v for k, v in body.items() if k != "id"}
    if isinstance(out.get("meta"), dict):
        out["meta"] = {k: v for k, v in out["meta"].items() if k != "stage_seconds"}
    return out


def _metric(text: str, prefix: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


@contextmanager
def poisoned(proxy: Any, forwards: int) -> Iterator[list[int]]:
    """The next ``forwards`` forward passes of the proxy compute NaN embeddings."""
    left = [forwards]
    lock = threading.Lock()

    def hook(_module: Any, _args: Any, output: Any) -> Any:
        with lock:
            if left[0] <= 0:
                return None
            left[0] -= 1
        return output * float("nan")

    handle = proxy.model.get_input_embeddings().register_forward_hook(hook)
    try:
        yield left
    finally:
        handle.remove()


@pytest.fixture(scope="module")
def icr_reranker(proxy: Any) -> Any:
    from ragattn import Reranker

    return Reranker(proxy, method="icr")  # an attention method: its scores come from the forward


@pytest.mark.slow
@pytest.mark.parametrize(
    ("route", "extra"),
    [
        ("/v2/rerank", {}),
        ("/v1/compress", {"ratio": 0.5}),
        ("/v1/rerank_compress", {"ratio": 0.5}),
    ],
)
async def test_nan_from_the_model_fails_only_that_request(
    make_app: Callable[..., Litestar], icr_reranker: Any, proxy: Any, route: str, extra: dict
) -> None:
    body = {"query": QUERY, "documents": DOCS, **extra}
    async with AsyncTestClient(app=make_app(reranker=icr_reranker)) as c:
        with poisoned(proxy, forwards=1000) as left:
            bad = await c.post(route, json=body)
        assert left[0] < 1000, "the fault was never injected: the route ran no forward pass"
        assert bad.status_code == 500, bad.text
        assert bad.json()["error_type"] == "model_error"
        assert "non-finite" in bad.json()["message"]
        # Nothing was cached, the worker is free, the next identical request succeeds.
        good = await c.post(route, json=body)
        assert good.status_code == 200, good.text
        assert good.headers["x-ragattn-cache"] == "miss"
        assert (await c.get("/health")).status_code == 200


@pytest.mark.slow
async def test_overload_is_a_fast_429_and_admitted_requests_finish(
    make_app: Callable[..., Litestar], gated: Any, live_server: Any
) -> None:
    """Queue of 2: two distinct requests are admitted; eight more are refused at once."""
    app = make_app(reranker=gated, queue_size=2, cache_backend="none")
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            admitted = [
                asyncio.ensure_future(
                    c.post("/v2/rerank", json={"query": f"{QUERY} {i}", "documents": DOCS})
                )
                for i in range(2)
            ]
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            while "ragattn_queue_depth 2.0" not in (await c.get("/metrics")).text:
                await asyncio.sleep(0.01)

            async def refused(i: int) -> tuple[httpx.Response, float]:
                started = time.perf_counter()
                resp = await c.post("/v2/rerank", json={"query": f"excess {i}", "documents": DOCS})
                return resp, time.perf_counter() - started

            excess = await asyncio.gather(*(refused(i) for i in range(8)))
            gated.gate.set()
            done = await asyncio.gather(*admitted)
            metrics = (await c.get("/metrics")).text
    for resp, seconds in excess:
        assert resp.status_code == 429 and resp.json()["error_type"] == "overloaded"
        assert int(resp.headers["retry-after"]) >= 1
        # Generous bound for a shared 2-core CI box; studies/soak.py measures the real figure.
        assert seconds < 2.0
    assert [r.status_code for r in done] == [200, 200]
    assert gated.calls == 2
    assert (
        _metric(metrics, 'ragattn_requests_total{method="POST",route="/v2/rerank",status="500"')
        == 0
    )
    assert "ragattn_queue_rejected_total 8.0" in metrics


@pytest.mark.slow
async def test_a_job_past_its_deadline_is_dropped_not_computed(
    make_app: Callable[..., Litestar], gated: Any, live_server: Any
) -> None:
    app = make_app(reranker=gated, cache_backend="none", request_timeout_s=1.0)
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            first = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": QUERY, "documents": DOCS})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            queued = await c.post("/v2/rerank", json={"query": "other", "documents": DOCS})
            running = await first  # its wait timed out too, while its job held the model thread
            gated.gate.set()
            await asyncio.sleep(0.3)
            metrics = (await c.get("/metrics")).text
    for resp in (queued, running):
        assert resp.status_code == 503, resp.text
        assert resp.json()["error_type"] == "deadline_exceeded"
        assert "RAGATTN_REQUEST_TIMEOUT_S" in resp.json()["message"]
        assert resp.headers["retry-after"] == "1"
    assert gated.calls == 1  # the queued job was never computed
    assert "ragattn_jobs_dropped_total 1.0" in metrics


@pytest.mark.slow
async def test_work_of_a_client_that_gave_up_is_dropped(
    make_app: Callable[..., Litestar], gated: Any, live_server: Any
) -> None:
    app = make_app(reranker=gated, cache_backend="none")
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            holder = asyncio.ensure_future(
                c.post("/v2/rerank", json={"query": QUERY, "documents": DOCS})
            )
            await anyio.to_thread.run_sync(gated.entered.wait, 30)
            # A second client queues a job, then hangs up before the model reaches it.
            async with httpx.AsyncClient(base_url=url, timeout=0.5) as impatient:
                with pytest.raises(httpx.ReadTimeout):
                    await impatient.post("/v2/rerank", json={"query": "gone", "documents": DOCS})
            deadline = time.monotonic() + 10
            while "ragattn_jobs_dropped_total 1.0" not in (
                metrics := (await c.get("/metrics")).text
            ):
                assert time.monotonic() < deadline, metrics
                await asyncio.sleep(0.05)
            gated.gate.set()
            assert (await holder).status_code == 200
            metrics = (await c.get("/metrics")).text
    assert gated.calls == 1
    assert "ragattn_queue_depth 0.0" in metrics
    assert (
        _metric(metrics, 'ragattn_requests_total{method="POST",route="/v2/rerank",status="499"')
        == 1
    )


@pytest.mark.slow
async def test_mixed_concurrent_requests_equal_their_serial_results(
    make_app: Callable[..., Litestar], live_server: Any
) -> None:
    requests = [
        ("/v2/rerank", {"query": QUERY, "documents": DOCS, "return_documents": True}),
        ("/v1/rerank", {"query": "Which fruit has potassium?", "documents": DOCS, "top_n": 2}),
        ("/rerank", {"query": "Italy", "texts": DOCS[::-1], "raw_scores": True}),
        ("/v1/compress", {"query": QUERY, "documents": DOCS, "ratio": 0.4}),
        ("/v1/compress", {"query": "potassium", "documents": DOCS[1:], "target_tokens": 12}),
        (
            "/v1/rerank_compress",
            {"query": "Colosseum", "documents": DOCS, "ratio": 0.5, "top_n": 2},
        ),
    ]
    app = make_app(cache_backend="none")
    with live_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=120) as c:
            serial = [await c.post(path, json=body) for path, body in requests]
            concurrent = await asyncio.gather(
                *(c.post(path, json=body) for path, body in requests * 2)
            )
    assert all(r.status_code == 200 for r in serial), [r.text for r in serial]
    for i, resp in enumerate(concurrent):
        assert resp.status_code == 200
        assert _strip(resp.json()) == _strip(serial[i % len(requests)].json())
