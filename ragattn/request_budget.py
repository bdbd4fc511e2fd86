"""The default request budget: the proxy tokens the model thread finishes inside the deadline.

A request over ``max_request_tokens`` is refused before it is queued (:mod:`ragattn.limits`). A
fixed default admitted work that could not finish: 16,384 tokens of ``rerank_compress`` take
about 27 s on a 2-core machine, against a 30 s deadline. So when ``RAGATTN_MAX_REQUEST_TOKENS``
is unset the budget follows the deadline on the machine the service runs on::

    budget = floor(tokens_per_second × deadline_s × SAFETY), rounded down to a multiple of
             STEP_TOKENS and clamped to [MIN_TOKENS, MAX_TOKENS]

``tokens_per_second`` is the throughput of the slowest verb (``rerank_compress``; ``rerank`` when
no compressor could be built), stated by ``RAGATTN_TOKENS_PER_SECOND`` or measured at start-up by
:func:`measure_tokens_per_second`: one timed call on a fixed synthetic input of
:data:`MEASURE_TOKENS` proxy tokens, after the warm-up. An explicit ``RAGATTN_MAX_REQUEST_TOKENS``
always wins, and no deadline (``RAGATTN_REQUEST_TIMEOUT_S=0``) gives :data:`MAX_TOKENS`.

One measurement differs from the next (3,328 to 3,840 tokens on one machine at a 30 s deadline),
so replicas that each measured would refuse different requests. With a
:class:`ThroughputRecord` (the service passes one in Redis when replicas share a Redis) the first
replica's measurement is recorded and every later replica adopts it, as long as it lies within
:data:`ADOPT_FACTOR` of the replica's own measurement (:func:`within_range`). A recorded value
outside that range (or not a throughput at all) is not adopted: the replica keeps its own
measurement and writes it in its place. So whoever can write the record is trusted with the
budget only within a factor of 2 of what each replica measures.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ragattn.contract import CompressEngine, RerankEngine
from ragattn.settings import Settings
from ragattn.types import Document

SAFETY = 0.8
"""Share of the deadline one request may fill: room for the tokenizer pass, a queued job's tail
and a slower moment of the machine."""
STEP_TOKENS = 256
"""The budget is a multiple of this, so a small change of the measurement does not move it."""
MIN_TOKENS = 1024
"""The smallest derived budget: a slow machine still takes a query and a few passages."""
MAX_TOKENS = 16_384
"""The largest derived budget (the fixed default before; a fast machine does not lift it)."""
MEASURE_TOKENS = 1024
"""Proxy tokens (query plus documents) of the timed start-up call: about 1.3 s of
``rerank_compress`` on 2 CPU cores. Throughput there is a little below that of longer inputs (the
default cascade reads 80 % of a context of 1,024 tokens or more), so the estimate errs low."""
MEASURE_DOCUMENTS = 8
"""Documents the synthetic input is split into, like a small retrieval result."""
ADOPT_FACTOR = 2.0
"""A recorded throughput is adopted only between the replica's own measurement divided and
multiplied by this. Measurements on one machine spread by about 15 % (3,328 to 3,840 tokens of
budget); a factor of 2 leaves room for a busy moment and modestly unequal machines, and keeps a
value written by anyone who can write the record within 2x of what the replica can do."""

BudgetSource = Literal["setting", "stated", "measured", "shared", "no_deadline", "not_measured"]
"""Where the budget came from: ``RAGATTN_MAX_REQUEST_TOKENS``; derived from
``RAGATTN_TOKENS_PER_SECOND``, from this process's start-up measurement, or from the one recorded
for every replica (:class:`ThroughputRecord`); the ceiling because there is no deadline, or because
nothing was measured (engines handed in to ``create_app``)."""


class ThroughputRecord(Protocol):
    """The one measured throughput of a deployment, shared by its replicas (e.g. in Redis).

    :meth:`settle` never raises: a record that cannot be read or written answers None, and the
    replica then keeps its own measurement (logged by the record).
    """

    def settle(self, tokens_per_second: float, acceptable: Callable[[float], bool]) -> float | None:
        """The deployment's throughput, given this replica's measurement.

        The recorded value when ``acceptable`` accepts it. Otherwise (none recorded, a value
        that is not a throughput, or one ``acceptable`` refuses) ``tokens_per_second`` is
        written in its place, unless another replica changed the record meanwhile, and the
        value then recorded is returned if ``acceptable`` accepts it (another replica's when it
        came first). None: the record failed, or holds a value this replica refuses.

        Args:
            tokens_per_second: this replica's measurement, proxy tokens per second.
            acceptable: whether a recorded value may be adopted (:func:`within_range`).
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestBudget:
    """The most proxy tokens one request may ask for, and how that number was chosen.

    Attributes:
        tokens: the budget in proxy tokens (query plus every document after truncation).
        source: where it came from (:data:`BudgetSource`).
        tokens_per_second: the throughput it was derived from, proxy tokens per second of the
            slowest verb (None unless ``source`` is ``stated``, ``measured`` or ``shared``).
        deadline_s: the request deadline it was derived for, seconds (0: none).
    """

    tokens: int
    source: BudgetSource
    tokens_per_second: float | None = None
    deadline_s: float = 0.0

    def basis(self) -> str | None:
        """How an unset ``RAGATTN_MAX_REQUEST_TOKENS`` became :attr:`tokens`, for the 413 and the
        start-up log (None when the setting gave it)."""
        unset = "RAGATTN_MAX_REQUEST_TOKENS unset"
        if self.source == "setting":
            return None
        if self.source == "no_deadline":
            return f"{unset} and no deadline: the ceiling {MAX_TOKENS}"
        if self.source == "not_measured":
            return f"{unset}: the ceiling {MAX_TOKENS}, throughput not measured"
        how = {
            "stated": "stated by RAGATTN_TOKENS_PER_SECOND",
            "shared": "of rerank_compress measured at start-up by the first replica and "
            "recorded for all",
        }.get(self.source, "of rerank_compress measured at start-up")
        return (
            f"{unset}: {SAFETY:g} × the {self.deadline_s:g} s deadline × "
            f"{self.tokens_per_second:.0f} tokens/s {how}, in steps of {STEP_TOKENS} within "
            f"{MIN_TOKENS}..{MAX_TOKENS}; set it to change the limit"
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields and :meth:`basis`, for logs and diagnostics."""
        return {
            "tokens": self.tokens,
            "source": self.source,
            "tokens_per_second": self.tokens_per_second,
            "deadline_s": self.deadline_s,
            "basis": self.basis(),
        }


def derive_budget(tokens_per_second: float, deadline_s: float) -> int:
    """``floor(tokens_per_second × deadline_s × SAFETY)`` rounded down to a multiple of
    :data:`STEP_TOKENS`, clamped to [:data:`MIN_TOKENS`, :data:`MAX_TOKENS`].

    Args:
        tokens_per_second: proxy tokens per second of the slowest verb (> 0).
        deadline_s: the request deadline, seconds (> 0).
    """
    tokens = math.floor(tokens_per_second * deadline_s * SAFETY)
    return max(MIN_TOKENS, min(MAX_TOKENS, tokens // STEP_TOKENS * STEP_TOKENS))


def within_range(recorded: float, measured: float) -> bool:
    """Whether a recorded throughput may be adopted by a replica that measured ``measured``:
    finite, and within :data:`ADOPT_FACTOR` of it either way (both proxy tokens per second)."""
    if not (math.isfinite(recorded) and recorded > 0):
        return False
    return measured / ADOPT_FACTOR <= recorded <= measured * ADOPT_FACTOR


def choose_budget(
    settings: Settings,
    measure: Callable[[], float] | None,
    *,
    record: ThroughputRecord | None = None,
) -> RequestBudget:
    """The request budget of ``settings`` on this machine, or on every replica of the deployment
    when they share a ``record``.

    Args:
        settings: ``max_request_tokens`` wins when set; else ``request_timeout_s`` and
            ``tokens_per_second`` derive it.
        measure: returns the measured throughput (proxy tokens per second of the slowest verb);
            called once when the budget follows the deadline, also with a ``record`` (its value
            is checked against the measurement). None: nothing can be measured (the budget is
            then :data:`MAX_TOKENS`, as before it followed the deadline; ``record`` is not read).
        record: the deployment's recorded throughput: adopted when :func:`within_range` of this
            measurement, else this measurement is recorded in its place (and another replica's
            adopted, had it come first).
    """
    deadline = settings.request_timeout_s
    if settings.max_request_tokens is not None:
        return RequestBudget(tokens=settings.max_request_tokens, source="setting")
    if deadline <= 0:
        return RequestBudget(tokens=MAX_TOKENS, source="no_deadline")
    source: BudgetSource
    if settings.tokens_per_second is not None:
        tps, source = settings.tokens_per_second, "stated"
    elif measure is None:
        return RequestBudget(tokens=MAX_TOKENS, source="not_measured", deadline_s=deadline)
    else:
        tps, source = _measured(measure, record)
    return RequestBudget(
        tokens=derive_budget(tps, deadline),
        source=source,
        tokens_per_second=tps,
        deadline_s=deadline,
    )


def _measured(
    measure: Callable[[], float], record: ThroughputRecord | None
) -> tuple[float, BudgetSource]:
    """This measurement, or the recorded throughput when it is within range of it (the record
    keeps the first replica's if two measured at once)."""
    tps = measure()
    if record is None:
        return tps, "measured"
    agreed = record.settle(tps, functools.partial(within_range, measured=tps))
    if agreed is None or not within_range(agreed, tps):
        return tps, "measured"
    return agreed, "shared"


def synthetic_input(
    tokenizer: Any, tokens: int = MEASURE_TOKENS, documents: int = MEASURE_DOCUMENTS
) -> tuple[str, list[Document], int]:
    """A fixed query and ``documents`` passages of about ``tokens`` proxy tokens in all.

    The passages are English prose (the demo passages, repeated), cut at token boundaries, so
    the input is the same on every start and its cost is that of real text.

    Returns:
        The query, the documents and their proxy tokens in all (query plus documents, as the
        request budget counts them).
    """
    from ragattn.demo import DOCUMENTS, QUERY

    prose = " ".join(d.text for d in DOCUMENTS)
    query_tokens = len(tokenizer(QUERY, add_special_tokens=False)["input_ids"])
    per_doc = max(1, (tokens - query_tokens) // documents)
    ids: list[int] = []
    while len(ids) < per_doc * documents:
        ids += tokenizer(prose + " ", add_special_tokens=False)["input_ids"]
    texts = [tokenizer.decode(ids[i * per_doc : (i + 1) * per_doc]) for i in range(documents)]
    counted = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    docs = [Document(text=t, id=f"synthetic-{i}") for i, t in enumerate(texts)]
    return QUERY, docs, query_tokens + counted


def measure_tokens_per_second(
    engine: CompressEngine | RerankEngine, tokenizer: Any, *, tokens: int = MEASURE_TOKENS
) -> float:
    """Proxy tokens per second of one ``rerank_and_compress`` call (``rerank`` for an engine
    without it) on :func:`synthetic_input`; run it after the warm-up, so that first-call costs
    are not counted.

    Args:
        engine: a :class:`~ragattn.compress.Compressor` (the slowest verb) or a reranker.
        tokenizer: the proxy's tokenizer (the budget is counted in its tokens).
        tokens: the synthetic input's proxy tokens.
    """
    query, docs, counted = synthetic_input(tokenizer, tokens)
    start = time.perf_counter()
    if hasattr(engine, "rerank_and_compress"):
        engine.rerank_and_compress(query, docs, ratio=0.5)
    else:
        engine.rerank(query, docs)
    return counted / max(time.perf_counter() - start, 1e-6)


__all__ = [
    "ADOPT_FACTOR",
    "MAX_TOKENS",
    "MEASURE_TOKENS",
    "MIN_TOKENS",
    "SAFETY",
    "STEP_TOKENS",
    "BudgetSource",
    "RequestBudget",
    "ThroughputRecord",
    "choose_budget",
    "derive_budget",
    "measure_tokens_per_second",
    "synthetic_input",
    "within_range",
]
