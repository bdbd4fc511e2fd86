"""Benchmark the HTTP service on loopback: cache-hit latency and a sustained multi-client load.

Starts ``ragattn serve`` as a subprocess (packaged proxy, in-process cache unless RAGATTN_* say
otherwise), waits for ``/ready``, then:

1. cache hit: one warm-up request, then ``--hit-requests`` identical sequential requests over one
   keep-alive connection; p50/p90/p99.
2. load: ``--clients`` threads, each with its own connection, for ``--duration`` seconds, each
   request drawn from a pool of ``--pool`` distinct rerank requests (first sight of each is a model
   pass, later ones are cache hits); errors, throughput, p50/p99 for hits and misses separately.

Server RSS is read from /proc before the load and after it. Usage:

    python studies/bench_service.py --duration 60 --clients 8 --out results/bench_service.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

TOPICS = [
    ("the Eiffel Tower", "Paris", "1889", "wrought iron"),
    ("the Great Wall", "China", "the Ming dynasty", "brick and stone"),
    ("the Colosseum", "Rome", "80 AD", "travertine"),
    ("the Golden Gate Bridge", "San Francisco", "1937", "steel"),
    ("the Sydney Opera House", "Sydney", "1973", "concrete shells"),
    ("Machu Picchu", "Peru", "the 15th century", "granite"),
    ("the Taj Mahal", "Agra", "1653", "white marble"),
    ("Big Ben", "London", "1859", "limestone"),
]


def _documents() -> list[str]:
    docs = []
    for name, place, when, material in TOPICS:
        docs.append(
            f"{name.capitalize()} stands in {place}. It was completed in {when} and is built "
            f"mostly of {material}. "
            f"Millions of visitors come to see {name} every year, and guides explain its "
            "history in detail."
        )
    return docs


def request_pool(size: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    docs = _documents()
    pool = []
    for i in range(size):
        name, _, _, _ = TOPICS[i % len(TOPICS)]
        shuffled = docs[:]
        rng.shuffle(shuffled)
        question = rng.choice(
            ["When was {} completed?", "What is {} made of?", "Where is {}?"]
        ).format(name)
        pool.append(
            {
                "model": "bench",
                "query": f"{question} (variant {i})",
                "documents": shuffled,
                "top_n": 3,
            }
        )
    return pool


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def start_server(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ragattn.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    # The server log goes to a file: an unread pipe would block the server once it fills.
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    deadline = time.monotonic() + 300
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as c:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {proc.returncode}: {log.read_text()[-2000:]}"
                )
            try:
                if c.get("/ready").status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.25)
    proc.kill()
    raise RuntimeError("server did not become ready in 300 s")


def _summary(lat: list[float]) -> dict[str, Any]:
    return {
        "requests": len(lat),
        "p50_ms": statistics.median(lat),
        "p90_ms": pct(lat, 0.90),
        "p99_ms": pct(lat, 0.99),
        "mean_ms": statistics.fmean(lat),
    }


def bench_hits(base: str, n: int, headers: dict[str, str]) -> dict[str, Any]:
    """Sequential identical requests: with httpx, and with the lighter stdlib ``http.client``.

    On a CPU-starved box the client's own per-request work is part of the measured time; the stdlib
    client does less of it, so its numbers are closer to the server's cost plus loopback.
    """
    body = request_pool(1, seed=12345)[0]
    lat = []
    with httpx.Client(base_url=base, timeout=120, headers=headers) as c:
        c.post("/v2/rerank", json=body).raise_for_status()
        for _ in range(n):
            t = time.perf_counter()
            r = c.post("/v2/rerank", json=body)
            lat.append((time.perf_counter() - t) * 1000)
            _expect_hit(r.status_code, r.headers.get("x-ragattn-cache"))
    payload = json.dumps(body).encode()
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    std = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            conn.request(
                "POST", "/v2/rerank", payload, {"content-type": "application/json", **headers}
            )
            resp = conn.getresponse()
            resp.read()
            std.append((time.perf_counter() - t) * 1000)
            _expect_hit(resp.status, resp.getheader("x-ragattn-cache"))
    finally:
        conn.close()
    return {**_summary(lat), "stdlib_client": _summary(std)}


def _expect_hit(status: int, cache: str | None) -> None:
    if status != 200 or cache != "hit":
        raise RuntimeError(f"expected a cache hit, got {status} {cache}")


def warm(base: str, pool_size: int, headers: dict[str, str]) -> None:
    with httpx.Client(base_url=base, timeout=600, headers=headers) as c:
        for body in request_pool(pool_size):
            c.post("/v2/rerank", json=body).raise_for_status()


def bench_load(
    base: str, clients: int, duration: float, pool_size: int, headers: dict[str, str]
) -> dict[str, Any]:
    pool = request_pool(pool_size)
    stop_at = time.monotonic() + duration
    lock = threading.Lock()
    hits: list[float] = []
    misses: list[float] = []
    errors: list[str] = []

    def client(idx: int) -> None:
        rng = random.Random(1000 + idx)
        with httpx.Client(base_url=base, timeout=300, headers=headers) as c:
            while time.monotonic() < stop_at:
                body = rng.choice(pool)
                t = time.perf_counter()
                try:
                    r = c.post("/v2/rerank", json=body)
                except httpx.HTTPError as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    if r.status_code != 200:
                        errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                    elif r.headers.get("x-ragattn-cache") == "hit":
                        hits.append(ms)
                    else:
                        misses.append(ms)

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - started
    every = hits + misses
    return {
        "clients": clients,
        "duration_s": elapsed,
        "requests": len(every) + len(errors),
        "ok": len(every),
        "errors": len(errors),
        "error_samples": errors[:5],
        "throughput_rps": len(every) / elapsed,
        "p50_ms": pct(every, 0.50),
        "p99_ms": pct(every, 0.99),
        "hits": len(hits),
        "hit_p50_ms": pct(hits, 0.50),
        "hit_p99_ms": pct(hits, 0.99),
        "misses": len(misses),
        "miss_p50_ms": pct(misses, 0.50),
        "miss_p99_ms": pct(misses, 0.99),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--pool", type=int, default=8, help="distinct requests in the load phase")
    ap.add_argument("--hit-requests", type=int, default=1000)
    ap.add_argument(
        "--warm", action="store_true", help="compute every pool request once before the timed load"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    env = dict(os.environ)
    headers = {}
    keys = env.get("RAGATTN_API_KEYS", "")
    if keys:
        headers["Authorization"] = "Bearer " + keys.split(",")[0].strip()
    log = Path(tempfile.gettempdir()) / f"ragattn-bench-server-{args.port}.log"
    proc = start_server(args.port, env, log)
    base = f"http://127.0.0.1:{args.port}"
    try:
        rss_ready = rss_mb(proc.pid)
        hit = bench_hits(base, args.hit_requests, headers)
        if args.warm:
            warm(base, args.pool, headers)
        rss_before = rss_mb(proc.pid)
        load = bench_load(base, args.clients, args.duration, args.pool, headers)
        rss_after = rss_mb(proc.pid)
        metrics = httpx.get(f"{base}/metrics").text
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    cache_lines = [
        line for line in metrics.splitlines() if line.startswith("ragattn_cache_events_total")
    ]
    result = {
        "cpu_count": os.cpu_count(),
        "loadavg_1m_end": os.getloadavg()[0],
        "cache_backend": env.get("RAGATTN_CACHE_BACKEND", "memory"),
        "warm": args.warm,
        "cache_hit": hit,
        "load": load,
        "rss_mb": {"ready": rss_ready, "before_load": rss_before, "after_load": rss_after},
        "cache_metrics": cache_lines,
        "server_log_warnings": [
            line for line in log.read_text().splitlines() if "WARNING" in line or "ERROR" in line
        ][:20],
    }
    print(json.dumps(result, indent=2))
    print(
        f"\ncache hit over HTTP: p50 {hit['p50_ms']:.2f} ms, p99 {hit['p99_ms']:.2f} ms "
        f"({hit['requests']} requests, httpx); stdlib client p50 "
        f"{hit['stdlib_client']['p50_ms']:.2f} ms, p99 {hit['stdlib_client']['p99_ms']:.2f} ms\n"
        f"load: {load['clients']} clients x {load['duration_s']:.0f} s: {load['ok']} ok, "
        f"{load['errors']} errors, "
        f"{load['throughput_rps']:.1f} req/s, p50 {load['p50_ms']:.1f} ms, "
        f"p99 {load['p99_ms']:.1f} ms "
        f"(hits {load['hits']}: p50 {load['hit_p50_ms']:.1f} ms; misses {load['misses']}: "
        f"p50 {load['miss_p50_ms']:.0f} ms, p99 {load['miss_p99_ms']:.0f} ms)\n"
        f"server RSS: {rss_ready:.0f} MiB ready, {rss_before:.0f} MiB before load, "
        f"{rss_after:.0f} MiB after"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    if load["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
