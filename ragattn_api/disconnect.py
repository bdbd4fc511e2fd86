"""Cancel a request's handler when its client disconnects, so abandoned model work is dropped.

ASGI servers do not cancel an application when the client goes away; a handler awaiting a queued
model job would keep its slot and have the job computed for nobody. After the request body has
been read, this middleware listens for ``http.disconnect`` and cancels the handler if no response
has started yet; the worker then cancels the queued job (see ``api.worker``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ragattn_api.logsafe import clean

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)


def cancel_on_disconnect(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: a client that hangs up before its response starts cancels the handler."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body_read = asyncio.Event()
        response_started = False

        async def tracked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                body_read.set()
            return message  # type: ignore[return-value]

        async def tracked_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        handler = asyncio.ensure_future(app(scope, tracked_receive, tracked_send))  # type: ignore[arg-type]

        async def watch() -> None:
            await body_read.wait()
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    if not response_started and not handler.done():
                        logger.info(
                            "client disconnected from %s; request cancelled", clean(scope["path"])
                        )
                        handler.cancel()
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            await handler
        except asyncio.CancelledError:
            if not handler.cancelled() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # we were cancelled ourselves (server shutdown), not by the watcher
            # The client is gone: nothing can be sent, nothing to report.
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    return middleware


__all__ = ["cancel_on_disconnect"]
