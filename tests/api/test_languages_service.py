"""Every language over HTTP: a German call is read by the multilingual proxy (Gemma-3-270M), an
English one by the English proxy, and ``/health`` and ``/ready`` say which proxy reads which
language and when the second has loaded; another compress method reads German on the weights
already loaded; ``RAGATTN_MULTILINGUAL_PROXY=none`` keeps one proxy for every language and another
cache fingerprint.

A real server over loopback HTTP with real forward passes. The routed compressor is built on the
session's loaded proxies (``proxy`` and ``gemma_proxy``), so the module loads no weights of its
own; it is fresh, so its multilingual compressor is built by this module's first German call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ragattn.settings import Settings
from ragattn_api import create_app

pytestmark = pytest.mark.slow

QUESTION = "In welchem Jahr wurde die Brücke über die Elbe eröffnet?"
ANSWER = "Die neue Brücke über die Elbe wurde im Jahr 1893 eröffnet."
PASSAGES = [
    "Die Stadt liegt an einem breiten Fluss und hat eine lange Geschichte als Handelsort. "
    "Im Mittelalter kamen Kaufleute aus ganz Europa auf ihre Märkte.",
    f"{ANSWER} Sie verbindet seitdem die Altstadt mit den Vierteln am anderen Ufer.",
    "Im Sommer finden im Stadtpark viele Konzerte statt. Besonders beliebt ist das Festival "
    "für Jazzmusik im August.",
    "Der Bahnhof wurde nach dem Krieg vollständig neu gebaut. Heute halten dort täglich mehr "
    "als hundert Züge.",
]
GERMAN = {"query": QUESTION, "documents": PASSAGES, "ratio": 0.3}
ENGLISH = {
    "query": "When was the bridge over the river opened?",
    "documents": [
        "The new bridge over the river was opened in 1893. It joins the old town to the far bank.",
        "Concerts are held in the city park every summer.",
    ],
    "ratio": 0.5,
}


OTHER_METHOD = "fused"


def _default_method(app: Any) -> str:
    """The method of the handed-in (default) compressor."""
    return str(app.state.service.compressor(None).method)


def _ready(c: httpx.Client) -> dict[str, Any]:
    """``/ready``'s body once the handed-in engines are published (a few seconds at most)."""
    deadline = time.monotonic() + 120
    while (resp := c.get("/ready")).status_code != 200:
        assert time.monotonic() < deadline, resp.text
        time.sleep(0.05)
    body: dict[str, Any] = resp.json()
    return body


@pytest.fixture(scope="module")
def routed(proxy: Any, gemma_proxy: Any) -> Any:
    """A fresh default compressor whose calls not in English go to the session's Gemma."""
    from ragattn import Compressor

    return Compressor(proxy, multilingual=gemma_proxy)


@pytest.fixture(scope="module")
def server(reranker: Any, routed: Any, live_server: Any) -> Iterator[tuple[str, Any]]:
    app = create_app(Settings(cache_backend="none"), reranker=reranker, compressor=routed)
    with live_server(app) as url:
        yield url, app


def test_a_german_call_is_read_by_gemma_and_health_says_when_it_loaded(
    server: tuple[str, Any], gemma_proxy: Any
) -> None:
    url, app = server
    with httpx.Client(base_url=url, timeout=300) as c:
        before = {"english": "smollm2-135m", "other_languages": "gemma3-270m"}
        assert _ready(c)["proxies"] == {**before, "other_languages_loaded": False}
        assert c.get("/health").json()["proxies"] == {**before, "other_languages_loaded": False}

        english = c.post("/v1/compress", json=ENGLISH)
        assert english.status_code == 200, english.text
        assert (english.json()["tokenizer"], english.json()["model"]) == ("smollm2-135m",) * 2
        assert c.get("/health").json()["proxies"]["other_languages_loaded"] is False

        german = c.post("/v1/compress", json=GERMAN)
        assert german.status_code == 200, german.text
        body = german.json()
        assert (body["tokenizer"], body["model"]) == ("gemma3-270m",) * 2  # the proxy that read
        assert ANSWER in body["compressed_text"], body["compressed_text"]
        assert body["compressed_tokens"] < body["origin_tokens"]

        after = {**before, "other_languages_loaded": True}
        assert c.get("/health").json()["proxies"] == after
        assert c.get("/ready").json()["proxies"] == after

        # Another method's compressor (built by the settings' factory, its multilingual proxy
        # a name) reads German on the weights already loaded, not on a copy of its own.
        assert _default_method(app) != OTHER_METHOD
        other = c.post("/v1/compress", json={**GERMAN, "method": OTHER_METHOD})
        assert other.status_code == 200, other.text
        assert (other.json()["tokenizer"], other.json()["method"]) == ("gemma3-270m", "fused")
        second = app.state.service.compressor(OTHER_METHOD).multilingual_compressor
        assert second is not None and second.proxy is gemma_proxy


@pytest.mark.anyio
async def test_multilingual_none_reads_every_language_with_one_proxy(reranker: Any) -> None:
    """``RAGATTN_MULTILINGUAL_PROXY=none``: the compressor built from the settings (on the
    handed-in reranker's proxy) keeps German on SmolLM2, ``/health`` names it for every language,
    and the cache fingerprint is not the default's (which names Gemma)."""
    from litestar.testing import AsyncTestClient

    fingerprints = {}
    for value in ("none", "auto"):
        app = create_app(Settings(multilingual_proxy=value), reranker=reranker)
        async with AsyncTestClient(app=app) as c:
            deadline = time.monotonic() + 120
            while (ready := await c.get("/ready")).status_code != 200:
                assert time.monotonic() < deadline, ready.text
                await asyncio.sleep(0.05)
            fingerprints[value] = app.state.service.fingerprint
            if value == "none":
                assert ready.json()["proxies"] == {
                    "english": "smollm2-135m",
                    "other_languages": "smollm2-135m",
                    "other_languages_loaded": True,
                }
                german = await c.post("/v1/compress", json=GERMAN)
                assert german.status_code == 200, german.text
                assert (german.json()["tokenizer"], german.json()["model"]) == ("smollm2-135m",) * 2
            else:
                assert ready.json()["proxies"]["other_languages"] == "gemma3-270m"
    assert fingerprints["none"] != fingerprints["auto"]
