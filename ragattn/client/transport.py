"""The client's settings, its error classes, its deadline and its retry rules.

Deadline: ``timeout_s`` bounds one call, from the first attempt to the last byte of the answer,
retries and the waits between them included; past it the call raises
:class:`ServiceTimeoutError`. httpx's own timeouts bound each network read, not the answer, so a
server sending one byte at a time would never trip them; :class:`Deadline` is checked around
them (:func:`read_blocking`, :func:`read_async`).

Retries: 429 and 503 answers and failed connections are retried up to ``max_retries`` times.
A ``Retry-After`` header is honoured exactly (never retried sooner); when it asks for longer than
``max_backoff_s``, or the wait would end past the deadline, the error is raised at once. Without
it the wait is an exponential backoff with jitter. Timeouts are not retried: the server may still
be computing, and a retry would double its load.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from ragattn._optional import require
from ragattn.errors import (
    InputTooLargeError,
    InvalidInputError,
    NotReadyError,
    OverloadedError,
    RagattnError,
    TokenizerError,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("ragattn.client")

RETRY_STATUSES = frozenset({429, 503})
"""Statuses that mean "try again later" in the service contract (both send ``Retry-After``)."""


class ServiceError(RagattnError):
    """The service answered with an error that has no more specific class (e.g. unauthorized)."""

    error_type = "service_error"


class ServiceConnectionError(ServiceError, ConnectionError):
    """The service could not be reached; check ``base_url`` and that the server is running."""

    error_type = "connection_error"


class ServiceTimeoutError(ServiceConnectionError, TimeoutError):
    """The service did not answer within ``timeout_s``; raise the timeout or send less work."""

    error_type = "timeout"


class InvalidResponseError(ServiceError):
    """The answer is not what a ragattn server sends; ``field`` names the part (its JSON path, e.g.
    ``results[0].index``; None for the whole body). Check that ``base_url`` is a ragattn server."""

    error_type = "invalid_response"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


_ERROR_CLASSES: dict[str, type[RagattnError]] = {
    "invalid_request": InvalidInputError,
    "input_too_large": InputTooLargeError,
    "tokenizer_error": TokenizerError,
    "overloaded": OverloadedError,
    "rate_limited": OverloadedError,
    "not_ready": NotReadyError,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Everything a client needs; shared so a sync client can build its async twin and back.

    Attributes:
        base_url: the service root, e.g. ``http://127.0.0.1:8080``.
        api_key: sent as ``Authorization: Bearer <key>``; masked in ``repr``.
        timeout_s: the deadline of one call in seconds: every attempt, the waits between them and
            reading the whole answer (model work included).
        connect_timeout_s: seconds to wait for a TCP connection (within ``timeout_s``).
        max_retries: retries after the first attempt on 429/503 and failed connections.
        backoff_s: first backoff wait in seconds when the server sends no ``Retry-After``.
        max_backoff_s: longest wait in seconds; a longer ``Retry-After`` is raised at once.
        compress_method: the service's compress method to ask for; None = the server default.
        rerank_path: ``/v2/rerank`` (Cohere v2), ``/v1/rerank`` or ``/rerank``; same answers.
    """

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    connect_timeout_s: float = 5.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    compress_method: str | None = None
    rerank_path: str = "/v2/rerank"

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidInputError(
                f"base_url must start with http:// or https://, got {self.base_url!r}"
            )
        if not (0 < self.timeout_s < math.inf and 0 < self.connect_timeout_s < math.inf):
            raise InvalidInputError(
                "timeout_s and connect_timeout_s must be positive, finite seconds"
            )
        if self.max_retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise InvalidInputError("max_retries, backoff_s and max_backoff_s must be >= 0")
        if self.rerank_path not in ("/v2/rerank", "/v1/rerank", "/rerank"):
            raise InvalidInputError("rerank_path must be '/v2/rerank', '/v1/rerank' or '/rerank'")

    def httpx_kwargs(self) -> dict[str, Any]:
        httpx = require("httpx", extra="client")
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return {
            "base_url": self.base_url.rstrip("/"),
            "headers": headers,
            "timeout": httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
        }


