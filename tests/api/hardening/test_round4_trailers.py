"""Issue 45 §1: header lines sent after a chunked body (trailer fields) are never request headers.

httptools reports a chunked body's trailer fields through the same callback as header lines, and
uvicorn appended them to the header list the request's scope already shares, so a trailer
``Authorization`` authenticated a request that sent none (200, expected 401), a trailer
``Content-Type`` declared a body sent without one (accepted, expected 415), and a trailer second
``Authorization`` turned a valid request into a 400. The server's protocol
(:class:`ragattn_api.server.JsonErrorsHttpToolsProtocol`, the one ``ragattn serve`` runs) now
discards trailers. Raw chunked requests over a socket to that server, on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.slow

KEY = "trailer-key-1"
BODY = json.dumps({"query": "capital of France", "documents": ["Paris.", "Bananas."]}).encode()


def _chunked(port: int, headers: str, trailers: str, body: bytes = BODY) -> bytes:
    """A chunked ``POST /v2/rerank``: ``headers`` before the body, ``trailers`` after its last
    chunk (each ``Name: value\\r\\n``)."""
    head = (
        f"POST /v2/rerank HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Transfer-Encoding: chunked\r\n{headers}\r\n"
    ).encode()
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]))
    return head + chunks + b"0\r\n" + trailers.encode() + b"\r\n"


def test_trailer_fields_never_reach_the_request_headers(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    auth = f"Authorization: Bearer {KEY}\r\n"
    json_type = "Content-Type: application/json\r\n"
    with production_server(api_keys=(KEY,), cache_backend="none") as live:
        port = live.port
        cases = [
            # (headers, trailers, status, error_type)
            ("", auth, 401, "unauthorized"),  # a trailer key authenticates nothing
            (json_type, auth, 401, "unauthorized"),
            (auth, json_type, 415, "unsupported_media_type"),  # declared after the body
            (auth + json_type, "Authorization: Bearer someone-else\r\n", 200, None),
            (auth + json_type, auth, 200, None),  # a trailer copy is not a second header
            (auth + json_type, "Content-Type: text/plain\r\n", 200, None),
            (auth + json_type, "Content-Encoding: gzip\r\nX-Extra: 1\r\n", 200, None),
            (auth + json_type, "", 200, None),  # the control: chunked without trailers
        ]
        for headers, trailers, status, error_type in cases:
            resp = raw_http.exchange(port, _chunked(port, headers, trailers))
            assert resp.status == status, (headers, trailers, resp.body[:300])
            if error_type is None:
                assert [r["index"] for r in resp.json()["results"]] == [0, 1]
            else:
                assert resp.json()["error_type"] == error_type
        # Many or long trailer lines change nothing either (they are discarded unread).
        many = "".join(f"X-Trailer-{i}: {'v' * 100}\r\n" for i in range(200))
        resp = raw_http.exchange(port, _chunked(port, auth + json_type, many))
        assert resp.status == 200, resp.body[:300]
        # Keep-alive: the request after one with trailers, on the same connection, sees only
        # its own headers (the protocol's state is reset per message).
        with raw_http.connect(port) as sock, sock.makefile("rb") as stream:
            sock.sendall(_chunked(port, auth + json_type, "Authorization: Bearer x\r\n"))
            assert _read_one(stream)[0] == 200
            sock.sendall(_chunked(port, json_type, auth))
            status, body = _read_one(stream)
            assert status == 401, body[:300]


def _read_one(stream: Any) -> tuple[int, bytes]:
    """One Content-Length framed response from a buffered socket stream, leaving the connection
    open for the next request."""
    status = int(stream.readline().split()[1])
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return status, stream.read(length)
