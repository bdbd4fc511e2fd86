"""Issue 16 §4, §6 and §9 over real sockets: slow bodies, hang-ups, deadlines, the HTTP edge.

- A body that never completes (Content-Length larger than what is sent, a chunked body with no
  end, headers and no body) is a 408 in the error shape within ``RAGATTN_BODY_TIMEOUT_S`` and its
  connection is closed: 50 such connections hold nothing open.
- A client that hangs up mid-body is counted as 499, with no traceback in the log.
- ``/v1/ask`` honours ``RAGATTN_REQUEST_TIMEOUT_S``, its generator call included.
- Headers over ``RAGATTN_MAX_HEADER_BYTES`` are a 431, malformed HTTP is a JSON 400, and every
  response (errors included) carries ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

KEY = "edge-key"
AUTH = f"Authorization: Bearer {KEY}\r\n"
JSON_HEAD = "Content-Type: application/json\r\n"
BODY_TIMEOUT_S = 1.0


def _assert_error(resp: Any, status: int, error_type: str) -> None:
    assert resp.status == status, resp
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert set(resp.json()) == {"error_type", "message"}
    assert resp.json()["error_type"] == error_type, resp.json()


UNFINISHED = {
    "short body": f"{AUTH}{JSON_HEAD}Content-Length: 200\r\n",
    "endless chunks": f"{AUTH}{JSON_HEAD}Transfer-Encoding: chunked\r\n",
    "headers only": f"{AUTH}{JSON_HEAD}Content-Length: 50\r\n",
}
PARTIAL = {"short body": b'{"query": "q"', "endless chunks": b'5\r\n{"que\r\n', "headers only": b""}


def test_unfinished_bodies_are_a_408_and_free_their_connection(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    with production_server(api_keys=(KEY,), body_timeout_s=BODY_TIMEOUT_S) as live:
        for name, extra in UNFINISHED.items():
            started = time.monotonic()
            with raw_http.connect(live.port) as sock:
                sock.sendall(raw_http.head(live.port, "POST", "/v2/rerank", extra) + PARTIAL[name])
                resp = raw_http.read(sock, timeout=30)
            waited = time.monotonic() - started
            _assert_error(resp, 408, "request_timeout")
            assert "RAGATTN_BODY_TIMEOUT_S" in resp.json()["message"]
            assert resp.headers["connection"] == "close"
            assert resp.closed, name
            assert BODY_TIMEOUT_S <= waited < BODY_TIMEOUT_S + 10, (name, waited)
        # Fifty at once: all answered and closed, none left open.
        socks = [raw_http.connect(live.port) for _ in range(50)]
        try:
            for i, sock in enumerate(socks):
                name = list(UNFINISHED)[i % 3]
                sock.sendall(
                    raw_http.head(live.port, "POST", "/v2/rerank", UNFINISHED[name]) + PARTIAL[name]
                )
            answers = [raw_http.read(sock, timeout=60) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert [a.status for a in answers] == [408] * 50
        assert all(a.closed for a in answers)
        assert httpx.get(f"{live.url}/health", timeout=10).status_code == 200


def test_a_client_hanging_up_mid_body_is_a_499_not_a_500(
    production_server: Callable[..., Any], raw_http: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with production_server() as live:
        with raw_http.connect(live.port) as sock:
            sock.sendall(
                raw_http.head(
                    live.port, "POST", "/v2/rerank", f"{JSON_HEAD}Content-Length: 900\r\n"
                )
                + b'{"query": "q", "documents": ['
            )
            time.sleep(0.3)  # the body read has started
        deadline = time.monotonic() + 10
        status_499 = 'ragattn_requests_total{method="POST",route="/v2/rerank",status="499"} 1.0'
        while status_499 not in (metrics := httpx.get(f"{live.url}/metrics").text):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.05)
    assert 'status="500"' not in metrics
    assert not any("Traceback" in (r.exc_text or "") or r.exc_info for r in caplog.records)


class _SlowGenerator(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers after ``delay_s`` seconds."""

    delay_s = 5.0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        time.sleep(self.delay_s)
        body = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": "1889"}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1},
                "model": "slow",
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def slow_generator() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowGenerator)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragattn.retrieve import Index

    out = tmp_path_factory.mktemp("edge-index") / "idx"
    corpus = [
        {"id": "eiffel", "text": "The Eiffel Tower was completed on 31 March 1889 in Paris."},
        {"id": "pisa", "text": "The Leaning Tower stands in Pisa, a city in Italy."},
    ]
    Index.build(corpus, out, dense=False, chunk_words=None)
    return out


