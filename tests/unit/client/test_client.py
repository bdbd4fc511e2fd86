"""Client / AsyncClient without a model: the wire mapping, typed errors, retries and Retry-After.

The server side is an ``httpx.MockTransport`` answering as the service contract says
(docs/service.md); the clients under test run unmodified. Equality with the in-process engines
over a real server is in tests/integrations/test_client_live.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from ragattn.client import (
    AsyncClient,
    Client,
    ClientConfig,
    InvalidResponseError,
    ServiceConnectionError,
    ServiceError,
    ServiceTimeoutError,
)
from ragattn.client.transport import retry_after_s, retry_delay
from ragattn.errors import (
    InputTooLargeError,
    InvalidInputError,
    NotReadyError,
    OverloadedError,
)
from ragattn.types import Document

URL = "http://ragattn.test"
QUERY = "What is the capital of France?"
DOCS = [
    Document(text="Bananas are yellow.", id="a", metadata={"src": "fruit"}),
    Document(text="Paris is the capital of France.", id="b", title="France"),
    "The Rhine flows north.",
]

RERANK_BODY = {
    "id": "x",
    "model": "smollm2-135m",
    "results": [
        {"index": 1, "relevance_score": 0.9, "raw_score": 2.5},
        {"index": 2, "relevance_score": 0.4, "raw_score": -0.5},
    ],
    "meta": {
        "api_version": {"version": "2"},
        "billed_units": {"search_units": 1, "input_tokens": 20},
        "warnings": ["documents[0] truncated"],
    },
}


class Server:
    """A scripted server: answers ``responses`` in turn and records every request."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def json(self, i: int = 0) -> Any:
        return json.loads(self.requests[i].content)


def error(status: int, error_type: str, message: str = "m", **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error_type": error_type, "message": message}, headers=headers
    )


def client(server: Server, **kwargs: Any) -> Client:
    kwargs.setdefault("backoff_s", 0.0)
    return Client(URL, transport=httpx.MockTransport(server), **kwargs)


def aclient(server: Server, **kwargs: Any) -> AsyncClient:
    kwargs.setdefault("backoff_s", 0.0)
    return AsyncClient(URL, transport=httpx.MockTransport(server), **kwargs)


def run_async(make: Callable[[AsyncClient], Any], server: Server, **kwargs: Any) -> Any:
    async def main() -> Any:
        async with aclient(server, **kwargs) as c:
            return await make(c)

    return asyncio.run(main())


# -- rerank ------------------------------------------------------------------------------------


def test_rerank_maps_results_back_to_the_callers_documents() -> None:
    server = Server(httpx.Response(200, json=RERANK_BODY))
    with client(server, api_key="k") as c:
        results = c.rerank(QUERY, DOCS, top_n=2)
    assert [r.index for r in results] == [1, 2]
    assert [r.relevance_score for r in results] == [0.9, 0.4]
    assert [r.raw_score for r in results] == [2.5, -0.5]
    assert results[0].document is DOCS[1]
    assert results[1].document == Document(text="The Rhine flows north.")
    assert results.warnings == ("documents[0] truncated",)
    assert results.by_id("b").index == 1
    request = server.requests[0]
    assert request.url.path == "/v2/rerank"
    assert request.headers["authorization"] == "Bearer k"
    assert server.json() == {
        "query": QUERY,
        "documents": [
            {"text": "Bananas are yellow.", "id": "a"},
            {"text": "Paris is the capital of France.", "id": "b", "title": "France"},
            "The Rhine flows north.",
        ],
        "raw_scores": True,
        "top_n": 2,
    }


def test_async_rerank_equals_sync() -> None:
    sync = client(Server(httpx.Response(200, json=RERANK_BODY))).rerank(QUERY, DOCS)
    server = Server(httpx.Response(200, json=RERANK_BODY))
    got = run_async(lambda c: c.rerank(QUERY, DOCS), server)
    assert got == sync and got.warnings == sync.warnings
    assert "top_n" not in server.json()


def test_malformed_rerank_body_is_a_service_error() -> None:
    body = {**RERANK_BODY, "results": [{"index": 7, "relevance_score": 0.1, "raw_score": 0.0}]}
    want = "results[0].index: 7 is outside the 3 documents sent (0..2)"
    with pytest.raises(ServiceError, match=re.escape(want)) as info:
        client(Server(httpx.Response(200, json=body))).rerank(QUERY, DOCS)
    assert info.value.error_type == "invalid_response"
    assert isinstance(info.value, InvalidResponseError)
    assert info.value.field == "results[0].index"


