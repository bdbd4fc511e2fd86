"""Body-size limit on a live server over raw sockets: 413 without reading the whole body.

With ``Content-Length`` over the limit the server answers before a byte of the body is sent; with
chunked transfer (no ``Content-Length``) it answers once the limit is crossed, long before the
client would have finished sending. Either way the answer is the common 413 error body.
"""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

pytestmark = pytest.mark.slow

LIMIT = 64 * 1024
CHUNK = 16 * 1024
PLANNED = 20 * 1024 * 1024  # what the client would send if nobody stopped it


@pytest.fixture(scope="module")
def server(reranker: Any, compressor: Any, live_server: Any) -> Iterator[tuple[str, int]]:
    from ragattn.settings import Settings
    from ragattn_api import create_app

    app = create_app(Settings(max_body_bytes=LIMIT), reranker=reranker, compressor=compressor)
    with live_server(app) as url:
        parsed = urlparse(url)
        yield url, int(parsed.port or 80)


def _read_response(sock: socket.socket, timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        piece = sock.recv(65536)
        if not piece:
            break
        body += piece
    return status, headers, body


def _assert_413(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 413
    assert headers["content-type"].startswith("application/json")
    payload = json.loads(body)
    assert payload["error_type"] == "input_too_large"
    assert "RAGATTN_MAX_BODY_BYTES" in payload["message"]


def _request_head(port: int, extra: str) -> bytes:
    return (
        f"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def test_content_length_over_the_limit_is_refused_before_the_body(
    server: tuple[str, int],
) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_request_head(port, f"Content-Length: {PLANNED}\r\n"))
        # Not one body byte sent: the answer can only come from the announced length.
        _assert_413(*_read_response(sock))


def test_chunked_body_is_cut_off_at_the_limit(server: tuple[str, int]) -> None:
    url, port = server
    sent = 0
    answered_after: int | None = None
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_request_head(port, "Transfer-Encoding: chunked\r\n"))
        chunk = f"{CHUNK:x}\r\n".encode() + b"[" * CHUNK + b"\r\n"
        while sent < PLANNED:
            readable, _, _ = select.select([sock], [], [], 0.02)
            if readable:
                answered_after = sent
                break
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                answered_after = sent
                break
            sent += CHUNK
        assert answered_after is not None, "the server read the whole 20 MB body"
        status, headers, body = _read_response(sock)
    _assert_413(status, headers, body)
    # Refused soon after crossing the limit (socket buffers hold a few chunks), not at the end.
    assert LIMIT < answered_after < 4 * 1024 * 1024
    # The server is fine afterwards.
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_a_body_just_under_the_limit_is_served(server: tuple[str, int]) -> None:
    url, _ = server
    doc = "Paris is the capital of France. "
    body = {"query": "capital?", "documents": [doc] * ((LIMIT - 200) // (len(doc) + 3) // 8)}
    assert len(json.dumps(body)) < LIMIT
    resp = httpx.post(f"{url}/v2/rerank", json=body, timeout=120)
    assert resp.status_code == 200, resp.text
