"""Issue 45 §4: ``/metrics`` counts every response with the status that was sent.

The request counter was middleware inside Litestar's router and exception handling: a refusal of
the edge middleware (two ``Authorization`` headers: a 400) passed through it as an exception and
was counted as a 500, and a 404 or 405 from the router never reached it. It now wraps the whole
app (``Litestar.asgi_handler``). Over HTTP to a live server on loopback, then ``/metrics``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

KEY = "metrics-key-1"
AUTH = {"Authorization": f"Bearer {KEY}"}
SMALL = {"query": "capital of France", "documents": ["Paris.", "Bananas."]}


def _requests(metrics: str) -> dict[tuple[str, str, str], float]:
    """``ragattn_requests_total`` by (route, method, status)."""
    found = re.findall(
        r'^ragattn_requests_total\{method="([^"]*)",route="([^"]*)",status="(\d+)"\} (\S+)$',
        metrics,
        re.M,
    )
    return {(route, method, status): float(n) for method, route, status, n in found}


def test_every_response_is_counted_with_the_status_sent(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    with production_server(api_keys=(KEY,), cache_backend="none") as live:
        with httpx.Client(base_url=live.url, timeout=120) as c:
            sent: list[tuple[str, str, str]] = []

            def call(method: str, path: str, route: str, **kwargs: Any) -> None:
                resp = c.request(method, path, **kwargs)
                sent.append((route, method, str(resp.status_code)))

            call("POST", "/v2/rerank", "/v2/rerank", json=SMALL, headers=AUTH)  # 200
            call("POST", "/v2/rerank", "/v2/rerank", json=SMALL)  # 401
            two = [("authorization", f"Bearer {KEY}"), ("authorization", "Bearer other")]
            for _ in range(2):
                call("POST", "/v2/rerank", "/v2/rerank", json=SMALL, headers=two)  # 400 (edge)
            call("POST", "/v2/rerank", "/v2/rerank", content=b"{}", headers=AUTH)  # 415
            call("GET", "/nowhere", "unmatched")  # 404 from the router
            call("GET", "/v2/rerank", "unmatched", headers=AUTH)  # 405 from the router
            call("GET", "/static/missing.js", "/static/{file_path}")  # 404 from a handler
        assert [s for _, _, s in sent] == ["200", "401", "400", "400", "415", "404", "405", "404"]
        counted = _requests(httpx.get(f"{live.url}/metrics").text)
        expected: dict[tuple[str, str, str], float] = {}
        for key in sent:
            expected[key] = expected.get(key, 0.0) + 1.0
        for key, n in expected.items():
            assert counted.get(key) == n, (key, n, counted)
        assert not [k for k in counted if k[2] == "500"], counted
        # A request whose client hangs up mid-body is still a 499, never a 500.
        with raw_http.connect(live.port) as sock:
            sock.sendall(
                raw_http.head(
                    live.port,
                    "POST",
                    "/v2/rerank",
                    f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                    "Content-Length: 1000\r\n",
                )
                + b'{"query": '
            )
        for _ in range(200):
            counted = _requests(httpx.get(f"{live.url}/metrics").text)
            if counted.get(("/v2/rerank", "POST", "499")):
                break
            time.sleep(0.05)
        assert counted.get(("/v2/rerank", "POST", "499")) == 1.0, counted
        assert not [k for k in counted if k[2] == "500"], counted