def test_ask_answers_503_at_its_deadline_even_in_the_generator(
    production_server: Callable[..., Any], slow_generator: str, index_dir: Path
) -> None:
    with production_server(
        index_dir=str(index_dir),
        request_timeout_s=2.0,
        generator_base_url=slow_generator,
        generator_model="slow",
        cache_backend="none",
    ) as live:
        started = time.monotonic()
        resp = httpx.post(
            f"{live.url}/v1/ask",
            json={"question": "When was the Eiffel Tower completed?", "mode": "bm25", "top_k": 2},
            timeout=30,
        )
        waited = time.monotonic() - started
    assert resp.status_code == 503, resp.text
    assert resp.json()["error_type"] == "deadline_exceeded"
    assert "RAGATTN_REQUEST_TIMEOUT_S" in resp.json()["message"]
    assert resp.headers["retry-after"] == "1"
    assert 2.0 <= waited < 4.5, waited  # the generator would have taken 5 s


def test_the_http_edge_answers_in_the_error_shape(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    with production_server(
        api_keys=(KEY,), max_header_bytes=8192, rate_limit_per_minute=2, body_timeout_s=2.0
    ) as live:
        port = live.port
        huge = raw_http.exchange(
            port,
            raw_http.head(port, "GET", "/health", f"Authorization: Bearer {'x' * 1_000_000}\r\n"),
        )
        _assert_error(huge, 431, "headers_too_large")
        assert huge.closed
        malformed = raw_http.exchange(port, b"GARBAGE \x00\x01 HTTP/9.9\r\n\r\n")
        _assert_error(malformed, 400, "invalid_request")
        head = raw_http.exchange(port, raw_http.head(port, "HEAD", "/health"))
        assert head.status == 200 and head.headers["x-content-type-options"] == "nosniff"
        cases = [
            (
                raw_http.head(port, "POST", "/v2/rerank", "Content-Length: 2\r\n") + b"{}",
                401,
                "unauthorized",
            ),
            (raw_http.head(port, "GET", "/nowhere"), 404, "not_found"),
            (raw_http.head(port, "GET", "/schema/nowhere"), 404, "not_found"),
            (raw_http.head(port, "GET", "/v2/rerank", AUTH), 405, "method_not_allowed"),
            (
                raw_http.head(
                    port,
                    "POST",
                    "/v2/rerank",
                    f"{AUTH}Content-Type: text/plain\r\nContent-Length: 2\r\n",
                )
                + b"{}",
                415,
                "unsupported_media_type",
            ),
        ]
        for data, status, error_type in cases:
            _assert_error(raw_http.exchange(port, data), status, error_type)
        # A 401 whose announced body does not arrive within the body deadline (2 s here) is sent
        # when the deadline passes and closes the connection: the rest is not waited for longer.
        unread = raw_http.exchange(
            port, raw_http.head(port, "POST", "/v2/rerank", "Content-Length: 500\r\n") + b"{"
        )
        _assert_error(unread, 401, "unauthorized")
        assert unread.headers["connection"] == "close" and unread.closed
        limited = [
            raw_http.exchange(
                port,
                raw_http.head(port, "POST", "/v2/rerank", f"{AUTH}{JSON_HEAD}Content-Length: 2\r\n")
                + b"{}",
            )
            for _ in range(3)
        ]
        _assert_error(limited[-1], 429, "rate_limited")
