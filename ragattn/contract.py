"""The engine contract: what every front end hands an engine, and what an engine is.

The service, the SDK client, batch, the framework adapters and the pipeline all check a call's
arguments once, where they enter, into a :class:`VerbArgs` (its budget one
:class:`~ragattn.types.Budget`), and pass that on; engines and inner layers trust it. An engine is
a :class:`RerankEngine` and/or a :class:`CompressEngine`: in process (:class:`ragattn.Reranker`,
:class:`ragattn.compress.Compressor`) or remote (:class:`ragattn.client.Client`). The compress
verbs' signatures are written once, in :class:`CompressVerbs`, which the compressor and both
clients inherit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from ragattn.errors import InvalidInputError
from ragattn.types import (
    Budget,
    CompressionResult,
    DocumentLike,
    RerankResults,
    check_top_n,
)

Verb = Literal["rerank", "compress", "rerank_compress"]
VERBS: tuple[Verb, ...] = ("rerank", "compress", "rerank_compress")
BUDGET_KEYWORDS: tuple[str, ...] = ("ratio", "target_tokens", "threshold")
"""The three ways to give a budget (exactly one per call), as keywords and wire fields."""


def verb_keywords(verb: Verb) -> tuple[str, ...]:
    """The call arguments of ``verb`` a front end offers: ``top_n`` to rank, a budget to compress
    (the rest of :class:`VerbArgs` are options with defaults)."""
    ranks = ("top_n",) if verb != "compress" else ()
    return (*(BUDGET_KEYWORDS if verb != "rerank" else ()), *ranks)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerbArgs:
    """The arguments of one rerank, compress or rerank-and-compress call, checked once.

    A front end builds one where arguments enter (:meth:`check`) and hands it on; engines and inner
    layers trust it. The limits a call is held to (:class:`ragattn.limits.Limits`) are the
    server's; the caller's own per-document cut is ``truncate_to``.

    Attributes:
        verb: ``rerank``, ``compress`` or ``rerank_compress`` (one scoring pass for both).
        top_n: keep the best ``top_n`` documents (rerank verbs; None: all).
        budget: the compression budget (compress verbs).
        keep_order: kept sentences in input order (default) or best first.
        tokenizer: counts a compression's tokens (None: the engine's own).
        keep_entities: always keep sentences naming an entity of the query (``compress``).
        truncate_to: cut longer documents to this many tokens with a warning (``rerank``).
    """

    verb: Verb
    top_n: int | None = None
    budget: Budget | None = None
    keep_order: bool = True
    tokenizer: Any = None
    keep_entities: bool = False
    truncate_to: int | None = None

    def __post_init__(self) -> None:
        if self.verb not in VERBS:
            raise InvalidInputError(f"unknown verb {self.verb!r}; valid: {', '.join(VERBS)}")
        check_top_n(self.top_n)
        if self.verb == "rerank" and self.budget is not None:
            raise InvalidInputError("rerank takes no budget; use compress or rerank-compress")
        if self.verb != "rerank" and self.budget is None:
            raise InvalidInputError("give exactly one budget: ratio, target_tokens or threshold")
        if self.verb == "compress" and self.top_n is not None:
            raise InvalidInputError("compress keeps every document; top_n is for rerank tasks")

    @classmethod
    def check(
        cls,
        verb: Verb,
        given: Mapping[str, Any] | None = None,
        *,
        default_budget: Budget | None = None,
    ) -> VerbArgs:
        """Check the keywords of a call (``top_n``, ``ratio``/``target_tokens``/``threshold`` or
        ``budget``, and the other fields) as given, e.g. ``locals()`` of an engine method.

        Raises:
            InvalidInputError: a bad ``top_n``, not exactly one valid budget for a compress verb,
                or a budget for ``rerank``.
        """
        kw = dict(given or {})
        check_top_n(kw.get("top_n"))
        raw = (kw.get("ratio"), kw.get("target_tokens"), kw.get("threshold"))
        budget = kw.get("budget")
        if verb == "rerank":
            if budget is not None or raw != (None, None, None):
                raise InvalidInputError("rerank takes no budget; use compress or rerank-compress")
        elif budget is None and raw == (None, None, None) and default_budget is not None:
            budget = default_budget
        else:
            budget = Budget.from_args(*raw, given=budget)
        fields = ("top_n", "keep_order", "tokenizer", "keep_entities", "truncate_to")
        return cls(verb=verb, budget=budget, **{k: kw[k] for k in fields if k in kw})

    @property
    def compress_budget(self) -> Budget:
        """The budget of a compress verb (``rerank`` has none: InvalidInputError)."""
        if self.budget is None:
            raise InvalidInputError("rerank takes no budget; use compress or rerank-compress")
        return self.budget

    def keywords(self) -> dict[str, Any]:
        """The keyword arguments of the verb's engine method (``top_n``, ``budget``, …); options
        left at their default are left out, so any engine of the contract takes them."""
        out: dict[str, Any] = {}
        if self.verb != "compress":
            out["top_n"] = self.top_n
        if self.verb != "rerank":
            out.update(budget=self.budget, keep_order=self.keep_order)
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.keep_entities:
            out["keep_entities"] = True
        return out

    def params(self) -> dict[str, Any]:
        """The output-changing arguments as wire fields (``top_n``, ``keep_order``, the budget's
        own keyword), for cache keys and request bodies."""
        out: dict[str, Any] = {} if self.verb == "compress" else {"top_n": self.top_n}
        if self.budget is not None:
            out.update(keep_order=self.keep_order, **self.budget.keywords())
        return out


@runtime_checkable
class RerankEngine(Protocol):
    """What reranks: :class:`ragattn.Reranker` in process, :class:`ragattn.client.Client` remote."""

    def rerank(
        self, query: str, documents: Sequence[DocumentLike], *, top_n: int | None = None
    ) -> RerankResults: ...


_C = TypeVar("_C", covariant=True)
_RC = TypeVar("_RC", covariant=True)


class CompressVerbs(Generic[_C, _RC]):
    """The compress verbs, written once: :class:`~ragattn.compress.Compressor` and both clients
    inherit them and implement the two hooks, which receive the keywords as given (a client
    leaves their check to the service, the edge it talks to)."""

    def compress(
        self,
        query: str,
        documents: str | Sequence[DocumentLike],
        *,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
        budget: Budget | None = None,
        keep_order: bool = True,
        tokenizer: Any = None,
        keep_entities: bool = False,
    ) -> _C:
        """Compress ``documents`` (or one ``context`` string) for ``query`` under one budget.

        Args:
            query: the question the context should answer (non-empty).
            documents: a context string, or strings / Documents / mappings with ``text``.
            ratio: fraction of tokens to keep, in (0, 1].
            target_tokens: keep at most this many tokens.
            threshold: keep sentences with keep score >= threshold (in [0, 1]).
            budget: the budget as one checked :class:`Budget`, instead of the three above.
            keep_order: kept sentences in original order (default) or best first.
            tokenizer: counts tokens: a tokenizer object or a local/offline name; default the
                proxy's.
            keep_entities: always keep sentences naming a capitalised word or number of the query.

        Returns:
            A :class:`CompressionResult`; its text is a concatenation of original substrings
            (documents joined by a blank line), and the highest-scoring sentence is always kept.

        Raises:
            InvalidInputError: empty query, not exactly one valid budget, malformed documents.
        """
        given = {k: v for k, v in locals().items() if k not in ("self", "query", "documents")}
        return self._compress(query, documents, given)

    def rerank_and_compress(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        top_n: int | None = None,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
        budget: Budget | None = None,
        keep_order: bool = True,
        tokenizer: Any = None,
    ) -> _RC:
        """Rank ``documents`` and compress the best ``top_n`` of them from one scoring pass.

        The arguments are those of :meth:`compress` plus ``top_n`` (default: all).
        """
        given = {k: v for k, v in locals().items() if k not in ("self", "query", "documents")}
        return self._rerank_compress(query, documents, given)

    def _compress(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _C:
        raise NotImplementedError

    def _rerank_compress(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _RC:
        raise NotImplementedError


CompressEngine = CompressVerbs[CompressionResult, tuple[RerankResults, CompressionResult]]
"""What compresses in the calling thread: :class:`~ragattn.compress.Compressor` in process,
:class:`ragattn.client.Client` remote (both inherit :class:`CompressVerbs`)."""
AsyncCompressEngine = CompressVerbs[
    Awaitable[CompressionResult], Awaitable[tuple[RerankResults, CompressionResult]]
]
"""What compresses when awaited: :class:`ragattn.client.AsyncClient`."""


__all__ = [
    "BUDGET_KEYWORDS",
    "VERBS",
    "AsyncCompressEngine",
    "CompressEngine",
    "CompressVerbs",
    "RerankEngine",
    "Verb",
    "VerbArgs",
    "verb_keywords",
]
