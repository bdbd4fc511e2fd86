"""Model work off the event loop: one worker thread behind a bounded queue, with request coalescing.

The proxy forward pass is CPU-bound and already uses torch's intra-op threads, so one model thread
is the right width; a second would only contend for the same cores. ``max_pending`` bounds jobs
waiting or running; one more raises :class:`QueueFullError` (429 with Retry-After). Identical
concurrent requests (same cache key) share one computation.

Work nobody waits for is dropped, not computed: a job whose every waiter went away (client
disconnected, request deadline passed) is cancelled while it is still queued, and a job whose
deadline has passed when the model thread reaches it is skipped. A job already running stops
cooperatively: it runs under a :class:`~ragattn.cancel.CancelToken` (carrying its deadline) that is
cancelled when its waiter goes away or the worker closes, and the library checks it before each
decoder layer, window and chunk, so the thread is free again within one boundary.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragattn.cancel import DEADLINE, CancelToken, cancel_scope
from ragattn.errors import WorkCancelledError
from ragattn_api.errors import DeadlineExceededError, QueueFullError, ShuttingDownError

logger = logging.getLogger(__name__)
T = TypeVar("T")
_SHUTDOWN = "shutdown"


class _Shared:
    """One in-flight computation and the number of requests awaiting it."""

    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Future[Any]) -> None:
        self.task = task
        self.waiters = 0


class ModelWorker:
    """Runs blocking model calls on one thread; at most ``max_pending`` jobs queued or running.

    The service has two: the model worker, and a tokenizer worker (``name="ragattn-tokens"``)
    that checks token limits, so an oversized input is refused without waiting for the model.
    """

    def __init__(
        self,
        *,
        max_pending: int,
        observe: Callable[[str, float], None] | None = None,
        name: str = "ragattn-model",
    ) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.max_pending = max_pending
        self._observe = observe
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._pending = 0
        self._inflight: dict[str, _Shared] = {}
        self.coalesced = 0
        self.rejected = 0
        self.dropped = 0
        """Jobs never computed: cancelled while queued, or past their deadline when reached."""
        self.cancelled = 0
        """Jobs stopped while running (waiter gone, deadline passed or shutdown)."""
        self._tokens: set[CancelToken] = set()
        self._closing = False

    @property
    def depth(self) -> int:
        """Jobs queued or running now."""
        return self._pending

    def _release(self, token: CancelToken, future: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1
            self._tokens.discard(token)
            if future.cancelled():
                self.dropped += 1

    def _timed(self, task: str, fn: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return fn()
        finally:
            if self._observe is not None:
                self._observe(task, time.perf_counter() - started)

    def _checked(self, task: str, fn: Callable[[], T], token: CancelToken) -> T:
        deadline = token.deadline
        if deadline is not None and time.monotonic() >= deadline:
            with self._lock:
                self.dropped += 1
            raise DeadlineExceededError(
                "the request deadline passed before the model reached it "
                "(RAGATTN_REQUEST_TIMEOUT_S); retry later"
            )
        try:
            with cancel_scope(token):
                return self._timed(task, fn)
        except WorkCancelledError as exc:
            with self._lock:
                self.cancelled += 1
            logger.info("%s job stopped at a boundary (%s)", task, exc.reason)
            if exc.reason == DEADLINE:
                raise DeadlineExceededError(
                    "the request deadline passed while the model worked on it "
                    "(RAGATTN_REQUEST_TIMEOUT_S); retry later or send less work"
                ) from exc
            if exc.reason == _SHUTDOWN:
                raise ShuttingDownError(
                    "the server shut down before this request finished; retry it"
                ) from exc
            raise

    async def run(
        self,
        task: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        deadline: float | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` on the model thread; ``task`` labels its timing.

        ``deadline`` is a ``time.monotonic()`` instant: a job the thread reaches later is skipped,
        one still running then stops at its next boundary, both with
        :class:`DeadlineExceededError`. Cancelling the caller cancels a job still queued and stops
        a running one at its next boundary.
        """
        token = CancelToken(deadline)
        with self._lock:
            self._refuse_if_full()
            self._pending += 1
            self._tokens.add(token)
        call = functools.partial(self._checked, task, functools.partial(fn, *args, **kwargs), token)
        try:
            cf = self._executor.submit(call)
        except RuntimeError:
            with self._lock:
                self._pending -= 1
                self._tokens.discard(token)
            raise
        # The slot is freed when the thread finishes, even if the awaiting client went away.
        cf.add_done_callback(functools.partial(self._release, token))
        try:
            return await asyncio.wrap_future(cf)
        except asyncio.CancelledError:
            # Nobody waits for the answer: a queued job was cancelled with the wait; a running one
            # stops at its next layer, window or chunk boundary.
            token.cancel("abandoned")
            raise

    def _refuse_if_full(self) -> None:
        """Raise when no job can be admitted now (call with ``_lock`` held)."""
        if self._closing:
            raise ShuttingDownError("the server is shutting down; retry elsewhere")
        if self._pending >= self.max_pending:
            self.rejected += 1
            raise QueueFullError(
                f"the model queue is full ({self.max_pending} jobs); retry shortly",
                retry_after_s=max(1, self._pending // 4),
            )

    async def run_once(self, key: str, compute: Callable[[], Awaitable[T]]) -> T:
        """Await ``compute()`` unless an identical job (same ``key``) is already running; share it.

        A new job is refused with :class:`QueueFullError` when the queue is already full.

        The computation runs as its own task, so a caller that disconnects cancels only its wait;
        when the last waiter is gone the computation is cancelled too (a queued job is dropped).
        """
        shared = self._inflight.get(key)
        if shared is not None:
            self.coalesced += 1
        else:
            # A full queue refuses at once, before ``compute`` does any work of its own (the
            # tokenizer thread's limit check): an overload burst's refusals stay cheap.
            with self._lock:
                self._refuse_if_full()
            shared = _Shared(asyncio.ensure_future(compute()))
            self._inflight[key] = shared
            shared.task.add_done_callback(functools.partial(self._forget, key, shared))
        shared.waiters += 1
        try:
            return await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                # Nobody wants the answer any more; a newcomer with the same key starts afresh.
                if self._inflight.get(key) is shared:
                    del self._inflight[key]
                shared.task.cancel()

    def _forget(self, key: str, shared: _Shared, task: asyncio.Future[Any]) -> None:
        if self._inflight.get(key) is shared:
            del self._inflight[key]
        if not task.cancelled():
            # Retrieve it, so a failure nobody awaits any more is not logged as "never retrieved".
            task.exception()

    def close(self) -> None:
        """Stop: queued jobs are dropped, a running one stops at its next boundary."""
        with self._lock:
            self._closing = True
            running = list(self._tokens)
        for token in running:
            token.cancel(_SHUTDOWN)
        self._executor.shutdown(wait=True, cancel_futures=True)


__all__ = ["ModelWorker"]
