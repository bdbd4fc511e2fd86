"""The Litestar application factory: settings in, app out; the lifespan owns every resource.

``create_app()`` reads ``RAGATTN_*`` once; tests pass ``Settings`` and may hand in an already
loaded reranker/compressor so one proxy serves the whole test session. The lifespan loads the
proxy, builds the cache, the two worker threads (model and tokenizer), the generator and the one
:class:`~ragattn.pipeline.RAGPipeline` of ``/v1/ask`` and ``/v1/retrieve``, warms them up on the
shapes of real requests, and only then lets ``/ready`` answer 200.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar import Litestar, Router

from ragattn.cache import Cache, MemoryCache, NullCache, RedisCache
from ragattn.compress import Compressor
from ragattn.compress.registry import METHODS as COMPRESS_METHODS
from ragattn.errors import ConfigError, MissingDependencyError, ModelLoadError
from ragattn.fingerprint import model_fingerprint
from ragattn.limits import LimitChecker, Limits
from ragattn.settings import Settings
from ragattn_api.auth import ApiKeyGuard, RateLimiter, RateLimitGuard
from ragattn_api.body import StrictRequest, require_json
from ragattn_api.deps import DEPENDENCIES
from ragattn_api.disconnect import cancel_on_disconnect
from ragattn_api.edge import Drain, add_response_headers, edge_middleware
from ragattn_api.errors import EXCEPTION_HANDLERS
from ragattn_api.metrics import Metrics
from ragattn_api.openapi import json_not_found, openapi_config, security_requirement, tighten
from ragattn_api.routes.ask import AskController
from ragattn_api.routes.compress import CompressController, RerankCompressController
from ragattn_api.routes.health import HealthController
from ragattn_api.routes.page import PAGE_HANDLERS
from ragattn_api.routes.rerank import RerankController
from ragattn_api.routes.retrieve import RetrieveController
from ragattn_api.service import CompressorFactory, Service
from ragattn_api.tenancy import PartitionedCache
from ragattn_api.worker import ModelWorker

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


def build_cache(settings: Settings) -> Cache:
    """The response cache of ``settings``, partitioned per API key with ``cache_scope=key``."""
    cache = _backend_cache(settings)
    return PartitionedCache(cache) if settings.cache_scope == "key" else cache


def _backend_cache(settings: Settings) -> Cache:
    if settings.cache_backend == "redis":
        if settings.redis_url is None:  # Settings validation guarantees it; checked for mypy
            raise ConfigError("RAGATTN_CACHE_BACKEND=redis needs RAGATTN_REDIS_URL")
        return RedisCache(
            settings.redis_url,
            ttl_s=settings.cache_ttl_s,
            timeout_s=settings.redis_timeout_s,
            cooldown_s=settings.redis_cooldown_s,
        )
    if settings.cache_backend == "memory":
        return MemoryCache(max_items=settings.cache_max_items, ttl_s=settings.cache_ttl_s)
    return NullCache()


def build_generator(settings: Settings, proxy: Any) -> Any:
    """The ``/v1/ask`` generator: an OpenAI-compatible endpoint when configured, else the proxy."""
    from ragattn.generate import LocalGenerator, OpenAIChatGenerator

    if settings.generator_base_url and settings.generator_model:
        return OpenAIChatGenerator(
            settings.generator_base_url,
            settings.generator_model,
            api_key=settings.generator_api_key,
            max_tokens=settings.generator_max_tokens,
            # The call runs on the model thread: never hold it past the request deadline.
            timeout=settings.request_timeout_s or 60.0,
        )
    return LocalGenerator(proxy, max_new_tokens=settings.generator_max_tokens)


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


def _load_reranker(settings: Settings) -> Any:
    from ragattn import Reranker, load_proxy

    proxy = load_proxy(
        settings.proxy,
        device=settings.device,
        dtype=settings.dtype,
        threads=settings.threads,
        cache_dir=settings.proxy_cache_dir,
    )
    if settings.rerank_method:
        return Reranker(proxy, method=settings.rerank_method)
    return Reranker(proxy)


def _load_index(directory: str) -> Any:
    from ragattn.errors import InvalidInputError
    from ragattn.retrieve import Index

    try:
        return Index.load(directory)
    except InvalidInputError as exc:
        raise ConfigError(f"RAGATTN_INDEX_DIR={directory!r}: {exc}") from exc


def runtime_of(proxy: Any) -> dict[str, str]:
    """The device (``cpu``, ``cuda:0``, ``mps``) and weights dtype the proxy runs with."""
    from ragattn.proxy import dtype_name

    return {"device": str(proxy.device), "dtype": dtype_name(proxy.dtype)}


def warm_up(proxy: Any) -> None:
    """One single-token forward: the model must compute before /ready says so."""
    import torch

    tokenizer = proxy.tokenizer
    token = next((t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id) if t is not None), 0)
    with torch.inference_mode():
        ids = torch.tensor([[token]], dtype=torch.long, device=proxy.device)
        out = proxy.decoder(input_ids=ids, use_cache=False)
    if not bool(torch.isfinite(out.last_hidden_state).all()):
        raise ModelLoadError(
            f"the proxy {proxy.name!r} computes non-finite values; check its weights"
        )


def warm_up_requests(reranker: Any, compressor: Any | None, limits: LimitChecker) -> None:
    """Run the shapes of real requests once (rerank, compress, the token check) before /ready.

    Their first call loads what a single forward does not touch (the embedder, lexical indexes,
    probe weights, attention kernels); without this the first requests after /ready said 200
    paid for it and missed short deadlines.
    """
    from ragattn.demo import DOCUMENTS, QUERY

    docs = list(DOCUMENTS[:3])
    limits.tokens.offsets([QUERY, *(d.text for d in docs)])  # whatever this server's limits
    reranker.rerank(QUERY, docs, top_n=2)
    if compressor is not None:
        compressor.compress(QUERY, docs[:2], ratio=0.5)


def _compressor_factory(
    cls: Any, block_store_mb: int = 0, selection: str = "documents", cascade: str = "default"
) -> CompressorFactory:
    """Compressors of the service; with ``block_store_mb`` > 0 the attention methods share one
    block store of that size (passages read once, :mod:`ragattn.blocks`); ``selection`` and
    ``cascade`` other than the defaults are passed on (:mod:`ragattn.compress.selection`,
    :mod:`ragattn.compress.cascade`: ``off`` or ``KEEP:SCORER``)."""
    store = None
    if block_store_mb > 0:
        from ragattn.blocks import BlockStore

        store = BlockStore(block_store_mb << 20)

    def build(proxy: Any, method: str | None) -> Any:
        extra: dict[str, Any] = {"read_once": store} if store is not None else {}
        if selection != "documents":
            extra["selection"] = selection
        if cascade != "default":
            from ragattn.compress.cascade import Cascade

            extra["cascade"] = None if cascade == "off" else Cascade.parse(cascade)
        return cls(proxy, method=method, **extra) if method else cls(proxy, **extra)

    return build


def create_app(
    settings: Settings | None = None, *, reranker: Any = None, compressor: Any = None
) -> Litestar:
    """Build the service.

    Args:
        settings: service settings; ``Settings.from_env()`` when None.
        reranker: an already loaded ``Reranker`` (tests share one); loaded from settings when None.
        compressor: an already loaded ``Compressor`` on the same proxy; built from settings
            when None.

    Raises:
        ConfigError: invalid ``RAGATTN_*`` values (when ``settings`` is None).
    """
    settings = settings if settings is not None else Settings.from_env()
    for name in ("ragattn", "ragattn_api"):
        logging.getLogger(name).setLevel(settings.log_level)
    metrics = Metrics()
    drain = Drain()

    def build_service(rr: Any, cache: Cache, worker: ModelWorker, tokens: ModelWorker) -> Service:
        """Everything that touches the model, on a thread (seconds)."""
        factory = _compressor_factory(
            Compressor,
            settings.block_store_mb,
            settings.compress_selection,
            settings.compress_cascade,
        )
        compressors: dict[str | None, Any] = {}
        unavailable: str | None = None
        if compressor is not None:
            compressors[None] = compressor
            compressors[getattr(compressor, "method", None)] = compressor
        else:
            try:
                built = factory(rr.proxy, settings.compress_method)
            except (ModelLoadError, MissingDependencyError) as exc:
                if settings.compress_method:
                    raise  # an explicitly configured method must load at startup
                # The library default is optional: a missing probe never takes rerank down.
                unavailable = str(exc)
                logger.warning("the default compressor is unavailable: %s", exc)
            else:
                compressors[None] = built
                compressors[settings.compress_method] = built
        fingerprint = model_fingerprint(
            rr.proxy,
            str(getattr(rr, "method", "")),
            str(getattr(compressors.get(None), "method", "")),
            # Blocks read once give other numbers than the full prompt: never one cache for both.
            *(["read-once"] if settings.block_store_mb > 0 else []),
            *(["sentences"] if settings.compress_selection == "sentences" else []),
            # Another cascade keeps other sentences of a long context.
            *(
                [f"cascade={settings.compress_cascade}"]
                if settings.compress_cascade != "default"
                else []
            ),
        )
        limits = Limits.from_settings(settings)
        checker = LimitChecker(rr.proxy.tokenizer, limits)
        pipeline = None
        if settings.index_dir:
            from ragattn.pipeline import RAGPipeline

            pipeline = RAGPipeline(
                _load_index(settings.index_dir),
                generator=build_generator(settings, rr.proxy),
                reranker=rr,
                compressor=compressors.get(None),
                cache=cache,
                tokenizer=rr.proxy,
                # The service's own checker: the question is checked once, on the tokenizer
                # thread; the model thread only encodes with it (retrieved passages), never
                # changing its tokenizer's state, so the two threads may share it.
                limits=checker,
            )
        warm_up(rr.proxy)
        if reranker is None:
            # Engines handed in (tests, embedding apps) come warm; a loaded one is not yet.
            warm_up_requests(rr, compressors.get(None), checker)
        service = Service(
            settings,
            reranker=rr,
            compressors=compressors,
            compressor_factory=factory,
            cache=cache,
            worker=worker,
            tokens=tokens,
            limits=checker,
            fingerprint=fingerprint,
            pipeline=pipeline,
            unavailable=unavailable,
        )
        if reranker is None:
            # Every per-request method is built before /ready says 200 (engines handed in, as in
            # tests and embedding apps, keep building on first use).
            for name, reason in service.build_methods().items():
                logger.info("method %s is unavailable: %s", name, reason)
        return service

    async def load(app: Litestar, cache: Cache, worker: ModelWorker, tokens: ModelWorker) -> None:
        rr = (
            reranker
            if reranker is not None
            else await anyio.to_thread.run_sync(_load_reranker, settings)
        )
        service = await worker.run("load", build_service, rr, cache, worker, tokens)
        app.state.runtime = runtime_of(rr.proxy)
        app.state.service = service
        if reranker is None:
            # The loaded models are ~400k long-lived objects; a full collection scans them all and
            # holds the GIL for about 0.45 s (2 cores, AVX2), which stalled every refusal of an
            # overload burst behind it. Frozen objects are never scanned again.
            gc.collect()
            gc.freeze()
        logger.info(
            "ragattn service ready: %s, cache=%s, device=%s, dtype=%s",
            service.fingerprint,
            cache.name,
            app.state.runtime["device"],
            app.state.runtime["dtype"],
        )

    def loaded(app: Litestar, task: asyncio.Future[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        logger.critical("loading the model failed; stopping", exc_info=exc)
        app.state.load_error = exc
        stop = app.state.get("on_load_failure")
        if stop is not None:
            stop()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        cache = build_cache(settings)
        worker = ModelWorker(max_pending=settings.queue_size, observe=metrics.observe_model)
        tokens = ModelWorker(
            max_pending=settings.queue_size, observe=metrics.observe_model, name="ragattn-tokens"
        )
        metrics.bind(cache=cache, worker=worker, tokens=tokens)
        loading = asyncio.ensure_future(load(app, cache, worker, tokens))
        try:
            if reranker is not None:
                # An engine handed in (tests, embedding apps): ready before the first request.
                await loading
            else:
                # Load in the background: /health answers at once, /ready is 503 until loaded.
                loading.add_done_callback(functools.partial(loaded, app))
            yield
        finally:
            loading.cancel()
            app.state.service = None
            await anyio.to_thread.run_sync(tokens.close)
            await anyio.to_thread.run_sync(worker.close)
            logger.info("model worker stopped")
            await cache.close()
            _flush_log_queues()

    guards: list[Any] = [ApiKeyGuard(settings.api_keys)] if settings.api_keys else []
    if settings.rate_limit_per_minute > 0:
        guards.append(RateLimitGuard(RateLimiter(settings.rate_limit_per_minute)))
    guards.append(require_json)
    model_routes: list[Any] = [RerankController, CompressController, RerankCompressController]
    if settings.index_dir:
        model_routes += [RetrieveController, AskController]
    # The model routes need the key when keys are configured; the OpenAPI document says so.
    keyed = Router(path="/", route_handlers=model_routes, security=security_requirement(settings))
    app = Litestar(
        route_handlers=[HealthController, *PAGE_HANDLERS, keyed],
        lifespan=[lifespan],
        dependencies=DEPENDENCIES,
        guards=guards,
        middleware=[
            functools.partial(
                edge_middleware,
                max_header_bytes=settings.max_header_bytes,
                body_timeout_s=settings.body_timeout_s,
                drain=drain,
            ),
            cancel_on_disconnect,
        ],
        before_send=[add_response_headers],
        after_request=json_not_found,
        exception_handlers=EXCEPTION_HANDLERS,
        request_class=StrictRequest,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(settings),
    )
    tighten(
        app.openapi_schema,
        settings,
        sorted(COMPRESS_METHODS),
        _index_modes(settings.index_dir) if settings.index_dir else None,
    )
    # Outside Litestar's router and exception handling: every response is counted with the
    # status that was sent, refusals of the edge middleware (400, 431), 404 and 405 included.
    app.asgi_handler = metrics.middleware(app.asgi_handler)
    app.state.metrics = metrics
    app.state.service = None
    app.state.runtime = None  # {"device", "dtype"} of the loaded proxy, for /health and /ready
    app.state.load_error = None
    app.state.settings = settings
    app.state.drain = drain
    return app


__all__ = ["build_cache", "build_generator", "create_app"]
