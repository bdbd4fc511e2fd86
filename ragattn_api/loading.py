"""The service's model side, loaded on the model thread: engines, warm-up, budget, :class:`Service`.

The engines, the cache and the pipeline come from the one composition root,
:mod:`ragattn.composition`, as they do for ``ragattn ask``; this module adds what only a server
needs: the warm-up that has to pass before ``/ready`` says 200, the request budget (measured on
this machine, or by the first replica on a shared Redis: :mod:`ragattn.request_budget`), the
token-limit checker shared with the tokenizer thread and the per-key cache partitions.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragattn._optional import require
from ragattn.cache import Cache, redis_errors
from ragattn.composition import Engines, build_cache, build_engines, build_pipeline, open_index
from ragattn.composition import engine_fingerprint as fingerprint_of
from ragattn.errors import ModelLoadError
from ragattn.limits import LimitChecker, Limits
from ragattn.request_budget import (
    ADOPT_FACTOR,
    RequestBudget,
    ThroughputRecord,
    choose_budget,
    measure_tokens_per_second,
)
from ragattn.settings import Settings
from ragattn_api.service import Service
from ragattn_api.tenancy import PartitionedCache
from ragattn_api.worker import ModelWorker

if TYPE_CHECKING:
    from ragattn.compress import Compressor
    from ragattn.proxy import Proxy
    from ragattn.rerank import Reranker

logger = logging.getLogger(__name__)

BUDGET_KEY_PREFIX = "ragattn:budget:v1:"
"""Redis key of a deployment's measured throughput, followed by a digest of its fingerprint."""
BUDGET_TTL_S = 86_400
"""Seconds the recorded throughput lives after it is written (a day). It only has to outlive one
rollout or a day's scale-ups, whose replicas start close together and must agree; after a day the
next replica to start measures and records anew, so a wrong value within range (written by hand,
or measured at a busy moment) lasts at most a day, and a new machine under the same version is
measured again without anyone deleting the key."""

_REPLACE_IF_UNCHANGED = """
local current = redis.call('GET', KEYS[1])
if (ARGV[1] == '0' and not current) or (ARGV[1] == '1' and current == ARGV[2]) then
    redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
end
return redis.call('GET', KEYS[1])
"""
"""Write ARGV[3] with a TTL of ARGV[4] s only if the key still holds what the replica read
(absent when ARGV[1] is '0', else the bytes ARGV[2]); return the key's value after. One script:
atomic, so of two replicas that found the same bad value only the first replaces it."""


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
    """The response cache of ``settings`` (:func:`ragattn.composition.build_cache`), partitioned per
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


class RedisThroughput:
    """A deployment's measured throughput in Redis, the first replica's measurement, adopted by
    every later one within range of its own (a :class:`~ragattn.request_budget.ThroughputRecord`).

    One string key per fingerprint (weights, code, assets, methods: a new version measures
    anew), written with a TTL of :data:`BUDGET_TTL_S` (a value adopted without one, written by
    hand or by an older version, is given one). A value that is not a positive finite
    number, or that the replica's range check refuses, is replaced by the replica's own
    measurement (a warning in the log), atomically and only if no other replica changed it
    meanwhile. Read and written once, at start-up, on the model thread, hence the synchronous
    client.
    """

    def __init__(self, url: str, key: str, *, timeout_s: float, ttl_s: int = BUDGET_TTL_S) -> None:
        self.url = url
        self.key = key
        self.ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._errors: tuple[type[BaseException], ...] = redis_errors()

    def _client(self) -> Any:
        redis = require("redis", extra="redis")
        return redis.Redis.from_url(
            self.url, socket_timeout=self._timeout_s, socket_connect_timeout=self._timeout_s
        )

    def settle(self, tokens_per_second: float, acceptable: Callable[[float], bool]) -> float | None:
        try:
            with self._client() as client:
                raw = client.get(self.key)
                recorded = _throughput(raw)
                if recorded is not None and acceptable(recorded):
                    logger.info(
                        "request budget: %.1f tokens/s recorded under %s", recorded, self.key
                    )
                    if client.ttl(self.key) == -1:  # written without one (by hand, an old version)
                        client.expire(self.key, self.ttl_s)
                    return recorded
                if raw is not None:
                    self._refused(raw, tokens_per_second)
                args = ("0", "") if raw is None else ("1", raw)
                after = client.eval(
                    _REPLACE_IF_UNCHANGED,
                    1,
                    self.key,
                    *args,
                    repr(tokens_per_second),
                    self.ttl_s,
                )
        except self._errors as exc:
            self._unshared(exc)
            return None
        agreed = _throughput(after)  # ours, or the replica's that came first
        if agreed is None or not acceptable(agreed):
            logger.warning(
                "the request budget is not shared: another replica recorded %s under %s, "
                "outside this replica's range; this replica uses its own measurement "
                "(%.1f tokens/s)",
                _shown(after),
                self.key,
                tokens_per_second,
            )
            return None
        return agreed

    def _refused(self, raw: bytes, tokens_per_second: float) -> None:
        logger.warning(
            "the recorded request budget throughput %s under %s is not a throughput within "
            "%gx of this replica's %.1f tokens/s; not adopted, replaced by this replica's "
            "measurement (whoever writes this key is trusted with the budget within that range)",
            _shown(raw),
            self.key,
            ADOPT_FACTOR,
            tokens_per_second,
        )

    def _unshared(self, exc: BaseException) -> None:
        logger.warning(
            "the request budget is not shared (%s: %s at %s); this replica uses its own "
            "measurement, which other replicas may not share",
            type(exc).__name__,
            exc,
            self.key,
        )


def _throughput(raw: bytes | None) -> float | None:
    """A recorded value as proxy tokens per second; None when absent or not a positive finite
    number (``b"fast"``, ``b"nan"``, ``b"-1"``)."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _shown(raw: bytes | None) -> str:
    """A recorded value for the log: at most 64 bytes, quoted (anyone may have written it)."""
    if raw is None:
        return "nothing"
    return repr(raw[:64]) + (f" ({len(raw)} bytes)" if len(raw) > 64 else "")


