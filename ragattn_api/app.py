"""The Litestar application factory: settings in, app out; the lifespan owns every resource.

``create_app()`` reads ``RAGATTN_*`` once; tests pass ``Settings`` and may hand in an already
loaded reranker/compressor so one proxy serves the whole test session. The lifespan builds the
cache and the two worker threads (model and tokenizer), then loads the model side on the model
thread (:func:`ragattn_api.loading.build_service`: the engines, cache and pipeline of
:mod:`ragattn.composition`, the one composition root it shares with ``ragattn ask``), warms it up on
the shapes of real requests, chooses the request budget, and only then lets ``/ready`` answer 200.
The state between requests is a typed :class:`~ragattn_api.state.ServiceState`.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from litestar import Litestar, Router

from ragattn.compress.registry import METHODS as COMPRESS_METHODS
from ragattn.settings import Settings
from ragattn_api.auth import ApiKeyGuard
from ragattn_api.body import StrictRequest, require_json
from ragattn_api.deps import DEPENDENCIES
from ragattn_api.disconnect import cancel_on_disconnect
from ragattn_api.edge import Drain, add_response_headers, edge_middleware
from ragattn_api.errors import EXCEPTION_HANDLERS
from ragattn_api.loading import HandedIn, Workers, build_service, service_cache
from ragattn_api.openapi import json_not_found, openapi_config, security_requirement, tighten
from ragattn_api.rate_limit import rate_limit_guard
from ragattn_api.routes.ask import AskController
from ragattn_api.routes.compress import CompressController, RerankCompressController
from ragattn_api.routes.health import HealthController, served_proxies
from ragattn_api.routes.page import PAGE_HANDLERS
from ragattn_api.routes.rerank import RerankController
from ragattn_api.routes.retrieve import RetrieveController
from ragattn_api.schemas import ProxiesOut
from ragattn_api.state import ServiceState
from ragattn_api.worker import ModelWorker

if TYPE_CHECKING:
    from litestar.types import (
        ASGIApp,
        ControllerRouterHandler,
        Guard,
        Message,
        Middleware,
        Receive,
        Scope,
        Send,
    )

    from ragattn.cache import Cache
    from ragattn.compress import Compressor
    from ragattn.rerank import Reranker

logger = logging.getLogger(__name__)


def _flush_log_queues() -> None:
    """Write out the records still queued for Litestar's queue-listener log handlers.

    uvicorn re-raises SIGTERM once shutdown is done, and a process killed by a signal runs no atexit
    hook, so the shutdown messages (worker stopped, Redis closed) could be lost. Stopping a listener
    drains its queue; starting it again keeps logging working for later apps in the same process.
    """
    for handler in logging.getLogger().handlers:
        listener = getattr(handler, "listener", None)
        if listener is None or getattr(listener, "_thread", None) is None:
            continue
        listener.stop()
        listener.start()


def _index_modes(directory: str) -> list[str]:
    """The search modes the index in ``directory`` has, from its manifest (all if unreadable:
    loading it in the lifespan then reports the problem)."""
    import json
    from pathlib import Path

    try:
        manifest = json.loads((Path(directory) / "manifest.json").read_text())
    except (OSError, ValueError):
        return ["hybrid", "bm25", "dense"]
    return ["bm25"] if manifest.get("dense") is None else ["hybrid", "bm25", "dense"]


async def _load(state: ServiceState, handed: HandedIn, cache: Cache, workers: Workers) -> None:
    """Load the model side on the model thread and publish it in ``state``."""
    loaded = await workers.model.run("load", build_service, state.settings, handed, cache, workers)
    state.runtime = loaded.runtime
    state.request_budget = loaded.budget
    state.service = loaded.service
    if not handed.given:
        # The loaded models are ~400k long-lived objects; a full collection scans them all and
        # holds the GIL for about 0.45 s (2 cores, AVX2), which stalled every refusal of an
        # overload burst behind it. Frozen objects are never scanned again.
        gc.collect()
        gc.freeze()
    budget = loaded.budget
    logger.info(
        "ragattn service ready: %s, cache=%s, device=%s, dtype=%s, max_request_tokens=%d (%s), "
        "proxies=%s",
        loaded.service.fingerprint,
        cache.name,
        loaded.runtime["device"],
        loaded.runtime["dtype"],
        budget.tokens,
        budget.basis() or "RAGATTN_MAX_REQUEST_TOKENS",
        _proxies_said(served_proxies(loaded.service)),
    )


def _proxies_said(proxies: ProxiesOut) -> str:
    """The start-up log's words for which proxy reads which language."""
    if proxies.other_languages == proxies.english:
        return f"{proxies.english} (every language)"
    when = "loaded" if proxies.other_languages_loaded else "loads on the first call not in English"
    return f"{proxies.english} (English), {proxies.other_languages} (other languages, {when})"


def _loaded(state: ServiceState, task: asyncio.Future[None]) -> None:
    """A background load finished: on failure, record why and stop the server."""
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    logger.critical("loading the model failed; stopping", exc_info=exc)
    state.load_error = exc
    if state.on_load_failure is not None:
        state.on_load_failure()


