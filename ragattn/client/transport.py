"""The client's settings, its error classes and its retry rules.

Retries: 429 and 503 answers and failed connections are retried up to ``max_retries`` times.
A ``Retry-After`` header is honoured exactly (never retried sooner); when it asks for longer than
``max_backoff_s`` the error is raised at once. Without it the wait is an exponential backoff with
jitter. Read timeouts are not retried: the server may still be computing, and a retry would
double its load.
"""

from __future__ import annotations

import json
import logging
import math
import random
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
        timeout_s: seconds to wait for a whole answer (model work included).
        connect_timeout_s: seconds to wait for a TCP connection.
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
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise InvalidInputError("timeout_s and connect_timeout_s must be positive seconds")
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


def malformed(what: str) -> RagattnError:
    """The error for an answer that is not what a ragattn server sends."""
    err = ServiceError(
        f"the service sent a malformed response ({what}); is base_url a ragattn server?"
    )
    return annotate(err, "invalid_response", None, None)


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


def _transport_error(exc: Exception, config: ClientConfig) -> ServiceConnectionError:
    httpx = require("httpx", extra="client")
    if isinstance(exc, httpx.TimeoutException):
        err: ServiceConnectionError = ServiceTimeoutError(
            f"no answer from {config.base_url} within {config.timeout_s} s "
            f"({type(exc).__name__}); raise timeout_s or send fewer documents"
        )
    else:
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


def outcome(
    attempt: int, answer: httpx.Response | Exception, config: ClientConfig
) -> tuple[Any, float | None]:
    """What one attempt came to: ``(body, None)`` for a success, ``(None, seconds)`` to wait
    before the next attempt; raises what is not retried (as one of our errors).

    Args:
        attempt: how many attempts came before this one.
        answer: the response, or the transport failure that took its place.
        config: the client's retry settings.
    """
    if isinstance(answer, Exception):
        delay = retry_delay(attempt, None, config) if _retryable_transport(answer) else None
        if delay is None:
            raise _transport_error(answer, config) from answer
        logger.info("ragattn service unreachable; retry %d in %.2f s", attempt + 1, delay)
        return None, delay
    status = answer.status_code
    if status < 400:
        try:
            return answer.json(), None
        except ValueError as exc:
            raise malformed("body is not JSON") from exc
    error = error_from_response(status, answer.headers, answer.content)
    retry_after = getattr(error, "retry_after_s", None)
    delay = retry_delay(attempt, retry_after, config) if status in RETRY_STATUSES else None
    if delay is None:
        raise error
    logger.info(
        "ragattn service busy (%s); retry %d in %.2f s", error.error_type, attempt + 1, delay
    )
    return None, delay


__all__ = [
    "RETRY_STATUSES",
    "ClientConfig",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceTimeoutError",
    "annotate",
    "error_from_response",
    "malformed",
    "outcome",
    "retry_after_s",
    "retry_delay",
]
