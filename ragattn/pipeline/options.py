"""The pipeline's per-call options: the flow, how many passages, the budget, the context order.

Checked once, in :class:`PipelineOptions`; every stage takes them as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ragattn.errors import InvalidInputError
from ragattn.types import Budget

T = TypeVar("T")

ContextOrder = Literal["best_first", "best_last", "edges"]
ORDERS: tuple[ContextOrder, ...] = ("best_first", "best_last", "edges")
DEFAULT_ORDER: ContextOrder = "edges"
"""The best measured order (docs/benchmarks/pipeline.md: 15 HotpotQA distractor-dev questions over
a pooled index, local 135M generator): mean answer F1 over whole and compressed contexts 0.165 for
``edges``, 0.150 ``best_first``, 0.125 ``best_last``; within the noise of 15 questions."""
Flow = Literal["one_read", "two_pass"]
FLOWS: tuple[Flow, ...] = ("one_read", "two_pass")
DEFAULT_FLOW: Flow = "one_read"
"""One read of every candidate ranks and prunes (the context for the generator, measured in
BENCHMARKS.md, "What reaches the generator")."""
FLOW_DEFAULTS: dict[Flow, tuple[int | None, float]] = {
    "one_read": (None, 0.2),
    "two_pass": (5, 0.5),
}
"""``(top_n, ratio)`` of each flow when the caller gives none: one read keeps a fifth of the
tokens of every candidate; two passes keep half of the best five passages."""
Mode = Literal["hybrid", "bm25", "dense"]


def order_context(items: Sequence[T], order: ContextOrder) -> list[T]:
    """Arrange ``items`` (given best first) for the generator's context.

    - ``best_first``: 1, 2, 3, 4, 5
    - ``best_last``: 5, 4, 3, 2, 1 (the best passage nearest the question)
    - ``edges``: 1, 3, 5, 4, 2: the best two at both ends, the weakest in the middle, where long
      contexts are used least ("lost in the middle").

    Raises:
        InvalidInputError: an unknown order.
    """
    if order == "best_first":
        return list(items)
    if order == "best_last":
        return list(reversed(items))
    if order == "edges":
        return [*items[0::2], *reversed(items[1::2])]
    raise InvalidInputError(f"unknown context order {order!r}; choose one of {', '.join(ORDERS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineOptions:
    """Per-call knobs, checked once here.

    Attributes:
        flow: ``one_read`` (default): one proxy read of every candidate ranks them and keeps
            their best sentences; ``two_pass``: rerank, keep ``top_n``, compress those.
        top_k: candidates retrieved from the index.
        top_n: passages kept after ranking (or the first ``top_n`` hits without a ranker);
            default by flow (:data:`FLOW_DEFAULTS`: every candidate for one read, 5 for two
            passes), resolved here.
        ratio: fraction of context tokens the compressor keeps, in (0, 1] (of every candidate's
            tokens for one read, of the ``top_n`` passages' for two passes); default by flow
            (0.2 and 0.5), resolved here; as the compressor takes it: ``budget``.
        order: how the kept passages are arranged for the generator (:func:`order_context`).
        mode: the index's search mode: ``hybrid``, ``bm25`` or ``dense``.
        rerank: use the pipeline's reranker (ignored when it has none).
        compress: use the pipeline's compressor (ignored when it has none).
    """

    flow: Flow = DEFAULT_FLOW
    top_k: int = 20
    top_n: int | None = None
    ratio: float | None = None
    order: ContextOrder = DEFAULT_ORDER
    mode: Mode = "hybrid"
    rerank: bool = True
    compress: bool = True
    budget: Budget = field(init=False, repr=False, compare=False)

    def params(self) -> dict[str, Any]:
        """The options as given (for cache keys): every field but the derived ``budget``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def __post_init__(self) -> None:
        if self.flow not in FLOWS:
            raise InvalidInputError(f"unknown flow {self.flow!r}; choose one of {', '.join(FLOWS)}")
        default_top_n, default_ratio = FLOW_DEFAULTS[self.flow]
        if self.top_n is None:
            object.__setattr__(self, "top_n", default_top_n)
        ratio = default_ratio if self.ratio is None else self.ratio
        object.__setattr__(self, "ratio", ratio)
        for name in ("top_k", "top_n"):
            value = getattr(self, name)
            if value is None and name == "top_n":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
        try:
            budget = Budget(kind="ratio", value=ratio)
        except InvalidInputError as exc:
            raise InvalidInputError(f"ratio must be in (0, 1], got {self.ratio!r}") from exc
        object.__setattr__(self, "budget", budget)
        if self.order not in ORDERS:
            raise InvalidInputError(
                f"unknown context order {self.order!r}; choose one of {', '.join(ORDERS)}"
            )
        if self.mode not in ("hybrid", "bm25", "dense"):
            raise InvalidInputError(f"unknown search mode {self.mode!r}; use hybrid, bm25, dense")


__all__ = [
    "DEFAULT_FLOW",
    "DEFAULT_ORDER",
    "FLOWS",
    "FLOW_DEFAULTS",
    "ORDERS",
    "ContextOrder",
    "Flow",
    "Mode",
    "PipelineOptions",
    "order_context",
]
