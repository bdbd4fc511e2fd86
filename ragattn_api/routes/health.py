"""Liveness, readiness and Prometheus metrics; public even when API keys are configured."""

from __future__ import annotations

from litestar import Controller, HttpMethod, MediaType, Response, get, route
from litestar.datastructures import State
from litestar.di import NamedDependency

from ragattn.errors import NotReadyError
from ragattn_api.errors import PROBE_RESPONSES
from ragattn_api.metrics import Metrics
from ragattn_api.schemas import HealthResponse, ProxiesOut, ReadyResponse
from ragattn_api.service import Service

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4"


def served_proxies(service: Service) -> ProxiesOut:
    """Which proxy reads which language (:meth:`~ragattn_api.methods.MethodEngines.second_proxy`):
    the English one names itself for every language where there is no second one."""
    second = service.second_proxy()
    other, loaded = second if second is not None else (service.model_name, True)
    return ProxiesOut(
        english=service.model_name, other_languages=other, other_languages_loaded=loaded
    )


class HealthController(Controller):
    opt = {"public": True}
    tags = ["health"]

    @route(
        "/health",
        http_method=[HttpMethod.GET, HttpMethod.HEAD],
        summary="Liveness: the process serves HTTP (503 if the model failed to load)",
        responses=PROBE_RESPONSES,
    )
    async def health(self, state: State) -> HealthResponse:
        if state.get("load_error") is not None:
            raise NotReadyError("the proxy model failed to load; see the server log")
        runtime = state.get("runtime") or {}
        budget = state.get("request_budget")
        service: Service | None = state.get("service")
        return HealthResponse(
            status="ok",
            device=runtime.get("device"),
            dtype=runtime.get("dtype"),
            max_request_tokens=budget.tokens if budget is not None else None,
            proxies=served_proxies(service) if service is not None else None,
        )

    @route(
        "/ready",
        http_method=[HttpMethod.GET, HttpMethod.HEAD],
        summary="Readiness: the proxy is loaded, has served a warm-up request of each kind, the "
        "server is not shutting down and the model queue is not full (503 not_ready otherwise); "
        "'busy' says the model thread has work",
        responses=PROBE_RESPONSES,
    )
    async def ready(self, state: State) -> ReadyResponse:
        drain = state.get("drain")
        if drain is not None and drain.started:
            raise NotReadyError("the server is shutting down")
        service: Service | None = state.get("service")
        if service is None:
            raise NotReadyError("the proxy model is still loading")
        depth, size = service.worker.depth, service.worker.max_pending
        if depth >= size:
            # A new model request would be refused (429): send traffic elsewhere for now.
            raise NotReadyError(f"the model queue is full ({depth} of {size} jobs)")
        runtime = state.get("runtime") or {}
        return ReadyResponse(
            status="ready",
            model=service.model_name,
            rerank_method=str(getattr(service.reranker, "method", "")),
            cache=service.cache.name,
            degraded=not await service.cache_healthy(),
            device=runtime.get("device", ""),
            dtype=runtime.get("dtype", ""),
            busy=depth > 0,
            queue_depth=depth,
            queue_size=size,
            proxies=served_proxies(service),
        )

    @get(
        "/metrics", summary="Prometheus metrics", media_type=MediaType.TEXT, include_in_schema=True
    )
    async def metrics(self, metrics: NamedDependency[Metrics]) -> Response[bytes]:
        return Response(metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)