def test_documents_are_validated_before_sending() -> None:
    server = Server(httpx.Response(200, json=RERANK_BODY))
    with pytest.raises(InvalidInputError, match=re.escape("documents[0] must be a string")):
        client(server).rerank(QUERY, [3])  # type: ignore[list-item]
    assert server.requests == []


# -- compress ----------------------------------------------------------------------------------

TEXT = "Paris is the capital of France. It lies on the Seine."
COMPRESS_BODY = {
    "id": "y",
    "compressed_text": "Paris is the capital of France.",
    "documents": [
        {
            "index": 0,
            "text": "Paris is the capital of France.",
            "kept_spans": [{"start": 0, "end": 31, "score": 0.8, "text": TEXT[:31]}],
            "sentence_scores": [0.8, 0.1],
        }
    ],
    "origin_tokens": 14,
    "compressed_tokens": 8,
    "ratio": 8 / 14,
    "tokenizer": "smollm2-135m",
    "method": "focal",
    "model": "smollm2-135m",
    "warnings": [],
}


def test_compress_maps_the_result_and_resplits_sentence_spans() -> None:
    server = Server(httpx.Response(200, json=COMPRESS_BODY))
    doc = Document(text=TEXT, id="p")
    out = client(server, compress_method="focal").compress(QUERY, [doc], threshold=0.5)
    assert server.requests[0].url.path == "/v1/compress"
    assert server.json() == {
        "query": QUERY,
        "documents": [{"text": TEXT, "id": "p"}],
        "keep_order": True,
        "threshold": 0.5,
        "method": "focal",
    }
    (d,) = out.documents
    assert d.document is doc
    assert d.sentence_spans == ((0, 31), (32, 53))
    assert [(s.start, s.end, s.doc_index) for s in d.kept_spans] == [(0, 31, 0)]
    assert TEXT[d.kept_spans[0].start : d.kept_spans[0].end] == d.kept_spans[0].text
    assert (out.origin_tokens, out.compressed_tokens, out.method) == (14, 8, "focal")
    assert out.ratio == pytest.approx(8 / 14) and out.warnings == ()


def test_compress_warns_when_the_servers_sentences_differ() -> None:
    body = json.loads(json.dumps(COMPRESS_BODY))
    body["documents"][0]["sentence_scores"] = [0.8, 0.1, 0.3]
    out = client(Server(httpx.Response(200, json=body))).compress(QUERY, TEXT, ratio=0.5)
    assert out.documents[0].sentence_spans == ()
    assert out.warnings == (
        "documents[0]: the server split sentences differently from this client's ragattn "
        "version; sentence_spans is empty",
    )


GERMAN = "Er kam am 12. Mai nach Hause zurück. Dann schlief er lange."
GERMAN_BODY = {
    **COMPRESS_BODY,
    "compressed_text": GERMAN[:36],
    "documents": [
        {
            "index": 0,
            "text": GERMAN[:36],
            "kept_spans": [{"start": 0, "end": 36, "score": 0.8, "text": GERMAN[:36]}],
            "sentence_scores": [0.8, 0.1],
        }
    ],
}
"""A server's answer under German rules: two sentences ("am 12. Mai" ends none)."""


def test_compress_sends_a_language_and_resplits_by_it() -> None:
    server = Server(httpx.Response(200, json=GERMAN_BODY))
    out = client(server).compress(QUERY, GERMAN, ratio=0.5, language="de")
    assert server.json()["language"] == "de"
    assert out.documents[0].sentence_spans == ((0, 36), (37, 59))
    assert out.warnings == ()
    # auto is not sent (the service's default): the client identifies German, as the service
    # does, and re-splits by its rules; English rules, named, split three sentences here
    auto = client(server).compress(QUERY, GERMAN, ratio=0.5)
    assert "language" not in server.json(1)
    assert auto.documents[0].sentence_spans == ((0, 36), (37, 59))
    english = client(server).compress(QUERY, GERMAN, ratio=0.5, language="en")
    assert english.documents[0].sentence_spans == ()
    assert "split sentences differently" in english.warnings[0]
    docs = [Document(text=GERMAN)]
    pair = {
        "id": "z",
        "model": "smollm2-135m",
        "results": [{"index": 0, "relevance_score": 0.8}],
        "compression": {k: v for k, v in GERMAN_BODY.items() if k not in ("id", "model")},
        "meta": RERANK_BODY["meta"],
    }
    _, both = run_async(
        lambda c: c.rerank_and_compress(QUERY, docs, ratio=0.5, language="de"),
        Server(httpx.Response(200, json=pair)),
    )
    assert both.documents[0].sentence_spans == ((0, 36), (37, 59))


