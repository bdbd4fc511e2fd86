"""The pipeline's per-call options: the flow, how many passages, the budget, the context order.

Checked once, in :class:`PipelineOptions`; every stage takes them as they are. Every option is
honoured by the flow that runs, or refused: ``rerank=False`` or ``compress=False`` cannot apply
to the one read (it ranks and prunes in one pass), so without a flow named they choose two
passes, and with ``flow="one_read"`` named they are an :class:`~ragattn.errors.InvalidInputError`;
a ``ratio`` or a ``language`` with ``compress=False`` (nothing to compress) is one too. Counts are
bounded (:data:`~ragattn.settings.COUNT_CEILING`) before anything computes with them. A
``max_context_tokens`` with ``compress=False`` is refused too.

The one read's default budget is every door's, :data:`~ragattn.types.DEFAULT_BUDGET` (a ratio of
0.2 with a ceiling of 1,024 tokens, so the generator's context stops growing with the
candidates); the two-pass flow keeps its own ratio under the same ceiling
(:data:`FLOW_DEFAULTS`). A ``ratio`` the caller gives has no ceiling unless
``max_context_tokens`` gives one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ragattn.errors import InvalidInputError
from ragattn.languages import AUTO, check_language
from ragattn.settings import COUNT_CEILING
from ragattn.types import DEFAULT_BUDGET, DEFAULT_MAX_CONTEXT_TOKENS, MAX_TARGET_TOKENS, Budget
from ragattn.validation import shown

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
    "one_read": (None, DEFAULT_BUDGET.value),
    "two_pass": (5, 0.5),
}
"""``(top_n, ratio)`` of each flow when the caller gives none. The one read compresses every
candidate, as a compress call does, and takes every door's :data:`~ragattn.types.DEFAULT_BUDGET`
(a fifth of the tokens). Two passes keep their own ratio, the one exception: they compress only
the best five passages their reranker kept, a quarter of the default 20 candidates: half of
those is about an eighth of the candidates' tokens, near the one read's fifth, where a fifth of
them would be a twentieth. A default ratio keeps at most
:data:`~ragattn.types.DEFAULT_MAX_CONTEXT_TOKENS` tokens in both flows."""
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
        flow: ``one_read``: one proxy read of every candidate ranks them and keeps their best
            sentences; ``two_pass``: rerank, keep ``top_n``, compress those. ``None`` (the
            default): ``one_read``, or ``two_pass`` when ``rerank`` or ``compress`` is off (the
            one read can skip neither); resolved here.
        top_k: candidates retrieved from the index, 1..1000000.
        top_n: passages kept after ranking (or the first ``top_n`` hits without a ranker);
            default by flow (:data:`FLOW_DEFAULTS`: every candidate for one read, 5 for two
            passes), resolved here.
        ratio: fraction of context tokens the compressor keeps, in (0, 1] (of every candidate's
            tokens for one read, of the ``top_n`` passages' for two passes); default by flow
            (0.2 and 0.5), resolved here; as the compressor takes it: ``budget``.
        max_context_tokens: the most context tokens the compressor keeps whatever the ratio
            gives (a ceiling on ``ratio``, in the pipeline's counting tokenizer), 1..10000000;
            default :data:`~ragattn.types.DEFAULT_MAX_CONTEXT_TOKENS` (1,024: what the one
            read's attention can back, and what fits a 2k-4k-token generator window) when
            ``ratio`` is the default, none when the caller gives a ``ratio``; resolved here
            (None with compression off); only with ``compress``.
        order: how the kept passages are arranged for the generator (:func:`order_context`).
        mode: the index's search mode: ``hybrid``, ``bm25`` or ``dense``.
        rerank: use the pipeline's reranker (ignored when it has none); ``False`` only with
            two passes.
        compress: use the pipeline's compressor (ignored when it has none); ``False`` only
            with two passes, and without a ``ratio`` or a ``language``.
        language: the passages' language for the compressor's sentence splitting: an ISO 639-1
            code of :data:`~ragattn.sentences.LANGUAGES`, or ``"auto"`` (default: by each
            passage's script); another than ``"auto"`` only with ``compress``.

    Raises:
        InvalidInputError: an unknown flow, order or mode; a count out of range; an option the
            flow cannot honour (the message names both).
    """

    flow: Flow | None = None
    top_k: int = 20
    top_n: int | None = None
    ratio: float | None = None
    max_context_tokens: int | None = None
    order: ContextOrder = DEFAULT_ORDER
    mode: Mode = "hybrid"
    rerank: bool = True
    compress: bool = True
    language: str = AUTO
    budget: Budget = field(init=False, repr=False, compare=False)

    def params(self) -> dict[str, Any]:
        """The options as given (for cache keys): every field but the derived ``budget``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    def __post_init__(self) -> None:
        flow = self._flow()
        object.__setattr__(self, "flow", flow)
        if self.ratio is not None and not self.compress:
            raise InvalidInputError(
                f"ratio is the compression budget and does not apply with compress=false "
                f"(flow={flow} keeps whole passages); leave ratio out or send compress=true"
            )
        ceiling = self._ceiling(flow)
        check_language(self.language)
        if self.language != AUTO and not self.compress:
            raise InvalidInputError(
                f"language sets the compressor's sentence splitting and does not apply with "
                f"compress=false (flow={flow} keeps whole passages); leave language out or send "
                "compress=true"
            )
        default_top_n, default_ratio = FLOW_DEFAULTS[flow]
        if self.top_n is None:
            object.__setattr__(self, "top_n", default_top_n)
        ratio = default_ratio if self.ratio is None else self.ratio
        object.__setattr__(self, "ratio", ratio)
        for name in ("top_k", "top_n"):
            value = getattr(self, name)
            if value is None and name == "top_n":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInputError(f"{name} must be a positive integer, got {shown(value)}")
            if not 1 <= value <= COUNT_CEILING:
                raise InvalidInputError(
                    f"{name} must be a positive integer of at most {COUNT_CEILING}, "
                    f"got {shown(value)}"
                )
        try:
            budget = Budget(kind="ratio", value=ratio, max_tokens=ceiling)
        except InvalidInputError as exc:
            raise InvalidInputError(f"ratio must be in (0, 1], got {shown(self.ratio)}") from exc
        object.__setattr__(self, "budget", budget)
        if self.order not in ORDERS:
            raise InvalidInputError(
                f"unknown context order {shown(self.order)}; choose one of {', '.join(ORDERS)}"
            )
        if self.mode not in ("hybrid", "bm25", "dense"):
            raise InvalidInputError(
                f"unknown search mode {shown(self.mode)}; use hybrid, bm25, dense"
            )

    def _ceiling(self, flow: Flow) -> int | None:
        """The budget's token ceiling, resolved into ``max_context_tokens``: the caller's, else
        the default one under the default ratio (none under a caller's ratio, or without
        compression)."""
        given = self.max_context_tokens
        if given is not None and not self.compress:
            raise InvalidInputError(
                f"max_context_tokens caps the compression budget and does not apply with "
                f"compress=false (flow={flow} keeps whole passages); leave it out or send "
                "compress=true"
            )
        if given is not None and (
            isinstance(given, bool)
            or not isinstance(given, int)
            or not 1 <= given <= MAX_TARGET_TOKENS
        ):
            raise InvalidInputError(
                f"max_context_tokens must be a positive integer of at most {MAX_TARGET_TOKENS}, "
                f"got {shown(given)}"
            )
        if given is None and self.ratio is None and self.compress:
            given = DEFAULT_MAX_CONTEXT_TOKENS  # DEFAULT_BUDGET's ceiling, in both flows
        object.__setattr__(self, "max_context_tokens", given)
        return given

    def _flow(self) -> Flow:
        """The flow named, else the one the switches allow; refuse a switch the named flow
        cannot honour."""
        if self.flow is None:
            return DEFAULT_FLOW if self.rerank and self.compress else "two_pass"
        if self.flow not in FLOWS:
            raise InvalidInputError(
                f"unknown flow {shown(self.flow)}; choose one of {', '.join(FLOWS)}"
            )
        if self.flow == "one_read":
            for name, does in (("rerank", "ranks"), ("compress", "prunes")):
                if not getattr(self, name):
                    raise InvalidInputError(
                        f"{name}=false does not apply to flow=one_read: its one read of every "
                        f"candidate {does} them; send flow=two_pass with {name}=false, or leave "
                        "flow out (then it is two_pass)"
                    )
        return self.flow


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
