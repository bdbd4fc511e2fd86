"""Prometheus metrics on a per-app registry: requests, latency, cache, forward time, queue depth.

A registry per app (not the process-global one) lets tests and several apps in one process coexist.
Cache counters and queue depth are read at scrape time from their owners.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

    from ragattn.cache import Cache

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _LiveCollector(Collector):
    """Reads cache counters and queue state when Prometheus scrapes."""

    def __init__(
        self,
        cache: Callable[[], Cache | None],
        worker: Callable[[], Any],
        tokens: Callable[[], Any] = lambda: None,
    ) -> None:
        self._cache = cache
        self._worker = worker
        self._tokens = tokens

    def collect(self) -> Iterator[Any]:
        cache = self._cache()
        events = CounterMetricFamily(
            "ragattn_cache_events",
            "Result-cache lookups by outcome; errors are also misses",
            labels=["event"],
        )
        if cache is not None:
            stats = cache.stats
            events.add_metric(["hit"], stats.hits)
            events.add_metric(["miss"], stats.misses)
            events.add_metric(["error"], stats.errors)
            events.add_metric(["set"], stats.sets)
        yield events
        worker = self._worker()
        workers = [w for w in (worker, self._tokens()) if w is not None]
        depth = GaugeMetricFamily("ragattn_queue_depth", "Model jobs waiting or running")
        depth.add_metric([], worker.depth if worker is not None else 0)
        yield depth
        coalesced = CounterMetricFamily(
            "ragattn_coalesced_requests", "Requests that shared an identical in-flight computation"
        )
        coalesced.add_metric([], worker.coalesced if worker is not None else 0)
        yield coalesced
        rejected = CounterMetricFamily(
            "ragattn_queue_rejected",
            "Requests refused because a queue was full (the model's or the tokenizer's)",
        )
        rejected.add_metric([], sum(w.rejected for w in workers))
        yield rejected
        dropped = CounterMetricFamily(
            "ragattn_jobs_dropped",
            "Jobs never computed (model or tokenizer): their client left or their deadline "
            "passed first",
        )
        dropped.add_metric([], sum(getattr(w, "dropped", 0) for w in workers))
        yield dropped
        cancelled = CounterMetricFamily(
            "ragattn_jobs_cancelled",
            "Jobs stopped while running, at a layer, window or chunk boundary: their client left, "
            "their deadline passed or the server shut down",
        )
        cancelled.add_metric([], sum(getattr(w, "cancelled", 0) for w in workers))
        yield cancelled


class Metrics:
    """The service's metric objects and their registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "ragattn_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ragattn_request_duration_seconds",
            "HTTP request latency by route template",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.forward = Histogram(
            "ragattn_model_seconds",
            "Time of one model job on the worker thread (tokenize + forward + score)",
            ["task"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._cache: Cache | None = None
        self._worker: Any = None
        self._tokens: Any = None
        self.registry.register(
            _LiveCollector(lambda: self._cache, lambda: self._worker, lambda: self._tokens)
        )

    def bind(self, *, cache: Cache | None, worker: Any, tokens: Any = None) -> None:
        self._cache = cache
        self._worker = worker
        self._tokens = tokens

    def observe_model(self, task: str, seconds: float) -> None:
        self.forward.labels(task).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """ASGI middleware counting and timing each HTTP request by the status sent.

        It wraps the whole app (``Litestar.asgi_handler``), so errors arrive here already as
        responses: a 404 or 405 from the router, a refusal of the edge middleware, a handler's
        error. Requests that match no route are counted under ``route="unmatched"`` (never the
        path: the label set stays bounded whatever clients send).
        """

        async def record(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            # 499 (nginx's "client closed request"): the client left before any response started.
            status = 499
            started = time.perf_counter()

            async def send_wrapper(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, send_wrapper)
            except Exception:
                status = 500
                raise
            finally:
                route = scope.get("path_template") or "unmatched"
                self.requests.labels(route, scope.get("method", ""), str(status)).inc()
                self.latency.labels(route).observe(time.perf_counter() - started)

        return record


__all__ = ["Metrics"]
