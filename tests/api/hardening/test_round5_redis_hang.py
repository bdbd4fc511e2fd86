"""Issue "Hardening, round five" §3: a Redis that hangs costs a request at most one timeout.

A real server process (``python -m ragattn_api.server``) with the Redis cache and the shared rate
limit on a private ``redis-server``, which the test stops with SIGSTOP (hung, not down: the kernel
still accepts connections, no command is answered) under a stream of requests, then resumes with
SIGCONT. Before, every request waited out the timeout three times (the limiter, the cache read, the
cache write, each with a breaker of its own). Now one circuit per Redis covers all three: the
evidence is counted, not timed (``ragattn_redis_events_total``: calls that found Redis unreachable
and calls not sent while the circuit was open), plus one generous bound on the stream's duration.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.redis, pytest.mark.slow]

TIMEOUT_S = 1.0
COOLDOWN_S = 4.0
REQUESTS = 16
DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Bananas."]
REDIS_CALLS_PER_REQUEST = 3  # the rate limit's script, the cache read, the cache write


def _metric(metrics: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", metrics, re.M)
    assert found is not None, f"{name}{labels} not in /metrics"
    return float(found.group(1))


def _redis_events(c: httpx.Client) -> dict[str, float]:
    text = c.get("/metrics").text
    return {
        "failure": _metric(text, "ragattn_redis_events_total", '{event="failure"}'),
        "bypassed": _metric(text, "ragattn_redis_events_total", '{event="bypassed"}'),
        "open": _metric(text, "ragattn_redis_circuit_open"),
        "fallback": _metric(text, "ragattn_rate_limit_events_total", '{event="fallback"}'),
    }


def _rerank(c: httpx.Client, query: str) -> httpx.Response:
    resp = c.post("/v2/rerank", json={"query": query, "documents": DOCS})
    assert resp.status_code == 200, resp.text
    return resp


def test_a_hung_redis_costs_each_request_at_most_one_timeout(
    spawn_server: Callable[..., Any], redis_server: Callable[[], Any]
) -> None:
    redis = redis_server()  # private: this test stops it
    server = spawn_server(
        name="hang",
        cache_backend="redis",
        redis_url=redis.url,
        redis_timeout_s=str(TIMEOUT_S),
        redis_cooldown_s=str(COOLDOWN_S),
        rate_limit_per_minute="6000",
    )
    with httpx.Client(base_url=server.url, timeout=120) as c:
        assert _rerank(c, "warm-up question?").headers["x-ragattn-cache"] == "miss"
        assert _rerank(c, "warm-up question?").headers["x-ragattn-cache"] == "hit"
        assert _redis_events(c) == {"failure": 0, "bypassed": 0, "open": 0, "fallback": 0}

        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            served = [_rerank(c, f"hung question {i}?") for i in range(REQUESTS)]
            ready = c.get("/ready")
            during = _redis_events(c)
            elapsed = time.monotonic() - start
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)

        assert {r.headers["x-ragattn-cache"] for r in served} == {"miss"}
        assert ready.status_code == 200 and ready.json()["degraded"] is True
        # Every Redis call of every request either met the hang or was never sent...
        calls = REDIS_CALLS_PER_REQUEST * REQUESTS
        assert during["failure"] + during["bypassed"] == calls + 1  # + the /ready probe
        # ...and only the first call of a cooldown met it: one per cooldown the stream lasted
        # (requests come one at a time), where a breaker per call site met it three times.
        assert 1 <= during["failure"] <= 1 + elapsed // COOLDOWN_S
        assert during["open"] == 1
        assert during["fallback"] == REQUESTS  # the rate limit decided per process meanwhile
        # A generous bound: three timeouts a request would take REQUESTS x 3 s.
        assert elapsed < REQUESTS * TIMEOUT_S

        # Resumed: after the cooldown the first call probes Redis, which answers.
        time.sleep(COOLDOWN_S + 0.5)
        assert _rerank(c, "hung question 0?").headers["x-ragattn-cache"] == "miss"  # not stored
        assert _rerank(c, "hung question 0?").headers["x-ragattn-cache"] == "hit"
        assert _rerank(c, "warm-up question?").headers["x-ragattn-cache"] == "hit"
        after = _redis_events(c)
        assert after["open"] == 0
        assert after["failure"] == during["failure"]
        assert after["fallback"] == during["fallback"]  # the limit is decided in Redis again
        assert redis.cli("exists", "ragattn:ratelimit:v1:addr:127.0.0.1") == "1"
        assert c.get("/ready").json()["degraded"] is False