@asynccontextmanager
async def _lifespan(app: Litestar, *, handed: HandedIn) -> AsyncIterator[None]:
    """Own the cache and the worker threads for the app's life; load the model side."""
    state: ServiceState = app.state  # type: ignore[assignment]  # create_app passed it
    settings = state.settings
    cache = service_cache(settings)
    observe = state.metrics.observe_model
    workers = Workers(
        model=ModelWorker(max_pending=settings.queue_size, observe=observe),
        tokens=ModelWorker(max_pending=settings.queue_size, observe=observe, name="ragattn-tokens"),
    )
    state.metrics.bind(cache=cache, worker=workers.model, tokens=workers.tokens)
    loading = asyncio.ensure_future(_load(state, handed, cache, workers))
    try:
        if handed.given:
            # An engine handed in (tests, embedding apps): ready before the first request.
            await loading
        else:
            # Load in the background: /health answers at once, /ready is 503 until loaded.
            loading.add_done_callback(functools.partial(_loaded, state))
        yield
    finally:
        loading.cancel()
        state.service = None
        await anyio.to_thread.run_sync(workers.tokens.close)
        await anyio.to_thread.run_sync(workers.model.close)
        logger.info("model worker stopped")
        await cache.close()
        _flush_log_queues()


def _guards(settings: Settings, rate_guard: Guard | None) -> list[Guard]:
    """API keys first, then the rate limit, then the JSON content type."""
    guards: list[Guard] = [ApiKeyGuard(settings.api_keys)] if settings.api_keys else []
    # Global through Redis with RAGATTN_CACHE_BACKEND=redis, else per process.
    if rate_guard is not None:
        guards.append(rate_guard)
    guards.append(require_json)
    return guards


def _route_handlers(settings: Settings) -> list[ControllerRouterHandler]:
    """Health and pages (public), and the model routes (keyed); retrieval with an index only."""
    model_routes: list[ControllerRouterHandler] = [
        RerankController,
        CompressController,
        RerankCompressController,
    ]
    if settings.index_dir:
        model_routes += [RetrieveController, AskController]
    # The model routes need the key when keys are configured; the OpenAPI document says so.
    keyed = Router(path="/", route_handlers=model_routes, security=security_requirement(settings))
    return [HealthController, *PAGE_HANDLERS, keyed]


def _middleware(settings: Settings, drain: Drain) -> list[Middleware]:
    """The header cap and body deadline (edge), then cancellation when the client goes."""
    edge = functools.partial(
        edge_middleware,
        max_header_bytes=settings.max_header_bytes,
        body_timeout_s=settings.body_timeout_s,
        drain=drain,
        max_body_bytes=settings.max_body_bytes,
    )
    return [edge, cancel_on_disconnect]


def head_as_get(app: ASGIApp) -> ASGIApp:
    """``HEAD`` answered wherever ``GET`` is (RFC 9110 section 9.3.2), on every route: the page,
    ``/demo.json``, ``/metrics`` and the OpenAPI pages included, not only the routes that declare
    it (``HEAD /`` was a 405 while ``GET /`` was served).

    The request reaches the app as a ``GET`` (a copy of its scope) and the response goes out with
    ``GET``'s status and headers and no body; ``Content-Length`` is left out, as for the routes
    that declared ``HEAD`` before (RFC 9110 lets a server omit a header determined only while
    generating the content). What the app learned about the request (the route template the
    metrics label it with) is copied back to the caller's scope, whose method stays ``HEAD``.
    """

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await app(scope, receive, send)
            return

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != b"content-length"
                ]
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        inner: Any = {**scope, "method": "GET"}
        try:
            await app(inner, receive, bodiless)
        finally:
            learned = {k: v for k, v in inner.items() if k != "method"}
            scope.update(learned)  # type: ignore[typeddict-item]

    return handle


def create_app(
    settings: Settings | None = None,
    *,
    reranker: Reranker | Any = None,
    compressor: Compressor | Any = None,
) -> Litestar:
    """Build the service.

    Args:
        settings: service settings; ``Settings.from_env()`` when None.
        reranker: an already loaded ``Reranker`` (tests share one, or a test double with its
            ``rerank``, ``proxy`` and ``method``); loaded from settings when None.
        compressor: an already loaded ``Compressor`` on the same proxy; built from settings
            when None.

    Raises:
        ConfigError: invalid ``RAGATTN_*`` values (when ``settings`` is None).
    """
    settings = settings if settings is not None else Settings.from_env()
    for name in ("ragattn", "ragattn_api"):
        logging.getLogger(name).setLevel(settings.log_level)
    state = ServiceState.initial(settings)
    rate_guard = rate_limit_guard(settings, registry=state.metrics.registry)
    app = Litestar(
        route_handlers=_route_handlers(settings),
        lifespan=[
            functools.partial(_lifespan, handed=HandedIn(reranker=reranker, compressor=compressor))
        ],
        dependencies=DEPENDENCIES,
        guards=_guards(settings, rate_guard),
        on_shutdown=[rate_guard.close] if rate_guard is not None else [],
        middleware=_middleware(settings, state.drain),
        before_send=[add_response_headers],
        after_request=json_not_found,
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=StrictRequest,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(settings),
        state=state,
    )
    tighten(
        app.openapi_schema,
        settings,
        sorted(COMPRESS_METHODS),
        _index_modes(settings.index_dir) if settings.index_dir else None,
    )
    # Outside Litestar's router and exception handling: every response is counted with the
    # status that was sent, refusals of the edge middleware (400, 431), 404 and 405 included;
    # a HEAD is served as its GET, wherever there is one.
    app.asgi_handler = state.metrics.middleware(head_as_get(app.asgi_handler))
    return app


__all__ = ["create_app", "head_as_get"]
