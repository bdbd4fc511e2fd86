"""Fixtures for the hardening tests: the production server config on loopback, raw sockets, and
server subprocesses.

``production_server`` runs an app under :func:`ragattn_api.server.build_server` (the ``serve``
command's
uvicorn config: forwarded headers only from trusted proxies, the header cap, JSON errors for bad
HTTP, drain on shutdown) in a thread; ``spawn_server`` starts ``python -m ragattn_api.server`` as a
subprocess for the tests that need signals or two processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragattn.settings import Settings
from ragattn_api.server import build_server


@dataclass
class Live:
    """A running server: its base URL and port."""

    url: str
    port: int


@contextmanager
def _production(app: Any, settings: Settings) -> Iterator[Live]:
    _, server = build_server(settings, app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.run, name="prod-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    port = int(server.servers[0].sockets[0].getsockname()[1])
    try:
        yield Live(url=f"http://127.0.0.1:{port}", port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@pytest.fixture(scope="session")
def production_server(reranker: Any, compressor: Any) -> Callable[..., Any]:
    """``with production_server(**settings) as live:`` the app on the production server config.

    Engines are the session's (already loaded); ``reranker=`` swaps in a test double and
    ``compressor=`` another compressor.
    """
    from ragattn_api import create_app

    @contextmanager
    def start(**overrides: Any) -> Iterator[Live]:
        rr = overrides.pop("reranker", reranker)
        cp = overrides.pop("compressor", compressor)
        settings = Settings(**overrides)
        app = create_app(settings, reranker=rr, compressor=cp)
        with _production(app, settings) as live:
            yield live

    return start


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool
    """The server closed the connection after the response."""

    def json(self) -> Any:
        import json

        return json.loads(self.body)


def read_response(sock: socket.socket, timeout: float = 30.0) -> RawResponse:
    """Read one HTTP/1.1 response (Content-Length framed) and whether the server then closed."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            raise ConnectionError(f"closed before a response: {data!r}")
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
    try:
        # A server that announced the close closes at once; a kept-alive connection stays open,
        # so waiting long for it would only cost time (half a second covers a close not
        # announced, which the server makes right after the response).
        sock.settimeout(5.0 if headers.get("connection", "").lower() == "close" else 0.5)
        closed = sock.recv(1) == b""
    except TimeoutError:
        closed = False
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    return RawResponse(status=status, headers=headers, body=body[:length], closed=closed)


def request_head(port: int, method: str, path: str, extra: str = "") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n".encode()


@dataclass
class Spawned:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def spawn_server(tmp_path: Path, free_port: Callable[[], int]) -> Iterator[Callable[..., Spawned]]:
    """``spawn_server(**env)``: ``python -m ragattn_api.server`` with ``RAGATTN_*`` from ``env``,
    started and ready (``/ready`` 200); every one is killed after the test if it still runs."""
    started: list[Spawned] = []

    def start(name: str = "server", ready: bool = True, **env: str) -> Spawned:
        port = free_port()
        log = tmp_path / f"{name}.log"
        environ = {
            **os.environ,
            "RAGATTN_HOST": "127.0.0.1",
            "RAGATTN_PORT": str(port),
            "RAGATTN_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "RAGATTN_LOG_LEVEL": "INFO",
            **{f"RAGATTN_{k.upper()}": v for k, v in env.items()},
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ragattn_api.server"], env=environ, stdout=out, stderr=out
            )
        spawned = Spawned(proc=proc, url=f"http://127.0.0.1:{port}", port=port, log=log)
        started.append(spawned)
        if ready:
            wait_ready(spawned)
        return spawned

    try:
        yield start
    finally:
        for spawned in started:
            if spawned.proc.poll() is None:
                spawned.proc.send_signal(signal.SIGKILL)
                spawned.proc.wait(timeout=30)


def wait_ready(spawned: Spawned, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=spawned.url, timeout=10) as c:
        while True:
            assert spawned.proc.poll() is None, spawned.text()
            assert time.monotonic() < deadline, spawned.text()
            try:
                if c.get("/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)


class RawHTTP:
    """Raw-socket HTTP/1.1 for requests a client library would refuse or normalise."""

    read = staticmethod(read_response)

    @staticmethod
    def head(port: int, method: str, path: str, extra: str = "") -> bytes:
        return request_head(port, method, path, extra)

    @staticmethod
    def connect(port: int) -> socket.socket:
        return socket.create_connection(("127.0.0.1", port), timeout=30)

    def exchange(self, port: int, data: bytes, timeout: float = 30.0) -> RawResponse:
        """Send ``data`` on a fresh connection and read one response."""
        with self.connect(port) as sock:
            sock.sendall(data)
            return self.read(sock, timeout)


@pytest.fixture
def raw_http() -> RawHTTP:
    return RawHTTP()
