"""The application state of the service, typed: one holder instead of untyped ``app.state`` keys.

Litestar hands routes and dependencies ``app.state``; :func:`ragattn_api.app.create_app` makes it
a :class:`ServiceState`, so the app factory, the lifespan and the server read and write typed
attributes, while routes keep reading keys (``state.get("service")``) as Litestar gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from litestar.datastructures import State
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ragattn.cache import RedisCircuit
from ragattn.request_budget import RequestBudget
from ragattn.settings import Settings
from ragattn_api.edge import Drain
from ragattn_api.metrics import Metrics
from ragattn_api.service import Service


class _RedisCircuitCollector(Collector):
    """The process's circuit for the service's Redis (cache and rate limit), read at scrape time;
    holding it keeps that one circuit alive for the app's life."""

    def __init__(self, circuit: RedisCircuit) -> None:
        self._circuit = circuit

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        events = CounterMetricFamily(
            "ragattn_redis_events",
            "Calls to Redis (cache and rate limit): failure: found it unreachable (a timeout, a "
            "refused connection) and opened the circuit; bypassed: not sent, the circuit was open",
            labels=["event"],
        )
        events.add_metric(["failure"], self._circuit.failures)
        events.add_metric(["bypassed"], self._circuit.bypassed)
        yield events
        gauge = GaugeMetricFamily(
            "ragattn_redis_circuit_open", "1 while Redis is bypassed after it was unreachable"
        )
        gauge.add_metric([], int(self._circuit.is_open))
        yield gauge


class ServiceState(State):
    """What the service holds between requests (values live in the :class:`State` mapping).

    Attributes:
        settings: the settings the app was built from.
        metrics: Prometheus metrics of this app.
        drain: set on SIGTERM: bodies still arriving are cut, ``/ready`` turns 503.
        service: the loaded model side; None while loading and after shutdown.
        runtime: ``{"device", "dtype"}`` of the loaded proxy, for ``/health`` and ``/ready``.
        request_budget: the proxy tokens one request may ask for, and how they were chosen
            (:mod:`ragattn.request_budget`); None until loaded.
        load_error: why loading the model failed (``/health`` then answers 503).
        on_load_failure: called when loading fails (the server stops itself).
    """

    __slots__ = ()

    settings: Settings
    metrics: Metrics
    drain: Drain
    service: Service | None
    runtime: dict[str, str] | None
    request_budget: RequestBudget | None
    load_error: BaseException | None
    on_load_failure: Callable[[], None] | None

    @classmethod
    def initial(cls, settings: Settings) -> ServiceState:
        """The state of an app that has not loaded its model yet; with the Redis backend its
        metrics report the circuit that the cache and the rate limit share."""
        metrics = Metrics()
        if settings.cache_backend == "redis" and settings.redis_url:
            circuit = RedisCircuit.of(settings.redis_url, cooldown_s=settings.redis_cooldown_s)
            metrics.registry.register(_RedisCircuitCollector(circuit))
        return cls(
            {
                "settings": settings,
                "metrics": metrics,
                "drain": Drain(),
                "service": None,
                "runtime": None,
                "request_budget": None,
                "load_error": None,
                "on_load_failure": None,
            }
        )


__all__ = ["ServiceState"]
