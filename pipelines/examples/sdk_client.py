"""The raw SDK: rerank and compress in process, then the same calls over HTTP with ``Client``.

Starts the service on a free loopback port (in this process, on the same loaded proxy), so it
runs offline and needs nothing else. Against your own server, pass ``--url http://host:8080``.

    python pipelines/examples/sdk_client.py
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragattn import Document, Reranker, load_proxy
from ragattn.client import AsyncClient, Client
from ragattn.compress import Compressor

QUERY = "When was the Eiffel Tower completed?"
DOCUMENTS = [
    Document(id="louvre", text="The Louvre is the world's most-visited museum. It opened in 1793."),
    Document(
        id="eiffel",
        text="The Eiffel Tower was completed in 1889. It was the entrance arch of the "
        "World's Fair. Gustave Eiffel's company designed and built it.",
    ),
    Document(
        id="seine", text="The Seine flows through Paris. Its banks are a World Heritage Site."
    ),
]


@contextmanager
def local_service(reranker: Reranker, compressor: Compressor) -> Iterator[str]:
    """The ragattn service over these engines, on 127.0.0.1 and a free port; yields its URL."""
    import uvicorn

    from ragattn.settings import Settings
    from ragattn_api.app import create_app

    app = create_app(Settings(log_level="WARNING"), reranker=reranker, compressor=compressor)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the service did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


def show(title: str, ranked: Any, compressed: Any) -> None:
    print(f"== {title}")
    for r in ranked:
        doc = r.document
        scores = f"relevance={r.relevance_score:.3f} raw={r.raw_score:+.3f}"
        print(f"  {doc.id:<7} index={r.index} {scores}")
    print(
        f"  compressed ({compressed.origin_tokens} -> {compressed.compressed_tokens} tokens, "
        f"ratio {compressed.ratio:.2f}, {compressed.tokenizer}, {compressed.method}):"
    )
    print(f"    {compressed.compressed_text!r}")


def run(engine: Any, compressor: Any) -> tuple[Any, Any]:
    ranked = engine.rerank(QUERY, DOCUMENTS, top_n=2)
    return ranked, compressor.compress(QUERY, [r.document for r in ranked], ratio=0.5)


async def run_async(url: str) -> tuple[Any, Any]:
    async with AsyncClient(url) as client:
        ranked = await client.rerank(QUERY, DOCUMENTS, top_n=2)
        compressed = await client.compress(QUERY, [r.document for r in ranked], ratio=0.5)
    return ranked, compressed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running ragattn service (default: start one here)")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # no per-request log lines

    proxy = load_proxy("smollm2-135m")
    reranker = Reranker(proxy, method="icr")
    compressor = Compressor(proxy)  # the trained default method, "sentinel"
    local = run(reranker, compressor)
    show("in process: Reranker / Compressor", *local)

    with local_service(reranker, compressor) if args.url is None else _given(args.url) as url:
        with Client(url) as client:  # the one line that changes
            remote = run(client, client)
        show(f"remote: Client({url!r})", *remote)
        show("remote: AsyncClient", *asyncio.run(run_async(url)))
    print("remote equals in process:", remote == local)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


if __name__ == "__main__":
    main()
