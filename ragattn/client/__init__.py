"""HTTP clients for the ragattn service that return the in-process result types.

:class:`Client` and :class:`AsyncClient` have the ``rerank`` / ``compress`` /
``rerank_and_compress`` signatures of :class:`ragattn.Reranker` and
:class:`ragattn.compress.Compressor` and return the same :class:`~ragattn.types.RerankResults`
and :class:`~ragattn.types.CompressionResult`, so moving between local and remote is one line::

    engine = Reranker(proxy)                        # in process
    engine = Client("http://127.0.0.1:8080")        # the service; same calls, same results

Results carry the caller's own :class:`~ragattn.types.Document` objects (mapped back by
``index``), never copies rebuilt from the wire (:mod:`ragattn.client.wire`).

Deadline and retries (:mod:`ragattn.client.transport`): ``timeout_s`` bounds a whole call,
every attempt and the reading of the answer included, however slowly the server sends it; past it
the call raises :class:`ServiceTimeoutError`. 429 and 503 answers and failed connections are
retried up to ``max_retries`` times, honouring ``Retry-After``, while the deadline allows;
timeouts are not retried.

Errors: a server error becomes the matching class of :mod:`ragattn.errors`
(``invalid_request`` → :class:`InvalidInputError`, ``rate_limited`` and ``overloaded`` →
:class:`OverloadedError`, …) or :class:`ServiceError`; every one carries the server's
``error_type``, the HTTP ``status_code`` and ``retry_after_s`` (seconds, or None) as attributes.
An answer that is not what a ragattn server sends (a wrong type, a non-finite score, an index
outside the request, a kept span outside its document) raises :class:`InvalidResponseError`, whose
``field`` names the JSON path of the part (:mod:`ragattn.client.wire`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ragattn._optional import require
from ragattn.call_language import split_language
from ragattn.client.transport import (
    ClientConfig,
    Deadline,
    InvalidResponseError,
    ServiceConnectionError,
    ServiceError,
    ServiceTimeoutError,
    outcome,
    read_async,
    read_blocking,
)
from ragattn.client.wire import (
    PruneBudget,
    compress_payload,
    compression_result,
    given_budget,
    rerank_compress_result,
    rerank_payload,
    rerank_results,
    service_options,
)
from ragattn.contract import CompressVerbs, RerankVerbs, VerbArgs, input_documents
from ragattn.languages import AUTO
from ragattn.types import (
    CompressionResult,
    Document,
    DocumentLike,
    RerankResults,
    as_documents,
)

if TYPE_CHECKING:
    import httpx

_Self = TypeVar("_Self", bound="_ClientBase")
_Request = Callable[[], tuple[str, dict[str, Any], Callable[[Any], Any]]]
"""A request to make: ``() -> (path, body, parser of the answer's JSON)``."""
_R = TypeVar("_R")
_C = TypeVar("_C")
_RC = TypeVar("_RC")


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
    def from_config(cls: type[_Self], config: ClientConfig, *, transport: Any = None) -> _Self:
        """A client with ``config`` (e.g. another client's, to build its sync/async twin)."""
        client = cls.__new__(cls)
        client.config = config
        client._open(transport)
        return client

    def _open(self, transport: Any) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.base_url!r})"


