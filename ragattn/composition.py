"""The one composition root: the engines, the cache and the pipeline, built from one Settings.

``ragattn serve`` (:func:`ragattn_api.app.create_app`) and ``ragattn ask`` both build what they
run here, so every ``RAGATTN_*`` setting means the same in both (a test runs each one through the
two). The edges read the environment (:meth:`Settings.from_env`), apply their own options with
:func:`dataclasses.replace`, and call these functions; nothing below them reads the environment.

Heavy modules (torch, the methods' registries) are imported inside the functions, so importing
this module stays cheap for the command line's start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragattn.errors import ConfigError, InvalidInputError, MissingDependencyError, ModelLoadError
from ragattn.settings import Settings

if TYPE_CHECKING:
    from ragattn.cache import Cache
    from ragattn.compress import Compressor
    from ragattn.generate import Generator
    from ragattn.limits import LimitChecker, Limits
    from ragattn.pipeline import RAGPipeline, SearchIndex
    from ragattn.proxy import Proxy
    from ragattn.rerank import Reranker

logger = logging.getLogger(__name__)

CompressorFactory = Callable[["Proxy", "str | None"], "Compressor"]
"""Builds a compressor for a method name (None: the library's default) on a loaded proxy."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Engines:
    """The loaded proxy and the engines on it, as ``settings`` asked for them.

    Attributes:
        settings: what they were built from.
        proxy: the one loaded proxy every engine shares.
        reranker: the reranker of ``rerank_method`` (None when the caller asked for none).
        compressor: the compressor of ``compress_method`` (None when asked for none, or when the
            library's default could not be built: see ``compressor_unavailable``).
        compressor_factory: builds the compressor of another method on the same proxy, with the
            same selection, cascade and block store (the service's per-request ``method``).
        compressor_unavailable: why the default compressor could not be built (a missing probe),
            else None. An explicitly configured ``compress_method`` never gets here: it raises.
    """

    settings: Settings
    proxy: Proxy
    reranker: Reranker | None
    compressor: Compressor | None
    compressor_factory: CompressorFactory
    compressor_unavailable: str | None = None


def load_proxy_of(settings: Settings) -> Proxy:
    """The proxy of ``settings``: ``proxy`` loaded on ``device`` in ``dtype`` with ``threads``,
    GGUF weights dequantized into ``proxy_cache_dir``.

    Raises:
        ModelLoadError: the proxy cannot be loaded.
        ConfigError: a device this machine does not have.
    """
    from ragattn.proxy import load_proxy

    return load_proxy(
        settings.proxy,
        device=settings.device,
        dtype=settings.dtype,
        threads=settings.threads,
        cache_dir=settings.proxy_cache_dir,
    )


def build_reranker(settings: Settings, proxy: Proxy) -> Reranker:
    """The reranker of ``rerank_method`` (the library's default when unset) on ``proxy``;
    ``multilingual_proxy`` other than ``auto`` is passed on (``none``: this reranker ranks every
    language; a proxy: the multilingual rerank method runs on it for calls not in English)."""
    from ragattn.rerank import Reranker

    extra: dict[str, object] = {}
    if settings.rerank_method:
        extra["method"] = settings.rerank_method
    if settings.multilingual_proxy != "auto":
        extra["multilingual"] = _multilingual_setting(settings)
    return Reranker(proxy, **extra)  # type: ignore[arg-type]


def compressor_factory(settings: Settings) -> CompressorFactory:
    """Compressors of ``settings``: ``compress_selection``, ``compress_cascade``,
    ``compress_first_stage_prior``, ``models_dir`` and ``multilingual_proxy`` are passed on, and
    with ``block_store_mb`` > 0 the attention methods share one block store of that many MiB
    (passages read once, :mod:`ragattn.blocks`). ``device`` (the loaded proxy's), ``dtype`` and
    ``proxy_cache_dir`` are passed too where set: the compressor is built on the loaded proxy, and
    its multilingual proxy, which it loads itself on the first call not in English, must load as
    the English one did (``threads`` is process-wide: the English load applied it)."""
    from ragattn.compress import Compressor

    store = None
    if settings.block_store_mb > 0:
        from ragattn.blocks import BlockStore

        store = BlockStore(settings.block_store_mb << 20)
    cascade = None
    if settings.compress_cascade not in ("default", "off"):
        from ragattn.compress.cascade import Cascade

        cascade = Cascade.parse(settings.compress_cascade)

    def build(proxy: Proxy, method: str | None) -> Compressor:
        # Only what the settings change is passed, so every other default is the library's own.
        extra: dict[str, object] = {"read_once": store} if store is not None else {}
        if settings.compress_selection != "documents":
            extra["selection"] = settings.compress_selection
        if settings.compress_cascade != "default":
            extra["cascade"] = cascade
        if settings.compress_first_stage_prior:
            extra["first_stage_prior"] = settings.compress_first_stage_prior
        if settings.models_dir:
            extra["models_dir"] = settings.models_dir
        if method:
            extra["method"] = method
        if settings.multilingual_proxy != "auto":
            extra["multilingual"] = _multilingual_setting(settings)
        if settings.device != "auto":
            extra["device"] = str(proxy.device)  # where the English proxy did load
        if settings.dtype != "auto":
            extra["dtype"] = settings.dtype
        if settings.proxy_cache_dir:
            extra["proxy_cache_dir"] = settings.proxy_cache_dir  # the multilingual proxy's too
        return Compressor(proxy, **extra)  # type: ignore[arg-type]

    return build


def _multilingual_setting(settings: Settings) -> str | None:
    """``multilingual_proxy`` as ``Compressor(multilingual=...)`` takes it: ``none`` is None."""
    return None if settings.multilingual_proxy == "none" else settings.multilingual_proxy


def multilingual_name(engines: Engines) -> str | None:
    """The name of the proxy that reads calls not in English, where it is not the English one:
    the default compressor's choice (``Compressor.multilingual``, which resolves ``auto``), else,
    with no default compressor, what the method compressors built from ``settings`` will choose;
    None where the one proxy reads every language."""
    from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY

    if engines.compressor is not None:
        chosen = engines.compressor.multilingual
        return chosen if chosen is None or isinstance(chosen, str) else chosen.name
    if engines.settings.multilingual_proxy == "auto":
        return MULTILINGUAL_PROXY if engines.proxy.name == DEFAULT_PROXY else None
    return _multilingual_setting(engines.settings)


def build_compressor(
    settings: Settings, proxy: Proxy, factory: CompressorFactory | None = None
) -> Compressor:
    """The compressor of ``compress_method`` (the library's default when unset) on ``proxy``.

    Raises:
        ModelLoadError: the method's trained probe is missing.
        MissingDependencyError: the method needs an extra that is not installed.
    """
    return (factory or compressor_factory(settings))(proxy, settings.compress_method)


def build_engines(
    settings: Settings,
    *,
    reranker: Reranker | None = None,
    compressor: Compressor | None = None,
    rerank: bool = True,
    compress: bool = True,
) -> Engines:
    """Load the proxy (unless engines are handed in) and build the engines ``settings`` name.

    The learned assets are read from ``models_dir`` from here on (:func:`ragattn.assets.
    use_models_dir`: the rerank profiles and the fingerprint look them up by proxy name), and
    MiniLM runs in ``embed_dtype`` (:func:`ragattn.embed.use_embed_dtype`). The
    library's default compressor is optional: a missing probe is logged and reported in
    ``compressor_unavailable``, and reranking still works; a configured ``compress_method``
    must load.

    Args:
        settings: what to build.
        reranker: an already loaded reranker (tests share one); its proxy serves every engine.
        compressor: an already built compressor on the same proxy.
        rerank: build a reranker (``ragattn ask --no-rerank`` builds none).
        compress: build a compressor (``ragattn ask --no-compress`` builds none).

    Raises:
        ModelLoadError, ConfigError: the proxy, or a configured method, cannot be loaded.
    """
    from ragattn.assets import use_models_dir
    from ragattn.embed import use_embed_dtype

    use_models_dir(settings.models_dir)
    use_embed_dtype(settings.embed_dtype)
    proxy = reranker.proxy if reranker is not None else load_proxy_of(settings)
    if reranker is None and rerank:
        reranker = build_reranker(settings, proxy)
    factory = compressor_factory(settings)
    unavailable = None
    if compressor is None and compress:
        try:
            compressor = build_compressor(settings, proxy, factory)
        except (ModelLoadError, MissingDependencyError) as exc:
            if settings.compress_method:
                raise  # an explicitly configured method must load at startup
            unavailable = str(exc)
            logger.warning("the default compressor is unavailable: %s", exc)
    return Engines(
        settings=settings,
        proxy=proxy,
        reranker=reranker,
        compressor=compressor,
        compressor_factory=factory,
        compressor_unavailable=unavailable,
    )


def build_cache(settings: Settings) -> Cache:
    """The response cache of ``cache_backend``: an in-process LRU of ``cache_max_items`` entries,
    Redis at ``redis_url`` (with ``redis_timeout_s`` and ``redis_cooldown_s``) or none; entries
    live ``cache_ttl_s`` seconds."""
    from ragattn.cache import MemoryCache, NullCache, RedisCache

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


def build_generator(settings: Settings, proxy: Proxy) -> Generator:
    """The answering model: the OpenAI-compatible ``generator_base_url`` when set (its HTTP
    timeout is the request deadline, 60 s without one), else the proxy itself; at most
    ``generator_max_tokens`` tokens per answer."""
    from ragattn.generate import LocalGenerator, OpenAIChatGenerator

    if settings.generator_base_url and settings.generator_model:
        return OpenAIChatGenerator(
            settings.generator_base_url,
            settings.generator_model,
            api_key=settings.generator_api_key,
            max_tokens=settings.generator_max_tokens,
            # The service runs the call on the model thread: never hold it past the deadline.
            timeout=settings.request_timeout_s or 60.0,
        )
    return LocalGenerator(proxy, max_new_tokens=settings.generator_max_tokens)


def open_index(settings: Settings) -> SearchIndex | None:
    """The retrieval index at ``index_dir`` (None when unset).

    Raises:
        ConfigError: the directory holds no readable index (the message names the variable).
    """
    if not settings.index_dir:
        return None
    from ragattn.pipeline import load_index

    try:
        index: SearchIndex = load_index(settings.index_dir)
    except InvalidInputError as exc:
        raise ConfigError(f"RAGATTN_INDEX_DIR={settings.index_dir!r}: {exc}") from exc
    return index


def build_pipeline(
    engines: Engines,
    index: SearchIndex,
    *,
    cache: Cache | None,
    limits: Limits | LimitChecker,
) -> RAGPipeline:
    """Retrieval over ``index``, the engines' one read (or two passes), ``cache`` in front of the
    generator of :func:`build_generator`; the question and passages are held to ``limits``
    (``max_query_tokens``, ``max_tokens_per_doc``) in the proxy's tokens.

    Args:
        engines: from :func:`build_engines`.
        index: the index searched (:func:`open_index`, or one the caller loaded).
        cache: the response cache (:func:`build_cache`; the service hands in its partitioned one).
        limits: token limits, or the service's own checker to share.
    """
    from ragattn.pipeline import RAGPipeline

    return RAGPipeline(
        index,
        generator=build_generator(engines.settings, engines.proxy),
        reranker=engines.reranker,
        compressor=engines.compressor,
        cache=cache,
        tokenizer=engines.proxy,
        limits=limits,
    )


def engine_fingerprint(engines: Engines) -> str:
    """Identity of the weights, code, assets and every setting that changes an answer: part of
    every cache key, so two configurations never share a cached response."""
    from ragattn.embed import embedder_part
    from ragattn.fingerprint import model_fingerprint

    s = engines.settings
    return model_fingerprint(
        engines.proxy,
        str(getattr(engines.reranker, "method", "")),
        str(getattr(engines.compressor, "method", "")),
        # Blocks read once give other numbers than the full prompt: never one cache for both.
        *(["read-once"] if s.block_store_mb > 0 else []),
        *(["sentences"] if s.compress_selection == "sentences" else []),
        # Another cascade keeps other sentences of a long context.
        *([f"cascade={s.compress_cascade}"] if s.compress_cascade != "default" else []),
        # A first stage's order moves the kept sentences only with a weight above 0.
        *(
            [f"first_stage_prior={s.compress_first_stage_prior:g}"]
            if s.compress_first_stage_prior
            else []
        ),
        # bf16 MiniLM moves cosines in the third decimal: its results are kept apart.
        *([embed] if (embed := embedder_part()) else []),
        # Calls not in English are read by another proxy: a deployment whose one proxy reads
        # them never shares their answers (its keys, with no second proxy, are as before).
        *([f"multilingual={second}"] if (second := multilingual_name(engines)) else []),
    )


__all__ = [
    "CompressorFactory",
    "Engines",
    "build_cache",
    "build_compressor",
    "build_engines",
    "build_generator",
    "build_pipeline",
    "build_reranker",
    "compressor_factory",
    "engine_fingerprint",
    "load_proxy_of",
    "multilingual_name",
    "open_index",
]
