"""Issue "Hardening, round six" §4: a replica's early 415 or 429 reaches the client through nginx.

A replica refuses some requests before it reads their body: a wrong ``Content-Type`` (415, the
JSON guard) or a client over its rate limit (429). It used to answer with ``Connection: close``
and close the socket with the body still unread, and the kernel then reset the connection (a TCP
RST, since unread data was pending): nginx, still sending a body of about 10 MB, lost the answer
with the connection and gave the client a 502 in 8 of 12 tries. Now a replica that refuses a body
of at most ``RAGATTN_MAX_BODY_BYTES`` reads (and discards) the rest of it within the body deadline
before it answers, and keeps the connection.

Here the distribution's nginx runs the shipped ``deploy/nginx.conf`` (round five's fixture and
loopback rendering) in front of two real replicas on one real Redis (the rate limit is shared
through it): twelve bodies of 9.5 MB with the wrong type all get the replica's JSON 415, twelve
from a client over its limit all get its JSON 429. A direct test on one server shows the
mechanism: the refused body is read to its end and the connection serves the next request.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

_ROUND5 = Path(__file__).with_name("test_round5_nginx.py")
_spec = importlib.util.spec_from_file_location("round5_nginx_fixture", _ROUND5)
assert _spec is not None and _spec.loader is not None
_round5 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_round5)
nginx = _round5.nginx
"""Round five's fixture: the distribution's nginx running the rendered shipped file."""

TRIES = 12
SIZE = 9_500_000
"""Under the 10 MB cap that nginx and the replica share: the body reaches a replica."""
KEYS = [f"round-six-{i}" for i in range(TRIES)]
LIMITED = "round-six-limited"


def _body(size: int) -> bytes:
    filler = "x" * (size - 64)
    return f'{{"query": "q", "documents": ["{filler}"]}}'.encode()


def _post(url: str, body: bytes, *, key: str, content_type: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": content_type}
    return httpx.post(f"{url}/v2/rerank", content=body, headers=headers, timeout=120)


def _status(resp: httpx.Response, error_type: str) -> int:
    """The status, after checking that a refusal is the replica's JSON (not nginx's page)."""
    if resp.status_code < 500:
        assert resp.headers["content-type"].startswith("application/json"), resp.text[:200]
        assert resp.json()["error_type"] == error_type, resp.text[:200]
    return resp.status_code


@pytest.mark.redis
@pytest.mark.slow
def test_early_refusals_of_large_bodies_reach_the_client_through_nginx(
    spawn_server: Callable[..., Any],
    redis_server: Callable[[], Any],
    nginx: Callable[[list[int]], str],
) -> None:
    redis = redis_server()
    common = {
        "cache_backend": "redis",
        "redis_url": redis.url,
        "api_keys": ",".join([*KEYS, LIMITED]),
        "trusted_proxies": "127.0.0.1",
        # One request a minute per key, shared by both replicas through Redis.
        "rate_limit_per_minute": "1",
        "tokens_per_second": "1000",  # no start-up measurement: the test is about bodies
    }
    replicas = [spawn_server(name=f"replica-{n}", **common) for n in "ab"]
    url = nginx([r.port for r in replicas])
    body = _body(SIZE)

    # Each key's one request of the minute passes the rate limit; the JSON guard refuses it.
    wrong_type = [
        _status(_post(url, body, key=key, content_type="text/plain"), "unsupported_media_type")
        for key in KEYS
    ]
    assert wrong_type == [415] * TRIES

    # The limited key spends its one request, then every large body is over the limit.
    first = _post(url, b"{}", key=LIMITED, content_type="text/plain")
    assert first.status_code == 415, first.text
    limited = [
        _status(_post(url, body, key=LIMITED, content_type="application/json"), "rate_limited")
        for _ in range(TRIES)
    ]
    assert limited == [429] * TRIES


def _response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One Content-Length framed response: status, headers (lower-case names), body. Unlike
    ``raw_http.read`` it does not wait to see whether the server closes afterwards (that wait
    outlasts uvicorn's keep-alive timeout)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, f"closed before a response: {data!r}"
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        piece = sock.recv(65536)
        assert piece, "closed inside a response"
        body += piece
    return int(lines[0].split()[1]), headers, body


@pytest.mark.slow
def test_a_refused_body_is_read_and_the_connection_kept(
    production_server: Callable[..., Any], raw_http: Any
) -> None:
    body = _body(2_000_000)
    with production_server() as live, raw_http.connect(live.port) as sock:
        head = raw_http.head(
            live.port,
            "POST",
            "/v2/rerank",
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n",
        )
        sock.sendall(head + body)
        status, headers, refused = _response(sock)
        assert status == 415, refused
        assert headers.get("connection") != "close", headers
        # The same connection then serves the next request: the refused body was read to its
        # end, not closed on unread (a reset) nor taken for the next request's head.
        sock.sendall(raw_http.head(live.port, "GET", "/health"))
        status, _, health = _response(sock)
        assert status == 200, health
        assert json.loads(health)["status"] == "ok"