class _RemoteVerbs(_ClientBase, RerankVerbs[_R], CompressVerbs[_C, _RC]):
    """The verbs over HTTP, written once for both clients: each hands :meth:`_exchange` a
    :data:`_Request` (building the body and the parser of the answer, called when the exchange
    starts, so :class:`AsyncClient` raises a bad argument when awaited) and returns what that
    returns: the result for :class:`Client`, an awaitable of it for :class:`AsyncClient`.

    The keyword methods leave the checks to the service (the edge they talk to), so the client
    and the service never disagree on a rule; only the documents are converted here, once.
    """

    def _exchange(self, request: _Request) -> Any:
        raise NotImplementedError

    def rerank(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        prune: PruneBudget | None = None,
        language: str = AUTO,
    ) -> _R:
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
                ``{"ratio": …}`` / ``{"target_tokens": …}`` / ``{"threshold": …}`` (``{}``: the
                service's default, :data:`~ragattn.types.DEFAULT_BUDGET`). The service's
                compressor then ranks and prunes from one read: each result carries
                ``pruned_text`` and ``kept_spans`` (offsets into its ``document.text``), and
                ``results.method`` names the ranking method (its scores are not those of a
                plain rerank).
            language: with ``prune``, the documents' language for sentence splitting: an ISO
                639-1 code of :data:`~ragattn.sentences.LANGUAGES` or ``"auto"`` (default: by
                each text's script); sent in ``prune`` when not ``"auto"`` (the service checks
                it; without ``prune`` it refuses one, a plain rerank splits no sentences).

        Raises:
            InvalidInputError: bad arguments (the service's message), e.g. more than one budget.
            ServiceTimeoutError: no complete answer within ``timeout_s``.
            InvalidResponseError: the answer is not a ragattn server's (``field`` names the part).
        """
        return self._exchange(
            lambda: self._rerank(query, as_documents(documents), top_n, prune, language)
        )

    def rerank_checked(self, query: str, documents: Sequence[Document], args: VerbArgs) -> _R:
        """:meth:`rerank` of a checked call."""
        return self._exchange(lambda: self._rerank(query, documents, args.top_n, None, AUTO))

    def _rerank(
        self,
        query: str,
        docs: Sequence[Document],
        top_n: int | None,
        prune: PruneBudget | None,
        language: str,
    ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        payload = rerank_payload(query, docs, top_n, prune, language=language)
        return self.config.rerank_path, payload, lambda body: rerank_results(body, docs)

    def _compress_given(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _C:
        """:meth:`compress` on the service: the arguments and result of
        :meth:`Compressor.compress`. Token counts are in the server's proxy tokenizer
        (``result.tokenizer``); ``tokenizer`` and ``keep_entities`` are not part of the service
        API and raise InvalidInputError. A call with no budget sends none, and the service gives
        it the default every door gives (:data:`~ragattn.types.DEFAULT_BUDGET`)."""
        return self._exchange(lambda: self._given("/v1/compress", query, documents, given))

    def _rerank_compress_given(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _RC:
        """:meth:`rerank_and_compress` from one scoring pass on the service
        (``/v1/rerank_compress``); the arguments and results of
        :meth:`Compressor.rerank_and_compress`."""
        return self._exchange(lambda: self._given("/v1/rerank_compress", query, documents, given))

    def compress_checked(self, query: str, documents: Sequence[Document], args: VerbArgs) -> _C:
        """:meth:`compress` of a checked call."""
        return self._exchange(lambda: self._checked("/v1/compress", query, documents, args))

    def rerank_and_compress_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> _RC:
        """:meth:`rerank_and_compress` of a checked call."""
        path = "/v1/rerank_compress"
        return self._exchange(lambda: self._checked(path, query, documents, args))

    def _given(
        self,
        path: str,
        query: str,
        documents: str | Sequence[DocumentLike],
        given: Mapping[str, Any],
    ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        """The request of a compress verb's keywords as given (the service checks them)."""
        service_options(given.get("tokenizer"), bool(given.get("keep_entities")))
        docs = input_documents(documents)
        payload = compress_payload(
            query,
            docs,
            given_budget(given),
            context=documents if isinstance(documents, str) else None,
            keep_order=given.get("keep_order", True),
            top_n=given.get("top_n"),
            method=self.config.compress_method,
            language=given.get("language", AUTO),
            first_stage_order=given.get("first_stage_order"),
        )
        return path, payload, _parser(path, query, docs, given.get("language", AUTO))

    def _checked(
        self, path: str, query: str, docs: Sequence[Document], args: VerbArgs
    ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        """The request of a checked compress verb."""
        service_options(args.tokenizer, args.keep_entities)
        payload = compress_payload(
            query,
            docs,
            args.compress_budget.keywords(),
            keep_order=args.keep_order,
            top_n=args.top_n,
            method=self.config.compress_method,
            language=args.language,
            first_stage_order=args.first_stage_order,
        )
        return path, payload, _parser(path, query, docs, args.language)


def _parser(path: str, query: str, docs: Sequence[Document], language: str) -> Callable[[Any], Any]:
    """The parser of a compress route's answer: the results carry ``docs``, their sentence spans
    re-split as the service split them (:func:`~ragattn.call_language.split_language`: the
    call's ``language``, or for ``"auto"`` the rules of the language the call is in)."""
    language = split_language(query, docs, language)
    if path == "/v1/rerank_compress":
        return lambda body: rerank_compress_result(body, docs, language=language)
    return lambda body: compression_result(body, docs, range(len(docs)), language=language)


class Client(
    _RemoteVerbs[RerankResults, CompressionResult, tuple[RerankResults, CompressionResult]]
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

    Every call runs under the ``timeout_s`` deadline: a worker thread reads the answer while the
    caller waits for it at most that long (:func:`~ragattn.client.transport.read_blocking`).
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
        deadline = Deadline(self.config)
        attempt = 0
        while True:
            answer = read_blocking(self._http, path, payload, deadline)
            body, delay = outcome(attempt, answer, deadline)
            if delay is None:
                return body
            time.sleep(delay)
            attempt += 1

    def _exchange(self, request: _Request) -> Any:
        path, payload, parse = request()
        return parse(self._post(path, payload))


class AsyncClient(
    _RemoteVerbs[
        Awaitable[RerankResults],
        Awaitable[CompressionResult],
        Awaitable[tuple[RerankResults, CompressionResult]],
    ]
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
        deadline = Deadline(self.config)
        attempt = 0
        while True:
            answer = await read_async(self._http, path, payload, deadline)
            body, delay = outcome(attempt, answer, deadline)
            if delay is None:
                return body
            await asyncio.sleep(delay)
            attempt += 1

    async def _exchange(self, request: _Request) -> Any:
        path, payload, parse = request()
        return parse(await self._post(path, payload))


__all__ = [
    "AsyncClient",
    "Client",
    "ClientConfig",
    "InvalidResponseError",
    "PruneBudget",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceTimeoutError",
]
