"""Dependency providers: handlers receive the :class:`Service` and :class:`Metrics` by name."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import Provide

from ragattn.errors import NotReadyError
from ragattn_api.metrics import Metrics
from ragattn_api.service import Service


def provide_service(state: State) -> Service:
    service = state.get("service")
    if service is None:
        raise NotReadyError("the proxy model is still loading; retry shortly")
    return service


def provide_metrics(state: State) -> Metrics:
    metrics: Metrics = state["metrics"]
    return metrics


DEPENDENCIES = {
    "service": Provide(provide_service, sync_to_thread=False),
    "metrics": Provide(provide_metrics, sync_to_thread=False),
}

__all__ = ["DEPENDENCIES", "provide_metrics", "provide_service"]