def test_rerank_sends_a_language_in_prune() -> None:
    server = Server(httpx.Response(200, json=RERANK_BODY))
    client(server).rerank(QUERY, DOCS, prune={"ratio": 0.5}, language="de")
    client(server).rerank(QUERY, DOCS, prune={"ratio": 0.5})
    assert server.json(0)["prune"] == {"ratio": 0.5, "language": "de"}
    assert server.json(1)["prune"] == {"ratio": 0.5}


def test_compress_sends_a_context_string_as_context() -> None:
    server = Server(httpx.Response(200, json=COMPRESS_BODY))
    out = run_async(lambda c: c.compress(QUERY, TEXT, target_tokens=10), server)
    assert server.json() == {
        "query": QUERY,
        "context": TEXT,
        "keep_order": True,
        "target_tokens": 10,
    }
    assert out.documents[0].document == Document(text=TEXT)


def test_compress_refuses_arguments_the_service_does_not_have() -> None:
    server = Server(httpx.Response(200, json=COMPRESS_BODY))
    with pytest.raises(InvalidInputError, match=re.escape("pass tokenizer=None to a Client")):
        client(server).compress(QUERY, TEXT, ratio=0.5, tokenizer="gpt2")
    with pytest.raises(InvalidInputError, match=re.escape("keep_entities is not part")):
        client(server).compress(QUERY, TEXT, ratio=0.5, keep_entities=True)
    assert server.requests == []


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type", "cls"),
    [
        (400, "invalid_request", InvalidInputError),
        (413, "input_too_large", InputTooLargeError),
        (401, "unauthorized", ServiceError),
        (500, "internal_error", ServiceError),
    ],
)
def test_errors_are_typed_and_carry_the_servers_error_type(
    status: int, error_type: str, cls: type[Exception]
) -> None:
    server = Server(error(status, error_type, "what to do"))
    with pytest.raises(cls, match="^what to do$") as info:
        client(server).rerank(QUERY, DOCS)
    err: Any = info.value
    assert (err.error_type, err.status_code, err.retry_after_s) == (error_type, status, None)
    assert len(server.requests) == 1  # never retried


def test_a_non_json_error_body_is_an_http_error() -> None:
    server = Server(httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ServiceError, match=re.escape("HTTP 502 without a ragattn error body")):
        client(server).rerank(QUERY, DOCS)


# -- retries -----------------------------------------------------------------------------------


def test_429_and_503_are_retried_then_succeed() -> None:
    server = Server(
        error(429, "overloaded", **{"Retry-After": "0"}),
        error(503, "not_ready", **{"Retry-After": "0"}),
        httpx.Response(200, json=RERANK_BODY),
    )
    assert [r.index for r in client(server).rerank(QUERY, DOCS)] == [1, 2]
    assert len(server.requests) == 3


def test_async_retries_like_sync() -> None:
    server = Server(
        error(429, "rate_limited", **{"Retry-After": "0"}), httpx.Response(200, json=RERANK_BODY)
    )
    assert [r.index for r in run_async(lambda c: c.rerank(QUERY, DOCS), server)] == [1, 2]
    assert len(server.requests) == 2


def test_retries_give_up_after_max_retries_with_the_last_error() -> None:
    server = Server(error(503, "not_ready", "loading", **{"Retry-After": "0"}))
    with pytest.raises(NotReadyError, match="^loading$") as info:
        client(server, max_retries=2).rerank(QUERY, DOCS)
    assert info.value.retry_after_s == 0.0  # type: ignore[attr-defined]
    assert len(server.requests) == 3


def test_a_retry_after_longer_than_max_backoff_is_raised_at_once() -> None:
    server = Server(error(429, "rate_limited", "slow down", **{"Retry-After": "120"}))
    with pytest.raises(OverloadedError, match="^slow down$") as info:
        client(server, max_backoff_s=30).rerank(QUERY, DOCS)
    err: Any = info.value
    assert (err.error_type, err.status_code, err.retry_after_s) == ("rate_limited", 429, 120.0)
    assert len(server.requests) == 1


def test_failed_connections_are_retried_then_raised() -> None:
    server = Server(httpx.ConnectError("refused"))
    with pytest.raises(ServiceConnectionError, match=re.escape("is the server running?")) as info:
        client(server, max_retries=2).rerank(QUERY, DOCS)
    assert info.value.error_type == "connection_error"
    assert len(server.requests) == 3


