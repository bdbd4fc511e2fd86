"""The service's model side, loaded on the model thread: engines, warm-up, budget, :class:`Service`.

The engines, the cache and the pipeline come from the one composition root,
:mod:`ragattn.assemble`, as they do for ``ragattn ask``; this module adds what only a server
needs: the warm-up that has to pass before ``/ready`` says 200, the request budget measured on
this machine (:mod:`ragattn.request_budget`), the token-limit checker shared with the tokenizer
thread and the per-key cache partitions.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragattn.assemble import Engines, build_cache, build_engines, build_pipeline, open_index
from ragattn.assemble import engine_fingerprint as fingerprint_of
from ragattn.cache import Cache
from ragattn.errors import ModelLoadError
from ragattn.limits import LimitChecker, Limits
from ragattn.request_budget import RequestBudget, choose_budget, measure_tokens_per_second
from ragattn.settings import Settings
from ragattn_api.service import Service
from ragattn_api.tenancy import PartitionedCache
from ragattn_api.worker import ModelWorker

if TYPE_CHECKING:
    from ragattn.compress import Compressor
    from ragattn.proxy import Proxy
    from ragattn.rerank import Reranker

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandedIn:
    """Engines handed to ``create_app`` instead of loaded from settings (tests share one proxy;
    embedding apps have their own). They come warm: no warm-up and no budget measurement."""

    reranker: Reranker | None = None
    compressor: Compressor | None = None

    @property
    def given(self) -> bool:
        """True when the caller handed in a reranker (its proxy then serves every engine)."""
        return self.reranker is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Workers:
    """The service's two threads: the model thread and the tokenizer thread (token limits)."""

    model: ModelWorker
    tokens: ModelWorker


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedService:
    """What loading produced: the service, where its proxy runs, and the request budget."""

    service: Service
    runtime: dict[str, str]
    budget: RequestBudget


def service_cache(settings: Settings) -> Cache:
    """The response cache of ``settings`` (:func:`ragattn.assemble.build_cache`), partitioned per
    API key with ``cache_scope=key``."""
    cache = build_cache(settings)
    return PartitionedCache(cache) if settings.cache_scope == "key" else cache


def runtime_of(proxy: Proxy) -> dict[str, str]:
    """The device (``cpu``, ``cuda:0``, ``mps``) and weights dtype the proxy runs with."""
    from ragattn.devices import dtype_name

    return {"device": str(proxy.device), "dtype": dtype_name(proxy.dtype)}


def warm_up(proxy: Proxy) -> None:
    """One single-token forward: the model must compute before /ready says so.

    Raises:
        ModelLoadError: the forward gives non-finite values (broken weights).
    """
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


def warm_up_requests(reranker: Reranker, compressor: Compressor | None) -> None:
    """Run the shapes of real requests once (rerank, compress) before /ready.

    Their first call loads what a single forward does not touch (the embedder, lexical indexes,
    probe weights, attention kernels); without this the first requests after /ready said 200
    paid for it and missed short deadlines.
    """
    from ragattn.demo import DOCUMENTS, QUERY

    docs = list(DOCUMENTS[:3])
    reranker.rerank(QUERY, docs, top_n=2)
    if compressor is not None:
        compressor.compress(QUERY, docs[:2], ratio=0.5)


def request_budget(settings: Settings, engines: Engines, *, measure: bool) -> RequestBudget:
    """The budget of ``settings`` (:func:`ragattn.request_budget.choose_budget`), measured on
    the slowest verb this service has (``rerank_compress``, else ``rerank``) when ``measure``."""
    engine = engines.compressor if engines.compressor is not None else engines.reranker
    timed = None
    if measure and engine is not None:
        timed = functools.partial(measure_tokens_per_second, engine, engines.proxy.tokenizer)
    return choose_budget(settings, timed)


def build_service(
    settings: Settings, handed: HandedIn, cache: Cache, workers: Workers
) -> LoadedService:
    """Everything that touches the model (seconds to minutes); runs on the model thread.

    Raises:
        ModelLoadError, ConfigError: the proxy, a configured method or the index cannot be loaded.
    """
    engines = build_engines(settings, reranker=handed.reranker, compressor=handed.compressor)
    if engines.reranker is None:  # build_engines builds one unless asked not to
        raise ModelLoadError("the service needs a reranker")
    warm_up(engines.proxy)
    if not handed.given:
        # Engines handed in (tests, embedding apps) come warm; a loaded one is not yet.
        warm_up_requests(engines.reranker, engines.compressor)
    budget = request_budget(settings, engines, measure=not handed.given)
    checker = LimitChecker(engines.proxy.tokenizer, Limits.from_settings(settings, budget))
    checker.tokens.offsets(["warm up the token counter"])
    index = open_index(settings)
    # The service's own checker: the question is checked once, on the tokenizer thread; the
    # model thread only encodes with it (retrieved passages), never changing its tokenizer's
    # state, so the two threads may share it.
    pipeline = (
        None if index is None else build_pipeline(engines, index, cache=cache, limits=checker)
    )
    service = Service(
        settings,
        reranker=engines.reranker,
        compressors={} if engines.compressor is None else {None: engines.compressor},
        compressor_factory=engines.compressor_factory,
        cache=cache,
        worker=workers.model,
        tokens=workers.tokens,
        limits=checker,
        fingerprint=fingerprint_of(engines),
        pipeline=pipeline,
        unavailable=engines.compressor_unavailable,
    )
    if not handed.given:
        # Every per-request method is built before /ready says 200 (engines handed in, as in
        # tests and embedding apps, keep building on first use).
        for name, reason in service.build_methods().items():
            logger.info("method %s is unavailable: %s", name, reason)
    return LoadedService(service=service, runtime=runtime_of(engines.proxy), budget=budget)


__all__ = [
    "HandedIn",
    "LoadedService",
    "Workers",
    "build_service",
    "request_budget",
    "runtime_of",
    "service_cache",
    "warm_up",
    "warm_up_requests",
]
