"""Load and soak run of the service on loopback (asyncio + httpx), bounded in time.

Starts ``ragattn serve`` as a subprocess (packaged proxy, in-process cache unless ``--redis-url``),
drives it at a rated load for ``--minutes`` and samples the server's RSS and open file descriptors.
Then an overload probe fires a burst above the queue's capacity and times the refusals.

Pass criteria (exit code 1 otherwise):
- zero failed requests during the rated load (a failure is a transport error or any status other
  than 200; 429s count as failures there, since the rate is meant to be sustainable);
- overload probe: every response is a 200 or a 429/503 with Retry-After, no 5xx other than 503,
  and the slowest refusal arrives within ``--refusal-bound-ms`` (default 100 ms);
- soak bound: RSS at the end is at most ``--rss-growth`` (default 10 %) above RSS after the first
  minute, and open file descriptors grow by at most 8.

    python studies/soak.py --minutes 2                  # rated load
    python studies/soak.py --minutes 30 --out results/soak-30.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

DOCS = [
    "Paris is the capital and largest city of France. It lies on the Seine.",
    "Rome is the capital of Italy. The Colosseum stands near its centre.",
    "Bananas are rich in potassium. They grow in tropical climates.",
    "Berlin is the capital of Germany. The Spree flows through it.",
    "Mount Everest is the highest mountain above sea level.",
    "The Danube flows through ten countries, more than any other river.",
]
QUERIES = [
    "What is the capital of France?",
    "Which fruit is rich in potassium?",
    "Which river flows through Berlin?",
    "What is the highest mountain?",
    "Where is the Colosseum?",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, queue_size: int, redis_url: str | None, log: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "RAGATTN_PORT": str(port),
        "RAGATTN_QUEUE_SIZE": str(queue_size),
        "RAGATTN_THREADS": os.environ.get("RAGATTN_THREADS", "1"),
        "RAGATTN_LOG_LEVEL": "WARNING",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    if redis_url:
        env.update(RAGATTN_CACHE_BACKEND="redis", RAGATTN_REDIS_URL=redis_url)
    out = log.open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "ragattn.cli", "serve"], env=env, stdout=out, stderr=out
    )


async def wait_ready(client: httpx.AsyncClient, proc: subprocess.Popen, limit_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if proc.poll() is not None:
            raise RuntimeError("the server exited during start-up")
        try:
            if (await client.get("/ready")).status_code == 200:
                return time.monotonic() - started
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("the server did not become ready")


def _request(rng: random.Random, query: str) -> tuple[str, dict[str, Any]]:
    docs = rng.sample(DOCS, k=rng.randint(3, len(DOCS)))
    kind = rng.random()
    if kind < 0.7:
        return "/v2/rerank", {"query": query, "documents": docs, "top_n": 3}
    if kind < 0.9:
        return "/v1/compress", {"query": query, "documents": docs, "ratio": 0.5}
    return "/v1/rerank_compress", {"query": query, "documents": docs, "ratio": 0.5, "top_n": 2}


def request_pool(seed: int, size: int = 24) -> list[tuple[str, dict[str, Any]]]:
    """The repeated part of the mix: a fixed set of requests (cache hits once seen)."""
    rng = random.Random(seed)
    return [_request(rng, rng.choice(QUERIES)) for _ in range(size)]


def request_for(
    rng: random.Random, pool: list[tuple[str, dict[str, Any]]], unique_share: float
) -> tuple[str, dict[str, Any]]:
    """A request of the mix: rerank (most), compress, rerank_compress; some never seen before."""
    if rng.random() < unique_share:
        return _request(rng, f"{rng.choice(QUERIES)} ({rng.randrange(10**9)})")
    return rng.choice(pool)


async def warm_up(client: httpx.AsyncClient, pool: list[tuple[str, dict[str, Any]]]) -> None:
    """Every route once (lazy compressor build, first forward) before anything is measured."""
    for path, body in {path: body for path, body in pool}.items():
        resp = await client.post(path, json=body)
        resp.raise_for_status()


def sample(proc: psutil.Process) -> dict[str, float]:
    return {"t": time.time(), "rss_mb": proc.memory_info().rss / 2**20, "fds": proc.num_fds()}


async def rated_load(
    client: httpx.AsyncClient,
    server: psutil.Process,
    *,
    seconds: float,
    rps: float,
    unique_share: float,
    seed: int,
) -> dict[str, Any]:
    rng = random.Random(seed + 1)
    pool = request_pool(seed)
    statuses: Counter[str] = Counter()
    latencies: list[float] = []
    samples: list[dict[str, float]] = [sample(server)]
    tasks: set[asyncio.Task[None]] = set()

    async def one(path: str, body: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            resp = await client.post(path, json=body)
            statuses[str(resp.status_code)] += 1
        except httpx.HTTPError as exc:
            statuses[type(exc).__name__] += 1
        latencies.append(time.perf_counter() - started)

    started = time.monotonic()
    next_sample = started + 5
    n = 0
    while (now := time.monotonic()) - started < seconds:
        due = started + n / rps
        if due > now:
            await asyncio.sleep(due - now)
        task = asyncio.ensure_future(one(*request_for(rng, pool, unique_share)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        if time.monotonic() >= next_sample:
            samples.append(sample(server))
            next_sample += 5
    await asyncio.gather(*tasks)
    samples.append(sample(server))
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "requests": n,
        "seconds": round(time.monotonic() - started, 1),
        "statuses": dict(statuses),
        "failures": sum(v for k, v in statuses.items() if k != "200"),
        "latency_ms": {
            "p50": round(q[49] * 1000, 1),
            "p95": round(q[94] * 1000, 1),
            "p99": round(q[98] * 1000, 1),
            "max": round(latencies[-1] * 1000, 1),
        },
        "samples": samples,
    }


async def _raw_post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, t0: float
) -> tuple[int, bool, float]:
    """Send one pre-built request; the time until its status line arrives, from ``t0``."""
    writer.write(request)
    await writer.drain()
    status_line = await reader.readline()
    elapsed = time.perf_counter() - t0
    headers = b""
    while (line := await reader.readline()) not in (b"\r\n", b""):
        headers += line.lower()
    return int(status_line.split()[1]), b"retry-after:" in headers, elapsed


async def overload_probe(port: int, burst: int, seed: int) -> dict[str, Any]:
    """``burst`` distinct uncached requests at once over pre-opened raw connections.

    Raw sockets, so the figure is the server's: an HTTP client library spends about a
    millisecond of CPU per request, and 64 of them would time the client, not the refusals.
    """
    rng = random.Random(seed)
    connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(burst)]
    requests = []
    for i in range(burst):
        body = json.dumps(
            {"query": f"overload {i} {rng.randrange(10**9)}", "documents": DOCS}
        ).encode()
        requests.append(
            b"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(_raw_post(r, w, req, t0) for (r, w), req in zip(connections, requests, strict=True))
    )
    for _, writer in connections:
        writer.close()
    by_status: dict[str, list[float]] = {}
    bad: list[str] = []
    for status, has_retry_after, elapsed in results:
        by_status.setdefault(str(status), []).append(elapsed)
        if status in (429, 503) and not has_retry_after:
            bad.append(f"{status} without Retry-After")
        if status >= 500 and status != 503:
            bad.append(f"status {status}")
    refusals = sorted(by_status.get("429", []) + by_status.get("503", []))
    return {
        "burst": burst,
        "statuses": {k: len(v) for k, v in by_status.items()},
        "refusal_ms": {
            "median": round(statistics.median(refusals) * 1000, 1) if refusals else None,
            "p90": round(refusals[int(0.9 * (len(refusals) - 1))] * 1000, 1) if refusals else None,
            "max": round(refusals[-1] * 1000, 1) if refusals else None,
        },
        "problems": bad,
    }


def soak_verdict(samples: list[dict[str, float]], rss_growth: float) -> dict[str, Any]:
    after_warmup = [s for s in samples if s["t"] - samples[0]["t"] >= 60] or samples
    base, end = after_warmup[0], samples[-1]
    rss_ratio = end["rss_mb"] / base["rss_mb"]
    return {
        "rss_mb_start": round(samples[0]["rss_mb"], 1),
        "rss_mb_after_warmup": round(base["rss_mb"], 1),
        "rss_mb_end": round(end["rss_mb"], 1),
        "rss_mb_max": round(max(s["rss_mb"] for s in samples), 1),
        "fds_start": samples[0]["fds"],
        "fds_end": end["fds"],
        "fds_max": max(s["fds"] for s in samples),
        "rss_growth": round(rss_ratio - 1, 4),
        "within_bound": rss_ratio <= 1 + rss_growth and end["fds"] - base["fds"] <= 8,
    }


async def main(args: argparse.Namespace) -> int:
    port = free_port()
    log = Path(args.out).with_suffix(".server.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = start_server(port, args.queue_size, args.redis_url, log)
    limits = httpx.Limits(
        max_connections=args.burst + 16, max_keepalive_connections=args.burst + 16
    )
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=120, limits=limits
        ) as client:
            ready_s = await wait_ready(client, proc, 300)
            await warm_up(client, request_pool(args.seed))
            server = psutil.Process(proc.pid)
            load = await rated_load(
                client,
                server,
                seconds=args.minutes * 60,
                rps=args.rps,
                unique_share=args.unique_share,
                seed=args.seed,
            )
            probe = await overload_probe(port, args.burst, args.seed)
            metrics = (await client.get("/metrics")).text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    soak = soak_verdict(load.pop("samples"), args.rss_growth)
    result = {
        "command": " ".join(sys.argv),
        "minutes": args.minutes,
        "rps": args.rps,
        "unique_share": args.unique_share,
        "queue_size": args.queue_size,
        "ready_s": round(ready_s, 1),
        "load": load,
        "overload": probe,
        "soak": soak,
        "server_exit_code": proc.returncode,
        "cache_events": [m for m in metrics.splitlines() if m.startswith("ragattn_cache_events")],
    }
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    ok = (
        load["failures"] == 0
        and not probe["problems"]
        and (probe["refusal_ms"]["max"] or 0) <= args.refusal_bound_ms
        and soak["within_bound"]
        # uvicorn re-raises the SIGTERM it drained on: -15 is its clean exit.
        and proc.returncode in (0, -signal.SIGTERM)
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=2.0, help="rated-load duration")
    p.add_argument("--rps", type=float, default=4.0, help="request rate (open loop)")
    p.add_argument("--unique-share", type=float, default=0.3, help="share of never-seen queries")
    p.add_argument("--queue-size", type=int, default=16, help="RAGATTN_QUEUE_SIZE of the server")
    p.add_argument(
        "--burst", type=int, default=64, help="concurrent requests in the overload probe"
    )
    p.add_argument("--refusal-bound-ms", type=float, default=100.0)
    p.add_argument("--rss-growth", type=float, default=0.10)
    p.add_argument("--redis-url", default=None, help="use a Redis cache at this URL")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/soak.json")
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
