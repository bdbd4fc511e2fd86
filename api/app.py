"""The Litestar application factory: settings in, app out; the lifespan owns the model and cache.

``create_app()`` reads ``RAGATTN_*`` once; tests pass ``Settings`` and may hand in an already
loaded reranker/compressor so one proxy serves the whole test session.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar import Litestar
from litestar.datastructures import ResponseHeader
from litestar.openapi.config import OpenAPIConfig

import ragattn
from api.auth import ApiKeyGuard, RateLimiter, RateLimitGuard
from api.deps import DEPENDENCIES
from api.disconnect import cancel_on_disconnect
from api.errors import EXCEPTION_HANDLERS
from api.metrics import Metrics
from api.routes.ask import AskController
from api.routes.compress import CompressController, RerankCompressController
from api.routes.health import HealthController
from api.routes.page import PAGE_HANDLERS
from api.routes.rerank import RerankController
from api.routes.retrieve import RetrieveController
from api.service import Service, model_fingerprint
from api.worker import ModelWorker
from ragattn.cache import Cache, MemoryCache, NullCache, RedisCache
from ragattn.errors import ConfigError, ModelLoadError
from ragattn.settings import Settings

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
    if settings.cache_backend == "redis":
        assert settings.redis_url is not None  # guaranteed by Settings validation
        return RedisCache(
            settings.redis_url,
            ttl_s=settings.cache_ttl_s,
            timeout_s=settings.redis_timeout_s,
            cooldown_s=settings.redis_cooldown_s,
        )
    if settings.cache_backend == "memory":
        return MemoryCache(max_items=settings.cache_max_items, ttl_s=settings.cache_ttl_s)
    return NullCache()


def _compressor_class() -> Any | None:
    """The library's Compressor when this build has one (it is optional while compress lands)."""
    if importlib.util.find_spec("ragattn.compress") is None:
        return None
    from ragattn import compress

    return getattr(compress, "Compressor", None)


def _load_reranker(settings: Settings) -> Any:
    from ragattn import Reranker, load_proxy

    proxy = load_proxy(
        settings.proxy,
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


def warm_up(proxy: Any) -> None:
    """One single-token forward: the model must compute before /ready says so."""
    import torch

    tokenizer = proxy.tokenizer
    token = next((t for t in (tokenizer.bos_token_id, tokenizer.eos_token_id) if t is not None), 0)
    with torch.inference_mode():
        out = proxy.decoder(input_ids=torch.tensor([[token]], dtype=torch.long), use_cache=False)
    if not bool(torch.isfinite(out.last_hidden_state).all()):
        raise ModelLoadError(
            f"the proxy {proxy.name!r} computes non-finite values; check its weights"
        )


def _compressor_factory(cls: Any) -> Callable[[Any, str | None], Any]:
    def build(proxy: Any, method: str | None) -> Any:
        return cls(proxy, method=method) if method else cls(proxy)

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
    for name in ("ragattn", "api"):
        logging.getLogger(name).setLevel(settings.log_level)
    metrics = Metrics()
    compressor_cls = _compressor_class()
    serve_compress = compressor is not None or compressor_cls is not None
    one_pass_owner = compressor if compressor is not None else compressor_cls
    serve_one_pass = one_pass_owner is not None and hasattr(one_pass_owner, "rerank_and_compress")

    async def load(app: Litestar, cache: Cache, worker: ModelWorker) -> None:
        rr = (
            reranker
            if reranker is not None
            else await anyio.to_thread.run_sync(_load_reranker, settings)
        )
        factory = _compressor_factory(compressor_cls) if compressor_cls is not None else None
        comp = compressor
        if comp is None and factory is not None and settings.compress_method:
            # An explicitly configured method must load at startup; the library default is
            # built on first use, so a missing probe never takes rerank down with it.
            comp = await anyio.to_thread.run_sync(factory, rr.proxy, settings.compress_method)
        fingerprint = await anyio.to_thread.run_sync(
            model_fingerprint,
            rr.proxy,
            str(getattr(rr, "method", "")),
            str(getattr(comp, "method", "")),
        )
        index = None
        if settings.index_dir:
            index = await anyio.to_thread.run_sync(_load_index, settings.index_dir)
        await anyio.to_thread.run_sync(warm_up, rr.proxy)
        app.state.service = Service(
            settings,
            reranker=rr,
            compressor=comp,
            compressor_factory=factory,
            cache=cache,
            worker=worker,
            fingerprint=fingerprint,
            index=index,
        )
        logger.info("ragattn service ready: %s, cache=%s", fingerprint, cache.name)

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
        metrics.bind(cache=cache, worker=worker)
        loading = asyncio.ensure_future(load(app, cache, worker))
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
            await anyio.to_thread.run_sync(worker.close)
            logger.info("model worker stopped")
            await cache.close()
            _flush_log_queues()

    guards: list[Any] = [ApiKeyGuard(settings.api_keys)] if settings.api_keys else []
    if settings.rate_limit_per_minute > 0:
        guards.append(RateLimitGuard(RateLimiter(settings.rate_limit_per_minute)))
    handlers: list[Any] = [HealthController, RerankController, *PAGE_HANDLERS]
    if serve_compress:
        handlers.append(CompressController)
    if serve_one_pass:
        handlers.append(RerankCompressController)
    if settings.index_dir:
        handlers.append(RetrieveController)
        handlers.append(AskController)
    app = Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        dependencies=DEPENDENCIES,
        guards=guards,
        middleware=[metrics.middleware, cancel_on_disconnect],
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=settings.max_body_bytes,
        response_headers=[ResponseHeader(name="X-Content-Type-Options", value="nosniff")],
        openapi_config=OpenAPIConfig(
            title="ragattn",
            version=ragattn.__version__,
            path="/schema",
            description="Attention-based reranking and compression of retrieved context.",
        ),
    )
    app.state.metrics = metrics
    app.state.service = None
    app.state.load_error = None
    app.state.settings = settings
    return app


__all__ = ["build_cache", "create_app"]
