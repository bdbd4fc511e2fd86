"""HTTP clients for the ragattn service that return the in-process result types.

:class:`Client` and :class:`AsyncClient` have the ``rerank`` / ``compress`` /
``rerank_and_compress`` signatures of :class:`ragattn.Reranker` and
:class:`ragattn.compress.Compressor` and return the same :class:`~ragattn.types.RerankResults`
and :class:`~ragattn.types.CompressionResult`, so moving between local and remote is one line::

    engine = Reranker(proxy)                        # in process
    engine = Client("http://127.0.0.1:8080")        # the service; same calls, same results

Results carry the caller's own :class:`~ragattn.types.Document` objects (mapped back by
``index``), never copies rebuilt from the wire.

Retries: 429 and 503 answers and failed connections are retried up to ``max_retries`` times.
A ``Retry-After`` header is honoured exactly (never retried sooner); when it asks for longer than
``max_backoff_s`` the error is raised at once. Without it the wait is an exponential backoff with
jitter. Read timeouts are not retried: the server may still be computing, and a retry would
double its load.

Errors: a server error becomes the matching class of :mod:`ragattn.errors`
(``invalid_request`` → :class:`InvalidInputError`, ``rate_limited`` and ``overloaded`` →
:class:`OverloadedError`, …) or :class:`ServiceError`; every one carries the server's
``error_type``, the HTTP ``status_code`` and ``retry_after_s`` (seconds, or None) as attributes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ragattn._optional import require
from ragattn.contract import CompressVerbs
from ragattn.errors import (
    InputTooLargeError,
    InvalidInputError,
    NotReadyError,
    OverloadedError,
    RagattnError,
    TokenizerError,
)
from ragattn.sentences import split_sentences
from ragattn.types import (
    Budget,
    CompressedDocument,
    CompressionResult,
    Document,
    DocumentLike,
    KeptSpan,
    RerankResult,
    RerankResults,
    as_documents,
)

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

BUDGET_FIELDS = ("ratio", "target_tokens", "threshold")

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


# -- wire: requests -----------------------------------------------------------------------------


def _wire_document(doc: Document) -> str | dict[str, Any]:
    # Metadata is never sent: it does not change scores and need not be JSON-serializable.
    if doc.id is None and doc.title is None:
        return doc.text
    out: dict[str, Any] = {"text": doc.text}
    if doc.id is not None:
        out["id"] = doc.id
    if doc.title is not None:
        out["title"] = doc.title
    return out


PruneBudget = Budget | Mapping[str, float | int]
"""A rerank's ``prune`` budget: a checked :class:`Budget`, or its wire object such as
``{"ratio": 0.3}`` (one of ``ratio``, ``target_tokens``, ``threshold``; the service checks it)."""


def _rerank_payload(
    query: str, docs: Sequence[Document], top_n: int | None, prune: PruneBudget | None = None
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "query": query,
        "documents": [_wire_document(d) for d in docs],
        "raw_scores": True,
    }
    if top_n is not None:
        payload["top_n"] = top_n
    if prune is not None:
        # Sent as given: the service checks it and says what is wrong (one rule, one place).
        payload["prune"] = prune.keywords() if isinstance(prune, Budget) else dict(prune)
    return payload


def _compress_payload(
    query: str,
    documents: str | Sequence[DocumentLike],
    given: Mapping[str, Any],
    config: ClientConfig,
) -> tuple[dict[str, Any], list[Document]]:
    """The body of ``/v1/compress`` or ``/v1/rerank_compress`` for a call's keywords as given.

    The budget keywords are sent as they are: the service checks them (and says what is wrong),
    so a client and the service never disagree on a rule. A checked ``budget`` is sent as its own
    keyword.
    """
    if given.get("tokenizer") is not None:
        raise InvalidInputError(
            "the service counts tokens with its proxy tokenizer (named in result.tokenizer); "
            "pass tokenizer=None to a Client, or compress in process to count in another one"
        )
    if given.get("keep_entities"):
        raise InvalidInputError("keep_entities is not part of the service API; compress in process")
    payload: dict[str, Any] = {"query": query, "keep_order": given.get("keep_order", True)}
    if isinstance(documents, str):
        docs = [Document(text=documents)]
        payload["context"] = documents
    else:
        docs = as_documents(documents)
        payload["documents"] = [_wire_document(d) for d in docs]
    raw = [given.get(k) for k in ("ratio", "target_tokens", "threshold")]
    budget = given.get("budget")
    if budget is not None:
        payload.update(Budget.from_args(*raw, given=budget).keywords())
    else:
        payload.update({k: v for k, v in zip(BUDGET_FIELDS, raw, strict=True) if v is not None})
    if given.get("top_n") is not None:
        payload["top_n"] = given["top_n"]
    if config.compress_method is not None:
        payload["method"] = config.compress_method
    return payload, docs


# -- wire: responses ----------------------------------------------------------------------------


def _malformed(what: str) -> RagattnError:
    err = ServiceError(
        f"the service sent a malformed response ({what}); is base_url a ragattn server?"
    )
    return _annotate(err, "invalid_response", None, None)


def _index(value: Any, n_docs: int) -> int:
    if not isinstance(value, int) or not 0 <= value < n_docs:
        raise _malformed(f"result index {value!r} is outside 0..{n_docs - 1}")
    return value


def _rerank_results(
    body: Any, docs: Sequence[Document], *, raw_is_relevance: bool = False
) -> RerankResults:
    """``raw_is_relevance``: the route sends no ``raw_score`` because it equals the relevance."""
    try:
        items = body["results"]
        warnings = tuple(body.get("meta", {}).get("warnings", ()))
        results = [
            RerankResult(
                index=(i := _index(item["index"], len(docs))),
                relevance_score=float(item["relevance_score"]),
                raw_score=float(item["relevance_score"] if raw_is_relevance else item["raw_score"]),
                document=docs[i],
                pruned_text=None if item.get("pruned_text") is None else str(item["pruned_text"]),
                kept_spans=_kept_spans(item.get("kept_spans") or (), i),
            )
            for item in items
        ]
        method = str(body.get("method") or "")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(f"rerank body: {type(exc).__name__} {exc}") from exc
    if len({r.index for r in results}) != len(results):
        raise _malformed("an index appears twice in results")
    return RerankResults(results, warnings=warnings, method=method, windows=1)


def _kept_spans(items: Any, index: int) -> tuple[KeptSpan, ...]:
    """Wire ``kept_spans`` (``[{start, end, score, text}]``) of ``documents[index]``."""
    return tuple(
        KeptSpan(
            doc_index=index,
            start=int(s["start"]),
            end=int(s["end"]),
            score=float(s["score"]),
            text=str(s["text"]),
        )
        for s in items
    )


def _sentence_spans(
    text: str, n_scores: int, kept: Sequence[KeptSpan]
) -> tuple[tuple[int, int], ...] | None:
    """Sentence spans re-split locally; None unless they provably match the server's split.

    The wire carries one score per sentence but not the sentence ranges. The splitter is
    deterministic, so the local split agrees whenever client and server run the same ragattn;
    a different count or a kept span that is not a local sentence means they do not.
    """
    spans = tuple((s.start, s.end) for s in split_sentences(text))
    if len(spans) != n_scores or any((k.start, k.end) not in set(spans) for k in kept):
        return None
    return spans


def _compressed_document(
    item: Any, docs: Sequence[Document], warnings: list[str]
) -> CompressedDocument:
    index = _index(item["index"], len(docs))
    doc = docs[index]
    kept = _kept_spans(item["kept_spans"], index)
    scores = tuple(float(x) for x in item["sentence_scores"])
    spans = _sentence_spans(doc.text, len(scores), kept)
    if spans is None:
        warnings.append(
            f"documents[{index}]: the server split sentences differently from this client's "
            "ragattn version; sentence_spans is empty"
        )
    return CompressedDocument(
        index=index,
        text=str(item["text"]),
        kept_spans=kept,
        sentence_scores=scores,
        sentence_spans=spans or (),
        document=doc,
    )


def _compression_result(
    body: Any, docs: Sequence[Document], indices: Sequence[int]
) -> CompressionResult:
    """The result for ``body``, whose documents must be ``docs[i]`` for ``i`` in ``indices``."""
    warnings: list[str] = []
    try:
        documents = tuple(_compressed_document(item, docs, warnings) for item in body["documents"])
        result = CompressionResult(
            compressed_text=str(body["compressed_text"]),
            documents=documents,
            origin_tokens=int(body["origin_tokens"]),
            compressed_tokens=int(body["compressed_tokens"]),
            ratio=float(body["ratio"]),
            tokenizer=str(body["tokenizer"]),
            method=str(body["method"]),
            warnings=(*body.get("warnings", ()), *warnings),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(f"compress body: {type(exc).__name__} {exc}") from exc
    if [d.index for d in documents] != list(indices):
        raise _malformed(f"compressed documents are not the expected {list(indices)}")
    return result


def _rerank_compress_result(
    body: Any, docs: Sequence[Document]
) -> tuple[RerankResults, CompressionResult]:
    # One scoring pass: a document's raw and relevance score are both its best sentence's keep
    # score, so the route sends only relevance_score; compressed documents come in rank order.
    ranked = _rerank_results(body, docs, raw_is_relevance=True)
    if not isinstance(body.get("compression"), dict):
        raise _malformed("rerank_compress body has no 'compression' object")
    return ranked, _compression_result(body["compression"], docs, [r.index for r in ranked])


# -- errors and retries -------------------------------------------------------------------------


def _retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
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


def _error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> RagattnError:
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
    return _annotate(err, error_type, status, _retry_after_s(headers.get("retry-after")))


def _annotate(
    err: RagattnError, error_type: str, status: int | None, retry_after_s: float | None
) -> RagattnError:
    """Attach the server's ``error_type``, ``status_code`` and ``retry_after_s`` to ``err``."""
    err.error_type = error_type
    # Every client error carries these; RagattnError itself does not declare them.
    err.status_code = status  # type: ignore[attr-defined]
    err.retry_after_s = retry_after_s  # type: ignore[attr-defined]
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
    _annotate(err, err.error_type, None, None)
    return err


