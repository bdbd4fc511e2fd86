"""Client / AsyncClient against a real HTTP server on 127.0.0.1 that misbehaves on purpose.

The server (:class:`MisbehavingServer`, asyncio in its own thread) reads each request and then
plays the answer a test set for its path: a body trickled a byte at a time, trickled headers,
silence, or a well-formed HTTP answer whose JSON is not what a ragattn server sends (``"index":
true``, a score of ``"NaN"`` or ``NaN``, an index past the documents sent, a kept span outside its
document, a missing field, ...). The clients under test run unmodified over the network.

Checked: ``timeout_s`` is one deadline for the whole answer (ServiceTimeoutError, long before the
trickle ends), and every malformed answer of every verb raises InvalidResponseError naming the
field, on both clients.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from ragattn.client import (
    AsyncClient,
    Client,
    InvalidResponseError,
    ServiceError,
    ServiceTimeoutError,
)
from ragattn.errors import NotReadyError
from ragattn.types import Document

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]
"""What the server does once it has read a request: write (or withhold) the response."""


class MisbehavingServer:
    """An HTTP/1.1 server on 127.0.0.1 whose answer per path is set by the test (``answers``);
    it records each request as ``(path, JSON body)`` and closes the connection after it."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.requests: list[tuple[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._handlers: set[asyncio.Task[Any]] = set()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the test server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self._port = self._server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            fields = dict(line.split(":", 1) for line in head[1:] if ":" in line)
            length = int({k.strip().lower(): v for k, v in fields.items()}["content-length"])
            self.requests.append((path, json.loads(await reader.readexactly(length))))
            await self.answers[path](writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up, e.g. at its deadline
        finally:
            writer.close()
            self._handlers.discard(task)

    def reset(self) -> None:
        """Forget the answers and requests; end answers still trickling to a client that gave
        up (a sync client's reader thread may still be waiting on trickled headers)."""

        async def cancel() -> None:
            for task in list(self._handlers):
                task.cancel()

        asyncio.run_coroutine_threadsafe(cancel(), self._loop).result(10)
        self.answers.clear()
        self.requests.clear()

    def close(self) -> None:
        self.reset()

        async def stop() -> None:
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _head(status: int, length: int, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode()


def respond(data: bytes, *, status: int = 200, extra_headers: str = "") -> Answer:
    """A complete answer at once."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(_head(status, len(data), extra_headers) + data)
        await writer.drain()

    return answer


def trickle(data: bytes, *, every_s: float, piece: int = 1, headers_too: bool = False) -> Answer:
    """``data`` sent ``piece`` bytes at a time, one piece every ``every_s`` seconds; with
    ``headers_too`` the status line and headers trickle as well, else they come at once."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        head = _head(200, len(data))
        rest = head + data
        if not headers_too:
            writer.write(head)
            await writer.drain()
            rest = data
        for start in range(0, len(rest), piece):
            if writer.is_closing():
                return
            writer.write(rest[start : start + piece])
            await writer.drain()
            await asyncio.sleep(every_s)

    return answer


async def silence(writer: asyncio.StreamWriter) -> None:
    """Read the request, answer nothing."""
    await asyncio.sleep(3600)


# -- the verbs and their well-formed answers ----------------------------------------------------

QUERY = "What is the capital of France?"
PARIS = "Paris is the capital of France."
TEXT = "Paris is the capital of France. It lies on the Seine."
RERANK_DOCS = ["Bananas are yellow.", Document(text=PARIS, id="b"), "The Rhine flows north."]
PAIR = ["Bananas are yellow.", TEXT]

META: dict[str, Any] = {
    "api_version": {"version": "2"},
    "billed_units": {"search_units": 1, "input_tokens": 20},
    "warnings": [],
}
RERANK: dict[str, Any] = {
    "id": "x",
    "model": "m",
    "results": [
        {"index": 1, "relevance_score": 0.9, "raw_score": 2.5},
        {"index": 2, "relevance_score": 0.4, "raw_score": -0.5},
    ],
    "meta": META,
}
PRUNED: dict[str, Any] = {
    "id": "x",
    "model": "m",
    "method": "sentinel",
    "results": [
        {
            "index": 1,
            "relevance_score": 0.9,
            "raw_score": 2.5,
            "pruned_text": PARIS,
            "kept_spans": [{"start": 0, "end": 31, "score": 0.8, "text": PARIS}],
        }
    ],
    "meta": META,
}
COMPRESSION: dict[str, Any] = {
    "compressed_text": PARIS,
    "documents": [
        {
            "index": 0,
            "text": PARIS,
            "kept_spans": [{"start": 0, "end": 31, "score": 0.8, "text": PARIS}],
            "sentence_scores": [0.8, 0.1],
        }
    ],
    "origin_tokens": 14,
    "compressed_tokens": 8,
    "ratio": 8 / 14,
    "tokenizer": "m",
    "method": "focal",
    "warnings": [],
}
COMPRESS: dict[str, Any] = {"id": "y", "model": "m", **COMPRESSION}
RERANK_COMPRESS: dict[str, Any] = {
    "id": "z",
    "model": "m",
    "method": "sentinel",
    "results": [{"index": 1, "relevance_score": 0.8}],
    "compression": {
        **COMPRESSION,
        "documents": [{**COMPRESSION["documents"][0], "index": 1}],
    },
    "meta": META,
}


@dataclass(frozen=True)
class Verb:
    path: str
    body: dict[str, Any]
    call: Callable[[Any], Any]
    """Calls the verb on a Client (the result) or an AsyncClient (an awaitable of it)."""


VERBS = {
    "rerank": Verb("/v2/rerank", RERANK, lambda c: c.rerank(QUERY, RERANK_DOCS)),
    "prune": Verb(
        "/v2/rerank", PRUNED, lambda c: c.rerank(QUERY, RERANK_DOCS, top_n=1, prune={"ratio": 0.5})
    ),
    "compress": Verb("/v1/compress", COMPRESS, lambda c: c.compress(QUERY, [TEXT], ratio=0.5)),
    "rerank_compress": Verb(
        "/v1/rerank_compress",
        RERANK_COMPRESS,
        lambda c: c.rerank_and_compress(QUERY, PAIR, top_n=1, ratio=0.5),
    ),
}


@pytest.fixture(scope="module")
def module_server() -> Iterator[MisbehavingServer]:
    server = MisbehavingServer()
    yield server
    server.close()


@pytest.fixture
def server(module_server: MisbehavingServer) -> Iterator[MisbehavingServer]:
    yield module_server
    module_server.reset()


@pytest.fixture(params=["Client", "AsyncClient"])
def call(request: pytest.FixtureRequest, server: MisbehavingServer) -> Callable[..., Any]:
    """``call(verb, **client_kwargs)``: the verb's result through a fresh client of this kind."""

    def sync(verb: Verb, **kwargs: Any) -> Any:
        with Client(server.url, backoff_s=0.0, **kwargs) as client:
            return verb.call(client)

    def async_(verb: Verb, **kwargs: Any) -> Any:
        async def main() -> Any:
            async with AsyncClient(server.url, backoff_s=0.0, **kwargs) as client:
                return await verb.call(client)

        return asyncio.run(main())

    return sync if request.param == "Client" else async_


def answer_json(server: MisbehavingServer, verb: Verb, body: Any) -> None:
    server.answers[verb.path] = respond(json.dumps(body).encode())


# -- well-formed answers come back as results (the control for everything below) --------------


def test_well_formed_answers_of_every_verb_are_results(
    server: MisbehavingServer, call: Callable[..., Any]
) -> None:
    for name, verb in VERBS.items():
        answer_json(server, verb, verb.body)
        got = call(verb)
        assert server.requests[-1][0] == verb.path, name
        ranked = got[0] if name == "rerank_compress" else got
        if name == "compress":
            assert [d.index for d in got.documents] == [0]
            assert got.documents[0].kept_spans[0].text == PARIS
        else:
            assert [r.index for r in ranked] == ([1, 2] if name == "rerank" else [1]), name
    pruned = call(VERBS["prune"])
    assert pruned[0].pruned_text == PARIS and pruned.method == "sentinel"


# -- timeout_s is a deadline for the whole answer ----------------------------------------------

TRICKLE_EVERY_S = 0.05
DEADLINE_S = 0.5


def padded(body: dict[str, Any], size: int = 400) -> bytes:
    """``body`` as JSON padded with whitespace to ``size`` bytes (still the same JSON)."""
    data = json.dumps(body).encode()
    return data + b" " * max(0, size - len(data))


@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_body_trickled_a_byte_at_a_time_raises_at_the_deadline(
    server: MisbehavingServer, call: Callable[..., Any], verb: Verb
) -> None:
    data = padded(verb.body)
    trickle_s = len(data) * TRICKLE_EVERY_S  # 20 s: every read is quick, the answer never ends
    server.answers[verb.path] = trickle(data, every_s=TRICKLE_EVERY_S)
    started = time.monotonic()
    with pytest.raises(ServiceTimeoutError, match=re.escape("within timeout_s=0.5 s")) as info:
        call(verb, timeout_s=DEADLINE_S)
    assert time.monotonic() - started < trickle_s / 2
    assert isinstance(info.value, TimeoutError) and info.value.error_type == "timeout"
    assert len(server.requests) == 1  # a timeout is not retried


def test_trickled_headers_raise_at_the_deadline(
    server: MisbehavingServer, call: Callable[..., Any]
) -> None:
    data = padded(RERANK)
    trickle_s = (len(_head(200, len(data))) + len(data)) * TRICKLE_EVERY_S
    server.answers["/v2/rerank"] = trickle(data, every_s=TRICKLE_EVERY_S, headers_too=True)
    started = time.monotonic()
    with pytest.raises(ServiceTimeoutError, match=re.escape("raise timeout_s")):
        call(VERBS["rerank"], timeout_s=DEADLINE_S)
    assert time.monotonic() - started < trickle_s / 2


def test_a_silent_server_raises_at_the_deadline(
    server: MisbehavingServer, call: Callable[..., Any]
) -> None:
    server.answers["/v1/compress"] = silence
    with pytest.raises(ServiceTimeoutError, match=re.escape("within timeout_s=0.5 s")):
        call(VERBS["compress"], timeout_s=DEADLINE_S)


def test_a_slow_answer_that_ends_within_the_deadline_is_read(
    server: MisbehavingServer, call: Callable[..., Any]
) -> None:
    # 25 pieces of 16 bytes, 0.02 s apart: slow, but done long before the deadline.
    server.answers["/v2/rerank"] = trickle(padded(RERANK), every_s=0.02, piece=16)
    got = call(VERBS["rerank"], timeout_s=60)
    assert [(r.index, r.relevance_score) for r in got] == [(1, 0.9), (2, 0.4)]


def test_a_retry_that_would_end_past_the_deadline_is_not_waited_for(
    server: MisbehavingServer, call: Callable[..., Any]
) -> None:
    # Not ready, come back in 0.4 s: within a 1 s deadline there is room for two waits, not ten.
    body = json.dumps({"error_type": "not_ready", "message": "loading"}).encode()
    server.answers["/v2/rerank"] = respond(body, status=503, extra_headers="Retry-After: 0.4\r\n")
    with pytest.raises(NotReadyError, match="^loading$"):
        call(VERBS["rerank"], timeout_s=1.0, max_retries=10, max_backoff_s=30)
    assert 1 <= len(server.requests) <= 3


# -- malformed answers raise InvalidResponseError naming the field ------------------------------

_DELETE = object()


def mutated(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``body`` with the field at ``path`` set to ``value`` (or deleted)."""
    out = copy.deepcopy(body)
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return out


NAN, INF = float("nan"), float("inf")
SPAN = ("results", 0, "kept_spans", 0)
CSPAN = ("documents", 0, "kept_spans", 0)
MALFORMED: list[tuple[str, str, tuple[str | int, ...], Any, str, str]] = [
    # (id, verb, path in the body, value, the field named, what is said about it)
    ("index-true", "rerank", ("results", 0, "index"), True, "", "true is not an integer"),
    ("index-float", "rerank", ("results", 0, "index"), 1.0, "", "1.0 is not an integer"),
    ("index-string", "rerank", ("results", 0, "index"), "1", "", '"1" is not an integer'),
    ("index-past-end", "rerank", ("results", 0, "index"), 3, "", "3 is outside the 3 documents"),
    ("index-negative", "rerank", ("results", 0, "index"), -1, "", "-1 is outside the 3 documents"),
    ("index-twice", "rerank", ("results", 1, "index"), 1, "", "1 appears twice in results"),
    ("index-missing", "rerank", ("results", 0, "index"), _DELETE, "", "is missing"),
    ("score-string-nan", "rerank", ("results", 0, "relevance_score"), "NaN", "", '"NaN" is not a'),
    ("score-string", "rerank", ("results", 0, "relevance_score"), "0.5", "", '"0.5" is not a'),
    ("score-nan", "rerank", ("results", 0, "relevance_score"), NAN, "", "NaN is not a finite"),
    ("score-inf", "rerank", ("results", 1, "raw_score"), -INF, "", "-Infinity is not a finite"),
    ("score-bool", "rerank", ("results", 0, "relevance_score"), True, "", "true is not a number"),
    ("score-null", "rerank", ("results", 0, "relevance_score"), None, "", "null is not a number"),
    ("raw-missing", "rerank", ("results", 0, "raw_score"), _DELETE, "", "is missing"),
    ("results-missing", "rerank", ("results",), _DELETE, "", "is missing"),
    ("results-object", "rerank", ("results",), {}, "", "{} is not a list"),
    ("result-number", "rerank", ("results", 0), 1, "", "1 is not an object"),
    ("meta-list", "rerank", ("meta",), [], "", "[] is not an object"),
    ("warning-number", "rerank", ("meta", "warnings"), [1], "meta.warnings[0]", "1 is not a"),
    ("method-number", "rerank", ("method",), 3, "", "3 is not a string"),
    ("span-past-end", "prune", (*SPAN, "end"), 99, "results[0].kept_spans[0]", "[0, 99) is out"),
    ("span-negative", "prune", (*SPAN, "start"), -1, "results[0].kept_spans[0]", "[-1, 31) is"),
    ("span-reversed", "prune", (*SPAN, "start"), 32, "results[0].kept_spans[0]", "[32, 31) is"),
    ("span-start-bool", "prune", (*SPAN, "start"), False, "", "false is not an integer"),
    ("span-end-string", "prune", (*SPAN, "end"), "31", "", '"31" is not an integer'),
    ("span-text", "prune", (*SPAN, "text"), "Paris", "", '"Paris" is not its document\'s text'),
    ("span-score-nan", "prune", (*SPAN, "score"), NAN, "", "NaN is not a finite number"),
    ("span-score-string", "prune", (*SPAN, "score"), "0.8", "", '"0.8" is not a number'),
    ("spans-object", "prune", ("results", 0, "kept_spans"), {}, "", "{} is not a list"),
    ("pruned-number", "prune", ("results", 0, "pruned_text"), 5, "", "5 is not a string"),
    ("doc-index-false", "compress", ("documents", 0, "index"), False, "", "false is not an"),
    ("doc-index-past", "compress", ("documents", 0, "index"), 1, "", "1 is outside the 1 doc"),
    ("doc-text-null", "compress", ("documents", 0, "text"), None, "", "null is not a string"),
    ("doc-span-past", "compress", (*CSPAN, "end"), 54, "documents[0].kept_spans[0]", "[0, 54)"),
    ("doc-spans-missing", "compress", ("documents", 0, "kept_spans"), _DELETE, "", "is missing"),
    ("doc-score-nan", "compress", ("documents", 0, "sentence_scores", 1), NAN, "", "NaN is not"),
    ("doc-score-string", "compress", ("documents", 0, "sentence_scores", 0), "0.8", "", '"0.8"'),
    ("tokens-string", "compress", ("origin_tokens",), "14", "", '"14" is not an integer'),
    ("tokens-bool", "compress", ("compressed_tokens",), True, "", "true is not an integer"),
    ("tokens-negative", "compress", ("compressed_tokens",), -8, "", "-8 is negative"),
    ("ratio-nan", "compress", ("ratio",), NAN, "", "NaN is not a finite number"),
    ("ratio-string", "compress", ("ratio",), "0.5", "", '"0.5" is not a number'),
    ("tokenizer-missing", "compress", ("tokenizer",), _DELETE, "", "is missing"),
    ("warnings-string", "compress", ("warnings",), "w", "", '"w" is not a list'),
    ("rc-index-true", "rerank_compress", ("results", 0, "index"), True, "", "true is not an"),
    ("rc-score-str", "rerank_compress", ("results", 0, "relevance_score"), "NaN", "", '"NaN" is'),
    ("rc-compression-gone", "rerank_compress", ("compression",), _DELETE, "", "is missing"),
    ("rc-compression-list", "rerank_compress", ("compression",), [], "", "[] is not an object"),
    ("rc-ratio-string", "rerank_compress", ("compression", "ratio"), "0.5", "", '"0.5" is not'),
    (
        "rc-span-outside",
        "rerank_compress",
        ("compression", *CSPAN, "end"),
        54,
        "compression.documents[0].kept_spans[0]",
        "[0, 54) is outside its document's 53 characters",
    ),
    (
        "rc-doc-index-past",
        "rerank_compress",
        ("compression", "documents", 0, "index"),
        2,
        "",
        "2 is outside the 2 documents sent (0..1)",
    ),
]


def _field_of(path: tuple[str | int, ...]) -> str:
    """The JSON path the error names for ``path``: ``results[0].index``."""
    out = ""
    for key in path:
        out = f"{out}[{key}]" if isinstance(key, int) else f"{out}.{key}" if out else key
    return out


@pytest.mark.parametrize(
    ("verb", "path", "value", "field", "said"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_a_malformed_answer_raises_naming_the_field(
    server: MisbehavingServer,
    call: Callable[..., Any],
    verb: str,
    path: tuple[str | int, ...],
    value: Any,
    field: str,
    said: str,
) -> None:
    field = field or _field_of(path)
    answer_json(server, VERBS[verb], mutated(VERBS[verb].body, path, value))
    with pytest.raises(InvalidResponseError, match=re.escape(f"({field}: {said}")) as info:
        call(VERBS[verb])
    err = info.value
    assert err.field == field
    assert isinstance(err, ServiceError) and err.error_type == "invalid_response"
    assert len(server.requests) == 1  # a malformed answer is not retried


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"<html>ok</html>", "the body is not JSON"),
        (b"[]", "the body: [] is not an object"),
        (b'{"results": [{"index": 1, "relevance_score": 1e400, "raw_score": 0}]}', "Infinity"),
        (b'{"results": [{"index": 1, "relevance_score": Infinity, "raw_score": 0}]}', "Infinity"),
    ],
    ids=["not-json", "not-object", "overflow", "infinity-literal"],
)
def test_a_body_that_is_not_a_ragattn_answer_raises(
    server: MisbehavingServer, call: Callable[..., Any], data: bytes, said: str
) -> None:
    server.answers["/v2/rerank"] = respond(data)
    with pytest.raises(InvalidResponseError, match=re.escape(said)):
        call(VERBS["rerank"])
