"""The connection edge: header cap, body-read deadline, hang-ups, shutdown, and response headers.

What a route handler never sees and every request needs:

- headers larger than ``RAGATTN_MAX_HEADER_BYTES`` are a 431 before any guard reads them;
- the body must arrive within ``RAGATTN_BODY_TIMEOUT_S`` of the request's start: a client that
  announces more than it sends, never ends a chunked body or sends headers only gets a 408 and
  its connection is closed, instead of holding a connection (and a graceful shutdown) forever;
- a client that hangs up while sending its body is a 499, logged in one line, not a 500 with a
  traceback;
- once the server is draining (SIGTERM), unfinished bodies are cut with a 503 ``shutting_down``,
  and requests still running when the grace period ends answer the same 503 in the error shape
  instead of the server's plain-text 500;
- a request with more than one ``Authorization`` header is a 400 (which one would decide is not
  something two components should disagree on);
- a response decided before the body was read (401, 415, 429: the guards read headers only)
  waits until the rest of the body has arrived and is discarded, when it is at most
  ``RAGATTN_MAX_BODY_BYTES`` in all and arrives within the body deadline; the connection then
  stays open. Closing it with the body unread made the kernel reset the connection (unread data
  pending), and a proxy still sending the body (nginx, ``deploy/nginx.conf``) lost the answer with
  it: its client got a 502 instead of the 415 or 429;
- every response carries ``X-Content-Type-Options: nosniff``, and one whose request body was not
  read to its end (too large to discard, too slow, a shutdown) carries ``Connection: close`` (the
  rest of that body cannot be trusted to come); the OpenAPI pages under ``/schema`` also get a
  Content-Security-Policy and ``X-Frame-Options: DENY``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ragattn.errors import InvalidInputError
from ragattn_api.errors import (
    ClientDisconnectedError,
    HeadersTooLargeError,
    RequestTimeoutError,
    ShuttingDownError,
)
from ragattn_api.logsafe import clean
from ragattn_api.openapi import DOCS_CONTENT_SECURITY_POLICY, DOCS_PATH

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

_BODY_DONE = "ragattn.body_done"


class Drain:
    """Set when the server starts shutting down; body reads in progress stop waiting then."""

    def __init__(self) -> None:
        self._started = False
        self._future: asyncio.Future[None] | None = None

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Begin draining (called by :class:`api.server.Server` on SIGTERM, on the loop)."""
        self._started = True
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def future(self) -> asyncio.Future[None]:
        """A future done once draining has started (one per loop, shared by all waiters)."""
        loop = asyncio.get_running_loop()
        if self._future is None or self._future.get_loop() is not loop:
            self._future = loop.create_future()
            if self._started:
                self._future.set_result(None)
        return self._future


def _announces_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


def _announced_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` in bytes (None: chunked, absent or not a number)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.strip()
            return int(text) if text.isdigit() else None
    return None


async def add_response_headers(message: Message, scope: Scope) -> None:
    """``before_send`` hook: nosniff on every response, CSP and X-Frame-Options on the docs pages;
    close a connection whose body is unread."""
    if message["type"] != "http.response.start":
        return
    headers = list(message.get("headers") or [])
    names = {name.lower() for name, _ in headers}
    if b"x-content-type-options" not in names:
        headers.append((b"x-content-type-options", b"nosniff"))
    if scope.get("path", "").startswith(DOCS_PATH) and b"content-security-policy" not in names:
        headers.append((b"content-security-policy", DOCS_CONTENT_SECURITY_POLICY.encode()))
        headers.append((b"x-frame-options", b"DENY"))
    body_done = scope.get("state", {}).get(_BODY_DONE, False)
    if not body_done and b"connection" not in names and _announces_body(scope):
        headers.append((b"connection", b"close"))
    message["headers"] = headers


def _error_bytes(error_type: str, message: str) -> bytes:
    import json

    return json.dumps({"error_type": error_type, "message": message}).encode()


async def _send_shutdown(send: Send) -> None:
    body = _error_bytes(
        ShuttingDownError.error_type,
        "the server shut down before this request finished; retry it",
    )
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


def edge_middleware(
    app: ASGIApp,
    *,
    max_header_bytes: int,
    body_timeout_s: float,
    drain: Drain,
    max_body_bytes: int,
) -> ASGIApp:
    """ASGI middleware for the rules in this module's docstring.

    Args:
        max_header_bytes: the header cap (``RAGATTN_MAX_HEADER_BYTES``), bytes.
        body_timeout_s: seconds from the request's start within which its body must arrive
            (0: no deadline).
        drain: set when the server shuts down.
        max_body_bytes: the body cap (``RAGATTN_MAX_BODY_BYTES``): the most bytes of a refused
            body read and discarded before the refusal is sent; a larger one closes instead.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        headers = scope.get("headers", ())
        size = sum(len(k) + len(v) for k, v in headers)
        if size > max_header_bytes:
            raise HeadersTooLargeError(
                f"request headers are {size} bytes; the limit is {max_header_bytes} "
                "(RAGATTN_MAX_HEADER_BYTES)"
            )
        authorizations = sum(1 for name, _ in headers if name.lower() == b"authorization")
        if authorizations > 1:
            # Which one decides would depend on the component reading it (proxy, guard, logs).
            raise InvalidInputError(
                f"the request has {authorizations} Authorization headers; send exactly one"
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + body_timeout_s if body_timeout_s > 0 else None
        if not _announces_body(scope):
            state[_BODY_DONE] = True
        started = False

        received = 0

        async def guarded_receive() -> Message:
            nonlocal received
            if state.get(_BODY_DONE):
                return await receive()  # type: ignore[return-value]
            message = await _receive_body(receive, deadline, drain, loop)
            if message["type"] == "http.disconnect":
                logger.info("client hung up while sending its body to %s", clean(scope["path"]))
                raise ClientDisconnectedError("the client closed the connection")
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                state[_BODY_DONE] = True
            return message

        async def discard_rest() -> None:
            """Read the unread rest of the body, within the body cap and deadline; on success
            the body is done and the connection stays open."""
            announced = _announced_length(scope)
            if announced is not None and announced > max_body_bytes:
                return
            try:
                while not state.get(_BODY_DONE) and received <= max_body_bytes:
                    await guarded_receive()
            except (ClientDisconnectedError, RequestTimeoutError, ShuttingDownError):
                return  # the connection closes (Connection: close) with the rest unread

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if not state.get(_BODY_DONE):
                    await discard_rest()
            await send(message)

        try:
            await app(scope, guarded_receive, tracked_send)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            # Only the server cancels a request task: its graceful-shutdown period is over.
            if started:
                raise
            logger.warning("request to %s cut off by shutdown", clean(scope["path"]))
            await _send_shutdown(send)

    return middleware


async def _receive_body(
    receive: Receive, deadline: float | None, drain: Drain, loop: asyncio.AbstractEventLoop
) -> Any:
    pending: asyncio.Future[Any] = asyncio.ensure_future(receive())
    stop: asyncio.Future[Any] = drain.future()
    timeout = None if deadline is None else max(0.0, deadline - loop.time())
    done, _ = await asyncio.wait({pending, stop}, timeout=timeout, return_when="FIRST_COMPLETED")
    if pending in done:
        return pending.result()
    pending.cancel()
    if stop in done:
        raise ShuttingDownError("the server is shutting down; send the request again elsewhere")
    raise RequestTimeoutError(
        "the request body did not arrive in time (RAGATTN_BODY_TIMEOUT_S); the connection is closed"
    )


__all__ = ["Drain", "add_response_headers", "edge_middleware"]
