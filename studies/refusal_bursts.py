"""Overload bursts against a running server, and the cost of a full garbage collection.

The figures behind BENCHMARKS.md, "Profile of the slow refusals": each burst is soak.py's overload
probe (64 distinct uncached rerank requests over raw sockets at once), repeated with pauses, so one
server shows the spread of its slowest refusals; ``--gc`` times ``gc.collect()`` in a process that
holds the loaded models (before and after ``gc.freeze()``).

    RAGATTN_PORT=18555 RAGATTN_QUEUE_SIZE=16 RAGATTN_THREADS=1 OMP_NUM_THREADS=1 ragattn serve &
    python studies/refusal_bursts.py --port 18555 --bursts 10
    python studies/refusal_bursts.py --gc
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import soak  # noqa: E402


async def bursts(port: int, count: int, pause_s: float) -> None:
    for i in range(count):
        result = await soak.overload_probe(port, 64, seed=100 + i)
        print(result["statuses"], result["refusal_ms"], result["problems"])
        await asyncio.sleep(pause_s)


def gc_cost() -> None:
    from ragattn.compress import Compressor
    from ragattn.proxy import load_proxy
    from ragattn.rerank import Reranker

    proxy = load_proxy("smollm2-135m", threads=1)
    Reranker(proxy, method="minilm"), Compressor(proxy)
    print("objects", len(gc.get_objects()))
    for _ in range(3):
        started = time.perf_counter()
        gc.collect()
        print(f"full collection {1000 * (time.perf_counter() - started):.1f} ms")
    gc.freeze()
    started = time.perf_counter()
    gc.collect()
    print(f"after gc.freeze() {1000 * (time.perf_counter() - started):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18555)
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--pause-s", type=float, default=4.0)
    parser.add_argument("--gc", action="store_true", help="Time gc.collect() with the models held.")
    args = parser.parse_args()
    if args.gc:
        gc_cost()
    else:
        asyncio.run(bursts(args.port, args.bursts, args.pause_s))


if __name__ == "__main__":
    main()
