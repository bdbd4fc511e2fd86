"""Serving ``/v1/ask``: the library's :class:`~ragattn.pipeline.RAGPipeline` over the service's
index, proxy, cache and model worker.

The pipeline runs with the service's loaded reranker and default compressor and a
:class:`~ragattn.generate.LocalGenerator` on the same proxy (the packaged 135M model unless
``RAGATTN_PROXY`` names another), so one copy of the weights serves every route; with
``RAGATTN_GENERATOR_BASE_URL`` and ``RAGATTN_GENERATOR_MODEL`` an OpenAI-compatible endpoint answers
instead (its HTTP call also runs on the model worker; failures are 502 ``generator_error``).
Model stages (retrieve to compress, then generate) are jobs on the service's worker, behind its
queue limit; the answer cache is the service's cache, keyed by the pipeline (generator, options,
index, question and ordered context).
"""

from __future__ import annotations

import weakref
from typing import Any

from api.schemas import AskRequest, AskResponse
from api.service import Service, new_id
from ragattn.errors import InputTooLargeError, InvalidInputError
from ragattn.generate import Generator, LocalGenerator, OpenAIChatGenerator
from ragattn.pipeline import DEFAULT_ORDER, PipelineOptions, RAGPipeline

_GENERATORS: weakref.WeakKeyDictionary[Service, Generator] = weakref.WeakKeyDictionary()


async def answer(service: Service, req: AskRequest) -> tuple[AskResponse, bool]:
    """Answer ``req.question`` over the service's index; returns the response and the cache flag.

    Raises:
        InvalidInputError: no index configured, an empty question or invalid options.
        InputTooLargeError: ``top_k`` above ``RAGATTN_MAX_DOCUMENTS``.
    """
    if service.index is None:
        raise InvalidInputError("no retrieval index is configured (set RAGATTN_INDEX_DIR)")
    if not req.question.strip():
        raise InvalidInputError("question must be a non-empty string")
    options = PipelineOptions(
        top_k=req.top_k,
        top_n=min(req.top_n, req.top_k),
        ratio=req.ratio,
        order=req.order or DEFAULT_ORDER,
        mode=req.mode,
        rerank=req.rerank,
        compress=req.compress,
    )
    if req.top_k > service.settings.max_documents:
        raise InputTooLargeError(
            f"top_k={req.top_k} exceeds RAGATTN_MAX_DOCUMENTS={service.settings.max_documents}"
        )
    compressor = (
        await service.worker.run("ask", service._compressor, None) if req.compress else None
    )
    pipeline = RAGPipeline(
        service.index,
        generator=_generator(service),
        reranker=service.reranker,
        compressor=compressor,
        cache=service.cache,
        tokenizer=service.proxy,
    )

    async def on_worker(fn: Any) -> Any:
        return await service.worker.run("ask", fn)

    result = await pipeline.aask(req.question, options, run_blocking=on_worker)
    return AskResponse.from_result(result, id=new_id(), return_text=req.return_text), (
        result.cache_hit
    )


def _generator(service: Service) -> Generator:
    """The service's generator, built once: an endpoint when configured, else the proxy."""
    generator = _GENERATORS.get(service)
    if generator is None:
        settings = service.settings
        if settings.generator_base_url and settings.generator_model:
            generator = OpenAIChatGenerator(
                settings.generator_base_url,
                settings.generator_model,
                api_key=settings.generator_api_key,
                max_tokens=settings.generator_max_tokens,
            )
        else:
            generator = LocalGenerator(service.proxy, max_new_tokens=settings.generator_max_tokens)
        _GENERATORS[service] = generator
    return generator


__all__ = ["answer"]