def malformed(what: str, *, field: str | None = None) -> InvalidResponseError:
    """The error for an answer that is not what a ragattn server sends; ``field`` is the JSON
    path of the part that is wrong (None: the whole body)."""
    where = f"{field}: {what}" if field is not None else what
    err = InvalidResponseError(
        f"the service sent a malformed response ({where}); is base_url a ragattn server?",
        field=field,
    )
    annotate(err, err.error_type, None, None)
    return err


def retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait per a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> RagattnError:
    """The typed error for a 4xx/5xx answer, carrying the server's ``error_type``."""
    error_type, message = None, None
    try:
        data = json.loads(body)
        error_type, message = str(data["error_type"]), str(data["message"])
    except (ValueError, KeyError, TypeError):
        pass
    if error_type is None or message is None:
        error_type = "http_error"
        message = f"HTTP {status} without a ragattn error body: {body[:200]!r}"
    err = _ERROR_CLASSES.get(error_type, ServiceError)(message)
    return annotate(err, error_type, status, retry_after_s(headers.get("retry-after")))


def annotate(
    err: RagattnError, error_type: str, status: int | None, retry_after: float | None
) -> RagattnError:
    """Attach the server's ``error_type``, ``status_code`` and ``retry_after_s`` to ``err``."""
    err.error_type = error_type
    # Every client error carries these; RagattnError itself does not declare them.
    err.status_code = status  # type: ignore[attr-defined]
    err.retry_after_s = retry_after  # type: ignore[attr-defined]
    return err


def _timeout_error(config: ClientConfig, why: str) -> ServiceTimeoutError:
    err = ServiceTimeoutError(
        f"no complete answer from {config.base_url} within timeout_s={config.timeout_s} s "
        f"({why}); raise timeout_s or send fewer documents"
    )
    annotate(err, err.error_type, None, None)
    return err


def _transport_error(exc: Exception, config: ClientConfig) -> ServiceConnectionError:
    httpx = require("httpx", extra="client")
    if isinstance(exc, httpx.TimeoutException):
        return _timeout_error(config, type(exc).__name__)
    err = ServiceConnectionError(
        f"cannot reach {config.base_url} ({type(exc).__name__}: {exc}); is the server running?"
    )
    annotate(err, err.error_type, None, None)
    return err


def _retryable_transport(exc: Exception) -> bool:
    """Only failures where the request surely never reached the server are retried."""
    httpx = require("httpx", extra="client")
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def retry_delay(attempt: int, retry_after: float | None, config: ClientConfig) -> float | None:
    """Seconds to wait before retry number ``attempt + 1``; None = do not retry.

    ``Retry-After`` wins when present; otherwise ``backoff_s * 2**attempt`` with jitter in
    [50 %, 100 %] so clients refused together do not return together.
    """
    if attempt >= config.max_retries:
        return None
    if retry_after is not None:
        return retry_after if retry_after <= config.max_backoff_s else None
    base = min(config.backoff_s * 2**attempt, config.max_backoff_s)
    return base * (0.5 + random.random() / 2)


