"""Lifecycle of a real ``ragattn serve`` process: readiness while loading, graceful SIGTERM.

The server runs as a subprocess (the packaged proxy, a private redis-server as cache): ``/health``
answers at once, ``/ready`` is 503 until the proxy is loaded and a one-token forward works, and on
SIGTERM in-flight requests finish within ``RAGATTN_SHUTDOWN_GRACE_S`` before Redis and the model
worker are closed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

DOCS = [
    "Paris is the capital and largest city of France. It lies on the Seine. "
    "The Louvre is its most visited museum. About two million people live in the city proper.",
    "Rome is the capital of Italy. The Colosseum stands near its centre. "
    "The Tiber flows through the city. Vatican City is an enclave within Rome.",
    "Bananas are rich in potassium. They grow in tropical climates. "
    "Most exported bananas are of the Cavendish variety. They are harvested green.",
] * 3


async def test_ready_only_after_the_model_computes_and_sigterm_drains(
    redis_server: Callable[[], Any], free_port: Callable[[], int], tmp_path: Path
) -> None:
    redis = redis_server()  # empty: no entry left by an earlier run answers the slow requests
    port = free_port()
    env = {
        **os.environ,
        "RAGATTN_PORT": str(port),
        "RAGATTN_CACHE_BACKEND": "redis",
        "RAGATTN_REDIS_URL": redis.url,
        "RAGATTN_SHUTDOWN_GRACE_S": "60",
        "RAGATTN_THREADS": "1",
        "RAGATTN_LOG_LEVEL": "INFO",
        "OMP_NUM_THREADS": "1",
    }
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ragattn.cli", "serve"], env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        statuses: list[tuple[int, int]] = []
        async with httpx.AsyncClient(base_url=base, timeout=30) as c:
            deadline = time.monotonic() + 240
            while True:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                try:
                    health = (await c.get("/health")).status_code
                    ready = await c.get("/ready")
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
                    continue
                statuses.append((health, ready.status_code))
                if ready.status_code == 200:
                    break
                assert ready.json()["error_type"] == "not_ready"
                assert ready.headers["retry-after"] == "1"
                await asyncio.sleep(0.02)
            assert statuses[0] == (200, 503), statuses[:3]  # alive, not ready while loading
            assert "ragattn service ready" in log.read_text()
            assert (await c.get("/ready")).json()["degraded"] is False

            # Slow requests in flight (compression reads every document with the proxy).
            body = {
                "query": "capital of France?",
                "documents": DOCS,
                "ratio": 0.3,
                "method": "focal",
            }
            inflight = [
                asyncio.ensure_future(c.post("/v1/compress", json={**body, "query": f"q{i}"}))
                for i in range(3)
            ]
            await asyncio.sleep(0.5)
            assert not all(t.done() for t in inflight)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            done = await asyncio.gather(*inflight)
        assert [r.status_code for r in done] == [200, 200, 200], [r.text for r in done]
        rc = await asyncio.to_thread(proc.wait, 90)
        # uvicorn re-raises the captured SIGTERM after its graceful shutdown: -15 is a clean exit.
        assert rc in (0, -signal.SIGTERM), log.read_text()
        assert "Traceback" not in log.read_text()
        assert time.monotonic() - started < 60
        text = log.read_text()
        assert "model worker stopped" in text
        assert "redis cache closed" in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