def test_read_timeouts_are_not_retried() -> None:
    server = Server(httpx.ReadTimeout("slow"))
    with pytest.raises(ServiceTimeoutError, match=re.escape("raise timeout_s")) as info:
        client(server, timeout_s=2).rerank(QUERY, DOCS)
    assert isinstance(info.value, TimeoutError) and info.value.error_type == "timeout"
    assert len(server.requests) == 1


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after_s("3") == 3.0
    assert retry_after_s("Wed, 01 Jan 2025 12:00:05 GMT", now=now) == 5.0
    assert retry_after_s("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None


def test_retry_delay_backs_off_exponentially_with_bounded_jitter() -> None:
    config = ClientConfig(base_url=URL, max_retries=3, backoff_s=1.0, max_backoff_s=3.0)
    for attempt, base in [(0, 1.0), (1, 2.0), (2, 3.0)]:
        delay = retry_delay(attempt, None, config)
        assert delay is not None and base / 2 <= delay <= base
    assert retry_delay(3, None, config) is None
    assert retry_delay(0, 2.5, config) == 2.5
    assert retry_delay(0, 3.5, config) is None


def test_config_is_validated_and_masks_the_key() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("base_url must start with http://")):
        Client("localhost:8080")
    with pytest.raises(InvalidInputError, match=re.escape("rerank_path must be")):
        ClientConfig(base_url=URL, rerank_path="/v3/rerank")
    assert "secret" not in repr(ClientConfig(base_url=URL, api_key="secret"))
    twin = AsyncClient.from_config(Client(URL, api_key="secret", timeout_s=5).config)
    assert twin.config.api_key == "secret" and twin.config.timeout_s == 5


@pytest.mark.slow  # a fresh interpreter imports torch
def test_core_imports_no_framework() -> None:
    code = (
        "import sys, ragattn, ragattn.client, ragattn.integrations\n"
        "print(sorted(m for m in ('langchain_core', 'llama_index') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_rerank_and_compress_maps_both_parts_in_rank_order() -> None:
    docs = [Document(text="Bananas are yellow.", id="a"), Document(text=TEXT, id="p")]
    compression = {**COMPRESS_BODY, "documents": [{**COMPRESS_BODY["documents"][0], "index": 1}]}
    body = {
        "id": "z",
        "model": "smollm2-135m",
        "results": [{"index": 1, "relevance_score": 0.8}],
        "compression": {k: v for k, v in compression.items() if k not in ("id", "model")},
        "meta": RERANK_BODY["meta"],
    }
    server = Server(httpx.Response(200, json=body))
    ranked, out = client(server).rerank_and_compress(QUERY, docs, top_n=1, ratio=0.5)
    assert server.requests[0].url.path == "/v1/rerank_compress"
    assert server.json() == {
        "query": QUERY,
        "documents": [{"text": "Bananas are yellow.", "id": "a"}, {"text": TEXT, "id": "p"}],
        "keep_order": True,
        "ratio": 0.5,
        "top_n": 1,
    }
    # An older service sends no raw_score: the relevance stands in for it.
    assert [(r.index, r.relevance_score, r.raw_score) for r in ranked] == [(1, 0.8, 0.8)]
    assert ranked[0].document is docs[1] and out.documents[0].document is docs[1]
    assert out.documents[0].sentence_spans == ((0, 31), (32, 53))
    body["compression"]["documents"][0].update(index=0, kept_spans=[])  # valid, but not [1]
    want = "compression.documents: the document indices [0] are not the expected [1]"
    with pytest.raises(InvalidResponseError, match=re.escape(want)):
        client(Server(httpx.Response(200, json=body))).rerank_and_compress(QUERY, docs, ratio=0.5)


def test_rerank_and_compress_reads_the_raw_score_the_service_sends() -> None:
    """The document probe's log-odds (``:document-probe``) are not its relevance: the SDK gives
    the ``raw_score`` the route sends, as the library does."""
    docs = [Document(text="Bananas are yellow.", id="a"), Document(text=TEXT, id="p")]
    compression = {**COMPRESS_BODY, "documents": [{**COMPRESS_BODY["documents"][0], "index": 1}]}
    body = {
        "id": "z",
        "model": "smollm2-135m",
        "results": [{"index": 1, "relevance_score": 0.968, "raw_score": 3.41}],
        "compression": {k: v for k, v in compression.items() if k not in ("id", "model")},
        "meta": RERANK_BODY["meta"],
    }
    ranked, _ = client(Server(httpx.Response(200, json=body))).rerank_and_compress(
        QUERY, docs, top_n=1, ratio=0.5
    )
    assert [(r.relevance_score, r.raw_score) for r in ranked] == [(0.968, 3.41)]