def _retryable_transport(exc: Exception) -> bool:
    """Only failures where the request surely never reached the server are retried."""
    httpx = require("httpx", extra="client")
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def _retry_delay(attempt: int, retry_after_s: float | None, config: ClientConfig) -> float | None:
    """Seconds to wait before retry number ``attempt + 1``; None = do not retry.

    ``Retry-After`` wins when present; otherwise ``backoff_s * 2**attempt`` with jitter in
    [50 %, 100 %] so clients refused together do not return together.
    """
    if attempt >= config.max_retries:
        return None
    if retry_after_s is not None:
        return retry_after_s if retry_after_s <= config.max_backoff_s else None
    base = min(config.backoff_s * 2**attempt, config.max_backoff_s)
    return base * (0.5 + random.random() / 2)


def _wait_after_transport_error(attempt: int, exc: Exception, config: ClientConfig) -> float:
    """The wait before the next attempt after a transport failure, or raise it as ours."""
    delay = _retry_delay(attempt, None, config) if _retryable_transport(exc) else None
    if delay is None:
        raise _transport_error(exc, config) from exc
    logger.info("ragattn service unreachable; retry %d in %.2f s", attempt + 1, delay)
    return delay


def _wait_after_error(
    attempt: int, status: int, error: RagattnError, config: ClientConfig
) -> float:
    """The wait before the next attempt after an error answer, or raise it."""
    retry_after = getattr(error, "retry_after_s", None)
    delay = _retry_delay(attempt, retry_after, config) if status in RETRY_STATUSES else None
    if delay is None:
        raise error
    logger.info(
        "ragattn service busy (%s); retry %d in %.2f s", error.error_type, attempt + 1, delay
    )
    return delay


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise _malformed("body is not JSON") from exc


