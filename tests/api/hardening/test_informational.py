"""Issue 30 §6, the informational findings: saturation on ``/ready``, bounded unknown-field
warnings, one ``Authorization`` header, headers on the docs pages, and a per-key cache scope."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SMALL = {"query": "capital of France", "documents": ["Paris is in France.", "Bananas."]}


async def test_ready_reports_a_busy_model_thread_and_refuses_when_the_queue_is_full(
    production_server: Callable[..., Any], gated: Any
) -> None:
    with production_server(
        reranker=gated, cache_backend="none", queue_size=2, request_timeout_s=0
    ) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            idle = await c.get("/ready")
            assert idle.status_code == 200
            assert idle.json()["busy"] is False and idle.json()["queue_depth"] == 0
            first = asyncio.ensure_future(c.post("/v2/rerank", json=SMALL))
            await anyio.to_thread.run_sync(gated.entered.wait, 60)
            busy = await c.get("/ready")
            assert busy.status_code == 200, busy.text
            assert busy.json()["busy"] is True
            assert (busy.json()["queue_depth"], busy.json()["queue_size"]) == (1, 2)
            second = asyncio.ensure_future(
                c.post("/v2/rerank", json={**SMALL, "query": "another query"})
            )
            while (await c.get("/metrics")).text.count("ragattn_queue_depth 2.0") == 0:
                await asyncio.sleep(0.05)
            full = await c.get("/ready")
            assert full.status_code == 503, full.text
            assert full.json()["error_type"] == "not_ready"
            assert "queue is full (2 of 2 jobs)" in full.json()["message"]
            assert "retry-after" in full.headers
            gated.gate.set()
            assert (await first).status_code == 200
            assert (await second).status_code == 200
            after = await c.get("/ready")
            assert after.status_code == 200 and after.json()["busy"] is False


async def test_unknown_field_warnings_are_truncated_and_counted(
    production_server: Callable[..., Any],
) -> None:
    huge = "k" * 1_000_000
    extra = {huge: 1, **{f"extra_{i}": i for i in range(14)}}
    with production_server(cache_backend="none", request_timeout_s=0) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            resp = await c.post("/v2/rerank", json={**SMALL, **extra})
    assert resp.status_code == 200, resp.text[:500]
    assert len(resp.content) < 10_000, len(resp.content)
    warnings = resp.json()["meta"]["warnings"]
    named = [w for w in warnings if w.startswith("unknown field")]
    assert len(named) == 10
    assert all(len(w) < 200 for w in named), named
    assert named[0].startswith("unknown field 'kkkk") and "(1000000 characters)" in named[0]
    assert "5 more unknown fields ignored (15 in all)" in warnings


def test_two_authorization_headers_are_a_400(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    body = b'{"query": "q", "documents": ["a"]}'
    for keys in ((), ("alpha",)):
        with production_server(cache_backend="none", api_keys=keys) as live:
            for second in ("Bearer alpha", "Bearer wrong"):
                head = raw_http.head(
                    live.port,
                    "POST",
                    "/v2/rerank",
                    "Authorization: Bearer alpha\r\n"
                    f"Authorization: {second}\r\n"
                    "Content-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n",
                )
                resp = raw_http.exchange(live.port, head + body)
                assert resp.status == 400, (keys, second, resp.body)
                assert resp.json()["error_type"] == "invalid_request"
                assert "2 Authorization headers" in resp.json()["message"]


async def test_the_docs_pages_send_a_csp_and_x_frame_options(
    production_server: Callable[..., Any],
) -> None:
    with production_server(cache_backend="none") as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=60) as c:
            for page in ("/schema", "/schema/swagger"):
                resp = await c.get(page)
                assert resp.status_code == 200
                assert resp.headers["x-frame-options"] == "DENY"
                csp = resp.headers["content-security-policy"]
                script_src = re.search(r"script-src ([^;]*)", csp)
                assert script_src is not None and script_src.group(1).strip() == "'self'", csp
                assert "frame-ancestors 'none'" in csp
                # The policy must not break the page: no inline script is left to block.
                scripts = re.findall(r"<script([^>]*)>(.*?)</script>", resp.text, re.S)
                assert scripts and all(
                    "src=" in attrs and not code.strip() for attrs, code in scripts
                )
                assert "/static/swagger-init.js" in resp.text
            init = await c.get("/static/swagger-init.js")
            assert init.status_code == 200 and "SwaggerUIBundle" in init.text


async def test_cache_scope_key_isolates_the_cache_per_api_key(
    production_server: Callable[..., Any],
) -> None:
    def headers(key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    keys = ("alpha", "beta")
    with production_server(api_keys=keys, request_timeout_s=0) as live:  # the default: shared
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            a = await c.post("/v2/rerank", json=SMALL, headers=headers("alpha"))
            b = await c.post("/v2/rerank", json=SMALL, headers=headers("beta"))
            assert (a.headers["x-ragattn-cache"], b.headers["x-ragattn-cache"]) == ("miss", "hit")
    with production_server(api_keys=keys, cache_scope="key", request_timeout_s=0) as live:
        async with httpx.AsyncClient(base_url=live.url, timeout=120) as c:
            seen = []
            for key in ("alpha", "beta", "alpha", "beta"):
                resp = await c.post("/v2/rerank", json=SMALL, headers=headers(key))
                assert resp.status_code == 200, resp.text
                seen.append(resp.headers["x-ragattn-cache"])
                assert resp.json()["results"] == a.json()["results"]
            assert seen == ["miss", "miss", "hit", "hit"]