def throughput_record(settings: Settings, fingerprint: str) -> ThroughputRecord | None:
    """Where the replicas of ``settings`` share their measured throughput: Redis with
    ``cache_backend=redis``, keyed by the engines' ``fingerprint``; else None (per process)."""
    if settings.cache_backend != "redis" or not settings.redis_url:
        return None
    digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:32]
    return RedisThroughput(
        settings.redis_url, BUDGET_KEY_PREFIX + digest, timeout_s=settings.redis_timeout_s
    )


def request_budget(
    settings: Settings, engines: Engines, *, measure: bool, fingerprint: str
) -> RequestBudget:
    """The budget of ``settings`` (:func:`ragattn.request_budget.choose_budget`), measured on
    the slowest verb this service has (``rerank_compress``, else ``rerank``) when ``measure``,
    and shared with the other replicas on the same Redis (:func:`throughput_record`)."""
    engine = engines.compressor if engines.compressor is not None else engines.reranker
    timed = None
    if measure and engine is not None:
        timed = functools.partial(measure_tokens_per_second, engine, engines.proxy.tokenizer)
    record = throughput_record(settings, fingerprint) if timed is not None else None
    return choose_budget(settings, timed, record=record)


def service_limits(settings: Settings, budget: RequestBudget) -> Limits:
    """The limits of ``settings`` under ``budget``. The per-document limit is at most the
    request budget (a longer document could never be served), and then says so: the 413 that
    names the limit credits the number to the budget, not to ``RAGATTN_MAX_TOKENS_PER_DOC``. The
    advice of a 413 is computed from each request (:mod:`ragattn.limits.advice`), not from this
    limit."""
    limits = Limits.from_settings(settings, budget)
    if limits.max_tokens_per_doc <= limits.max_request_tokens:
        return limits
    return dataclasses.replace(
        limits,
        max_tokens_per_doc=limits.max_request_tokens,
        max_tokens_per_doc_basis=(
            f"RAGATTN_MAX_TOKENS_PER_DOC={limits.max_tokens_per_doc} lowered to the request "
            f"budget, {limits.max_request_tokens} tokens"
        ),
    )


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
    fingerprint = fingerprint_of(engines)
    budget = request_budget(settings, engines, measure=not handed.given, fingerprint=fingerprint)
    checker = LimitChecker(engines.proxy.tokenizer, service_limits(settings, budget))
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
        fingerprint=fingerprint,
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
    "BUDGET_KEY_PREFIX",
    "BUDGET_TTL_S",
    "HandedIn",
    "LoadedService",
    "RedisThroughput",
    "Workers",
    "build_service",
    "request_budget",
    "runtime_of",
    "service_cache",
    "service_limits",
    "throughput_record",
    "warm_up",
    "warm_up_requests",
]
