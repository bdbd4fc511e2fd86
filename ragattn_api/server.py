"""Running the service under uvicorn with the settings' network rules.

:func:`uvicorn_config` is the one place the server is configured (the ``serve`` command and the
live-server tests use it):

- forwarded headers (``X-Forwarded-For`` / ``-Proto``) are applied only for connections from
  ``RAGATTN_TRUSTED_PROXIES`` (uvicorn trusts loopback by default; here nobody, unless named);
- request headers are capped at ``RAGATTN_MAX_HEADER_BYTES`` while they are parsed (431);
- malformed HTTP is answered in the service's JSON error shape, not uvicorn's plain text;
- trailer fields (header lines after a chunked body's last chunk) are discarded: the parser
  reports them like header lines, and uvicorn would append them to the request's header list,
  where the app would read a trailer ``Authorization`` or ``Content-Type`` as if it were sent
  with the request (RFC 9110 section 6.5.1 lets a recipient discard trailers);
- on SIGTERM the app is told to drain (unfinished bodies are cut, ``/ready`` turns 503) before
  in-flight requests get ``RAGATTN_SHUTDOWN_GRACE_S`` to finish.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import uvicorn
from litestar import Litestar
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ragattn.settings import Settings

_REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}


def _error_response(status: int, error_type: str, message: str) -> bytes:
    body = json.dumps({"error_type": error_type, "message": message}).encode()
    return b"".join(
        [
            b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status]),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-content-type-options: nosniff\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
    )


class _HeaderCapExceeded(Exception):
    pass


class JsonErrorsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header-size cap, JSON errors for malformed HTTP, and
    chunked-body trailers discarded."""

    max_header_bytes = 16_384
    _headers_done = False

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._headers_too_large = False
        self._headers_done = False

    def on_headers_complete(self) -> None:
        # From here on the parser's header callbacks are a chunked body's trailer fields; the
        # request's scope already holds (and shares) the header list they would be appended to.
        self._headers_done = True
        super().on_headers_complete()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._headers_done:
            return  # a trailer field: never one of the request's headers
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > self.max_header_bytes:
            self._headers_too_large = True
            raise _HeaderCapExceeded  # httptools turns it into a parser error: send_400_response
        super().on_header(name, value)

    def on_url(self, url: bytes) -> None:
        self._header_bytes = getattr(self, "_header_bytes", 0) + len(url)
        super().on_url(url)

    def send_400_response(self, msg: str) -> None:
        if getattr(self, "_headers_too_large", False):
            out = _error_response(
                431,
                "headers_too_large",
                f"request headers are over {self.max_header_bytes} bytes "
                "(RAGATTN_MAX_HEADER_BYTES)",
            )
        else:
            out = _error_response(400, "invalid_request", "malformed HTTP request")
        self.transport.write(out)
        self.transport.close()


def protocol_class(settings: Settings) -> type[JsonErrorsHttpToolsProtocol]:
    """The protocol class with this server's header cap."""
    return type(
        "RagattnHttpProtocol",
        (JsonErrorsHttpToolsProtocol,),
        {"max_header_bytes": settings.max_header_bytes},
    )


class Server(uvicorn.Server):
    """uvicorn's server that tells the app to drain before waiting out the grace period."""

    def __init__(self, config: uvicorn.Config, app: Litestar) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        drain = self._app.state.get("drain")
        if drain is not None:
            drain.start()
        await super().shutdown(sockets)


def uvicorn_config(
    app: Litestar, settings: Settings, *, host: str | None = None, port: int | None = None
) -> uvicorn.Config:
    """The uvicorn config for ``app`` under ``settings`` (``port=0``: any free port)."""
    trusted = list(settings.trusted_proxies)
    return uvicorn.Config(
        app,
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        http=protocol_class(settings),
        # Forwarded headers only from the configured proxies; by default from nobody.
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or "",
        server_header=False,
        # On SIGTERM in-flight requests get this long to finish before the lifespan closes.
        # uvicorn annotates it as int but waits with asyncio.wait_for, which takes a float.
        timeout_graceful_shutdown=settings.shutdown_grace_s or None,  # type: ignore[arg-type]
    )


def build_server(
    settings: Settings, app: Litestar | None = None, **overrides: Any
) -> tuple[Litestar, Server]:
    """The app (built from ``settings`` unless given) and a :class:`Server` ready to ``run()``.

    A model that fails to load in the background stops the server (``app.state.load_error``).
    """
    from ragattn_api.app import create_app

    app = app if app is not None else create_app(settings)
    server = Server(uvicorn_config(app, settings, **overrides), app)
    app.state.on_load_failure = lambda: setattr(server, "should_exit", True)
    return app, server


def serve(settings: Settings) -> BaseException | None:
    """Run the service until SIGTERM/SIGINT; returns the load error if the model failed to load."""
    from ragattn.memory import tune_malloc

    tune_malloc()  # before the model loads: keeps the resident set near the weights' size
    # One process: the proxy is loaded once and the worker queue, cache and rate limits are shared.
    app, server = build_server(settings)
    server.run()
    error: BaseException | None = app.state.load_error
    return error


def main() -> int:
    """``python -m api.server``: serve with ``RAGATTN_*`` settings (tests and containers)."""
    import sys

    from ragattn.errors import ConfigError

    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    error = serve(settings)
    if error is not None:
        print(f"error: the model failed to load: {error}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "JsonErrorsHttpToolsProtocol",
    "Server",
    "build_server",
    "main",
    "serve",
    "uvicorn_config",
]

if __name__ == "__main__":
    raise SystemExit(main())