# -- clients ------------------------------------------------------------------------------------


_C = TypeVar("_C", bound="_ClientBase")


class _ClientBase:
    """Construction shared by both clients; subclasses open their own httpx client."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        compress_method: str | None = None,
        rerank_path: str = "/v2/rerank",
        transport: Any = None,
    ) -> None:
        config = ClientConfig(
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            compress_method=compress_method,
            rerank_path=rerank_path,
        )
        self.config = config
        self._open(transport)

    @classmethod
    def from_config(cls: type[_C], config: ClientConfig, *, transport: Any = None) -> _C:
        """A client with ``config`` (e.g. another client's, to build its sync/async twin)."""
        client = cls.__new__(cls)
        client.config = config
        client._open(transport)
        return client

    def _open(self, transport: Any) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.base_url!r})"


class Client(
    _ClientBase, CompressVerbs[CompressionResult, tuple[RerankResults, CompressionResult]]
):
    """A blocking client of the ragattn service with the in-process result types.

    Args:
        base_url: the service root, e.g. ``http://127.0.0.1:8080``.
        api_key: Bearer key when the server has ``RAGATTN_API_KEYS`` set.
        timeout_s, connect_timeout_s, max_retries, backoff_s, max_backoff_s, compress_method,
            rerank_path: see :class:`ClientConfig`.
        transport: an ``httpx.BaseTransport`` (tests, proxies); default the network.

    Raises:
        MissingDependencyError: ``httpx`` is not installed (``pip install 'ragattn[client]'``).
        InvalidInputError: an invalid setting.
    """

    def _open(self, transport: httpx.BaseTransport | None) -> None:
        httpx = require("httpx", extra="client")
        self._http = httpx.Client(transport=transport, **self.config.httpx_kwargs())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        httpx = require("httpx", extra="client")
        attempt = 0
        while True:
            try:
                response = self._http.post(path, json=payload)
            except httpx.HTTPError as exc:
                delay = _wait_after_transport_error(attempt, exc, self.config)
            else:
                status = response.status_code
                if status < 400:
                    return _body(response)
                error = _error_from_response(status, response.headers, response.content)
                delay = _wait_after_error(attempt, status, error, self.config)
            time.sleep(delay)
            attempt += 1

    def rerank(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        prune: PruneBudget | None = None,
    ) -> RerankResults:
        """Rerank on the service; same arguments, result and errors as :meth:`Reranker.rerank`.

        ``raw_score`` is in the server method's units and ``relevance_score`` in [0, 1].
        ``results.method`` is empty without ``prune``: the plain rerank response does not name
        the method.

        Args:
            query: the question (non-empty).
            documents: strings, Documents or mappings with ``text``.
            top_n: keep the best ``top_n`` (default all).
            prune: also keep each result's best sentences under this one budget, counted across
                the returned results in the server's proxy tokens: a :class:`Budget` or
                ``{"ratio": …}`` / ``{"target_tokens": …}`` / ``{"threshold": …}``. The service's
                compressor then ranks and prunes from one read: each result carries
                ``pruned_text`` and ``kept_spans`` (offsets into its ``document.text``), and
                ``results.method`` names the ranking method (its scores are not those of a
                plain rerank).

        Raises:
            InvalidInputError: bad arguments (the service's message), e.g. not exactly one budget.
        """
        docs = as_documents(documents)
        body = self._post(self.config.rerank_path, _rerank_payload(query, docs, top_n, prune))
        return _rerank_results(body, docs)

    def _compress(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> CompressionResult:
        """:meth:`compress` on the service: the arguments and result of
        :meth:`Compressor.compress`. Token counts are in the server's proxy tokenizer
        (``result.tokenizer``); ``tokenizer`` and ``keep_entities`` are not part of the service
        API and raise InvalidInputError."""
        payload, docs = _compress_payload(query, documents, given, self.config)
        return _compression_result(self._post("/v1/compress", payload), docs, range(len(docs)))

    def _rerank_compress(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> tuple[RerankResults, CompressionResult]:
        """:meth:`rerank_and_compress` from one scoring pass on the service
        (``/v1/rerank_compress``); the arguments and results of
        :meth:`Compressor.rerank_and_compress`."""
        payload, docs = _compress_payload(query, documents, given, self.config)
        return _rerank_compress_result(self._post("/v1/rerank_compress", payload), docs)


class AsyncClient(
    _ClientBase,
    CompressVerbs[Awaitable[CompressionResult], Awaitable[tuple[RerankResults, CompressionResult]]],
):
    """The asyncio twin of :class:`Client`: the same constructor (``transport`` is an
    ``httpx.AsyncBaseTransport``), the same methods awaited, ``aclose`` / ``async with``."""

    def _open(self, transport: httpx.AsyncBaseTransport | None) -> None:
        httpx = require("httpx", extra="client")
        self._http = httpx.AsyncClient(transport=transport, **self.config.httpx_kwargs())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        httpx = require("httpx", extra="client")
        attempt = 0
        while True:
            try:
                response = await self._http.post(path, json=payload)
            except httpx.HTTPError as exc:
                delay = _wait_after_transport_error(attempt, exc, self.config)
            else:
                status = response.status_code
                if status < 400:
                    return _body(response)
                error = _error_from_response(status, response.headers, response.content)
                delay = _wait_after_error(attempt, status, error, self.config)
            await asyncio.sleep(delay)
            attempt += 1

    async def rerank(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        prune: PruneBudget | None = None,
    ) -> RerankResults:
        """See :meth:`Client.rerank`."""
        docs = as_documents(documents)
        payload = _rerank_payload(query, docs, top_n, prune)
        body = await self._post(self.config.rerank_path, payload)
        return _rerank_results(body, docs)

    async def _compress(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> CompressionResult:
        """See :meth:`Client.compress`."""
        payload, docs = _compress_payload(query, documents, given, self.config)
        body = await self._post("/v1/compress", payload)
        return _compression_result(body, docs, range(len(docs)))

    async def _rerank_compress(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> tuple[RerankResults, CompressionResult]:
        """See :meth:`Client.rerank_and_compress`."""
        payload, docs = _compress_payload(query, documents, given, self.config)
        body = await self._post("/v1/rerank_compress", payload)
        return _rerank_compress_result(body, docs)


__all__ = [
    "AsyncClient",
    "Client",
    "ClientConfig",
    "PruneBudget",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceTimeoutError",
]