class Deadline:
    """The end of one call's ``timeout_s``, on the monotonic clock; started when the call is."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._end = time.monotonic() + config.timeout_s

    def remaining(self) -> float:
        """Seconds left, 0 once the deadline has passed."""
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> ServiceTimeoutError:
        """The error of a call whose deadline passed before its answer was read."""
        return _timeout_error(self.config, "the deadline passed")

    def attempt_timeout(self) -> httpx.Timeout:
        """httpx's timeouts for the next attempt, none longer than what is left, so an attempt
        on a silent server ends with the deadline.

        Raises:
            ServiceTimeoutError: nothing is left.
        """
        httpx = require("httpx", extra="client")
        left = self.remaining()
        if left <= 0:
            raise self.expired()
        return httpx.Timeout(left, connect=min(self.config.connect_timeout_s, left))


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer read to its last byte (``content`` decoded of any Content-Encoding)."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes


def read_blocking(
    http: httpx.Client, path: str, payload: Any, deadline: Deadline
) -> Reply | Exception:
    """POST ``payload`` and read the whole answer in a worker thread; wait for it until the
    deadline.

    A blocking read cannot be bounded from its own thread (httpx bounds each socket read, and a
    server sending a byte at a time never trips that), so a worker reads and this thread waits.
    Told to stop, the worker closes the stream at its next chunk; a server trickling its headers
    keeps it until they end or one read times out (each is bounded by the time that was left).

    Returns:
        The reply, or the httpx error that took its place (for :func:`outcome`).

    Raises:
        ServiceTimeoutError: the deadline passed first.
    """
    httpx = require("httpx", extra="client")
    timeout = deadline.attempt_timeout()
    done: list[Reply | Exception] = []
    stop = threading.Event()

    def read() -> None:
        try:
            with http.stream("POST", path, json=payload, timeout=timeout) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    if stop.is_set():
                        return  # the caller has given up; leaving closes the stream
                    chunks.append(chunk)
                done.append(Reply(response.status_code, response.headers, b"".join(chunks)))
        except Exception as exc:  # handed to the waiting thread, which raises or retries it
            done.append(exc)

    # The context is copied so that tracing and logging context reach the worker's httpx calls.
    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(read,), name="ragattn-client", daemon=True
    )
    worker.start()
    worker.join(min(deadline.remaining(), threading.TIMEOUT_MAX))
    if not done:
        stop.set()
        raise deadline.expired()
    answer = done[0]
    if isinstance(answer, Reply | httpx.HTTPError):
        return answer
    raise answer


async def read_async(
    http: httpx.AsyncClient, path: str, payload: Any, deadline: Deadline
) -> Reply | Exception:
    """POST ``payload`` and read the whole answer, cancelled at the deadline.

    Returns:
        The reply, or the httpx error that took its place (for :func:`outcome`).

    Raises:
        ServiceTimeoutError: the deadline passed first.
    """
    httpx = require("httpx", extra="client")
    timeout = deadline.attempt_timeout()
    try:
        response = await asyncio.wait_for(
            http.post(path, json=payload, timeout=timeout), deadline.remaining()
        )
    except asyncio.TimeoutError:
        raise deadline.expired() from None
    except httpx.HTTPError as exc:
        return exc
    return Reply(response.status_code, response.headers, response.content)


def outcome(
    attempt: int, answer: Reply | Exception, deadline: Deadline
) -> tuple[Any, float | None]:
    """What one attempt came to: ``(body, None)`` for a success, ``(None, seconds)`` to wait
    before the next attempt; raises what is not retried (as one of our errors), and what could
    only be retried after the deadline.

    Args:
        attempt: how many attempts came before this one.
        answer: the reply, or the transport failure that took its place.
        deadline: the call's deadline (its ``config`` holds the retry settings).
    """
    config = deadline.config
    if isinstance(answer, Exception):
        delay = retry_delay(attempt, None, config) if _retryable_transport(answer) else None
        if delay is None or delay >= deadline.remaining():
            raise _transport_error(answer, config) from answer
        logger.info("ragattn service unreachable; retry %d in %.2f s", attempt + 1, delay)
        return None, delay
    status = answer.status_code
    if status < 400:
        try:
            return json.loads(answer.content), None
        except ValueError as exc:
            raise malformed("the body is not JSON") from exc
    error = error_from_response(status, answer.headers, answer.content)
    retry_after = getattr(error, "retry_after_s", None)
    delay = retry_delay(attempt, retry_after, config) if status in RETRY_STATUSES else None
    if delay is None or delay >= deadline.remaining():
        raise error
    logger.info(
        "ragattn service busy (%s); retry %d in %.2f s", error.error_type, attempt + 1, delay
    )
    return None, delay


__all__ = [
    "RETRY_STATUSES",
    "ClientConfig",
    "Deadline",
    "InvalidResponseError",
    "Reply",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceTimeoutError",
    "annotate",
    "error_from_response",
    "malformed",
    "outcome",
    "read_async",
    "read_blocking",
    "retry_after_s",
    "retry_delay",
]
