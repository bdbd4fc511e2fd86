"""Cooperative cancellation of model work: a token checked at window, chunk and layer boundaries.

A forward pass cannot be interrupted from outside, and a thread cannot be killed, so work that
nobody waits for any more (client gone, deadline passed, server shutting down) stops itself: the
caller runs it inside :func:`cancel_scope` with a :class:`CancelToken`, and the library calls
:func:`check_cancelled` between units of work (before each decoder layer, each listwise window,
each compression chunk). A cancelled token makes the next check raise
:class:`~ragattn.errors.WorkCancelledError`, which frees the thread within one boundary.

The token travels in a context variable, so library signatures stay unchanged and code that runs
outside any scope (scripts, notebooks) pays one lookup per boundary and is never cancelled.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ragattn.errors import WorkCancelledError

DEADLINE = "deadline"
"""The reason of a token whose deadline passed."""


class CancelToken:
    """Says whether a unit of work should stop; thread-safe, cancelled at most once.

    Args:
        deadline: a ``time.monotonic()`` instant after which the work counts as cancelled
            (reason :data:`DEADLINE`); ``None`` for none.
    """

    __slots__ = ("_event", "_reason", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self._event = threading.Event()
        self._reason = ""

    def cancel(self, reason: str) -> None:
        """Ask the work to stop at its next boundary; the first reason given is kept."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    @property
    def reason(self) -> str | None:
        """Why the work should stop, or ``None`` while it may go on."""
        if self._event.is_set():
            return self._reason
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return DEADLINE
        return None

    def check(self) -> None:
        """Raise :class:`WorkCancelledError` if the work should stop."""
        reason = self.reason
        if reason is not None:
            raise WorkCancelledError(f"the work was stopped ({reason})", reason=reason)


_CURRENT: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar(
    "ragattn_cancel", default=None
)


@contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Run the block with ``token`` as the one :func:`check_cancelled` consults."""
    previous = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(previous)


def check_cancelled() -> None:
    """A boundary: raise :class:`WorkCancelledError` if the current work was cancelled."""
    token = _CURRENT.get()
    if token is not None:
        token.check()


__all__ = ["DEADLINE", "CancelToken", "cancel_scope", "check_cancelled"]
