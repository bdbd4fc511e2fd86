"""The engine contract: what every front end hands an engine, and what an engine is.

The service, the SDK client, batch, the framework adapters and the pipeline check a call's
arguments once, where they enter, into a :class:`VerbArgs` (its budget one
:class:`~ragattn.types.Budget`), convert its documents once into
:class:`~ragattn.types.Document` s, and call the engine's checked entry
(:meth:`RerankVerbs.rerank_checked`, :meth:`CompressVerbs.compress_checked`,
:meth:`CompressVerbs.rerank_and_compress_checked`), which trusts all three and checks nothing
again. The keyword methods users call (``rerank``, ``compress``, ``rerank_and_compress``) are
written once, here, as thin wrappers that check once and call that entry.

An engine is a :class:`RerankVerbs` and/or a :class:`CompressVerbs`: in process
(:class:`ragattn.Reranker`, :class:`ragattn.compress.Compressor`) or remote
(:class:`ragattn.client.Client`, whose keyword methods leave the checks to the service it talks
to).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ragattn.errors import InvalidInputError
from ragattn.first_stage import check_first_stage_order
from ragattn.languages import AUTO, check_language
from ragattn.types import (
    DEFAULT_BUDGET,
    Budget,
    CompressionResult,
    Document,
    DocumentLike,
    RerankResults,
    as_documents,
    check_top_n,
)
from ragattn.validation import check_query

Verb = Literal["rerank", "compress", "rerank_compress"]
VERBS: tuple[Verb, ...] = ("rerank", "compress", "rerank_compress")
BUDGET_KEYWORDS: tuple[str, ...] = ("ratio", "target_tokens", "threshold")
"""The three ways to give a budget (at most one per call; none: :func:`default_budget`), as
keywords and wire fields."""


def default_budget(max_tokens: int | None = None) -> Budget:
    """The budget of a compress call that names none: :data:`~ragattn.types.DEFAULT_BUDGET`, its
    ceiling replaced by ``max_tokens`` when the caller gives one alone (tokens).

    Raises:
        InvalidInputError: a ``max_tokens`` that is not a positive integer of at most
            :data:`~ragattn.types.MAX_TARGET_TOKENS`.
    """
    if max_tokens is None:
        return DEFAULT_BUDGET
    return Budget(kind=DEFAULT_BUDGET.kind, value=DEFAULT_BUDGET.value, max_tokens=max_tokens)


def verb_keywords(verb: Verb) -> tuple[str, ...]:
    """The call arguments of ``verb`` a front end offers: ``top_n`` to rank, a budget to compress
    (the rest of :class:`VerbArgs` are options with defaults)."""
    ranks = ("top_n",) if verb != "compress" else ()
    return (*(BUDGET_KEYWORDS if verb != "rerank" else ()), *ranks)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerbArgs:
    """The arguments of one rerank, compress or rerank-and-compress call, checked once.

    A front end builds one where arguments enter (construction checks them; :meth:`check` takes
    them as keywords) and hands it to an engine's checked entry, which trusts it. The limits a
    call is held to (:class:`ragattn.limits.Limits`) are the server's; the caller's own
    per-document cut is ``truncate_to``.

    Attributes:
        verb: ``rerank``, ``compress`` or ``rerank_compress`` (one scoring pass for both).
        top_n: keep the best ``top_n`` documents (rerank verbs; None: all).
        budget: the compression budget (compress verbs).
        keep_order: kept sentences in input order (default) or best first.
        tokenizer: counts a compression's tokens (None: the engine's own).
        keep_entities: always keep sentences naming an entity of the query (``compress``).
        truncate_to: cut longer documents to this many tokens with a warning (``rerank``).
        language: the documents' language for sentence splitting (compress verbs): an ISO 639-1
            code of :data:`~ragattn.sentences.LANGUAGES`, or ``"auto"`` (default: by the text's
            script, :func:`~ragattn.sentences.resolve_language`).
        first_stage_order: the documents' indices in a first stage's order, best first (compress
            verbs; None: the documents come unranked, and their positions are never read as a
            rank). The read weighs each document's relevance with this order's rank prior
            (:mod:`ragattn.first_stage`) by the compressor's ``first_stage_prior`` (default 0:
            checked, not read); checked to be a permutation of the documents' indices where the
            documents are known (the engine).
    """

    verb: Verb
    top_n: int | None = None
    budget: Budget | None = None
    keep_order: bool = True
    tokenizer: Any = None
    keep_entities: bool = False
    truncate_to: int | None = None
    language: str = AUTO
    first_stage_order: tuple[int, ...] | None = None

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
        check_language(self.language)
        if self.verb == "rerank" and self.language != AUTO:
            raise InvalidInputError(
                "rerank splits no sentences; language is for compress or rerank-compress"
            )
        if self.first_stage_order is not None:
            if self.verb == "rerank":
                raise InvalidInputError(
                    "first_stage_order is an argument of Reranker.rerank, not of this call"
                )
            order = self.first_stage_order
            object.__setattr__(
                self, "first_stage_order", tuple(check_first_stage_order(order, len(order)) or ())
            )

    @classmethod
    def check(cls, verb: Verb, given: Mapping[str, Any] | None = None) -> VerbArgs:
        """Check the keywords of a call as given (``top_n``, ``ratio``/``target_tokens``/
        ``threshold`` or ``budget``, ``max_tokens`` with ``ratio``, and the other fields), once;
        a compress verb given no budget gets :func:`default_budget` (a ``max_tokens`` given alone
        replaces its ceiling).

        Raises:
            InvalidInputError: a bad ``top_n``, more than one budget or an invalid one for a
                compress verb, a budget for ``rerank``, or an unknown ``language``.
        """
        kw = dict(given or {})
        try:
            budget = _one_budget(verb, kw)
        except InvalidInputError:
            check_top_n(kw.get("top_n"))  # a bad top_n is named first, as construction does
            raise
        fields = (
            "top_n",
            "keep_order",
            "tokenizer",
            "keep_entities",
            "truncate_to",
            "language",
            "first_stage_order",
        )
        return cls(verb=verb, budget=budget, **{k: kw[k] for k in fields if k in kw})

    @property
    def compress_budget(self) -> Budget:
        """The budget of a compress verb (``rerank`` has none: InvalidInputError)."""
        if self.budget is None:
            raise InvalidInputError("rerank takes no budget; use compress or rerank-compress")
        return self.budget

    def params(self) -> dict[str, Any]:
        """The output-changing arguments as wire fields (``top_n``, ``keep_order``, the budget's
        own keyword, ``language`` as given), for cache keys and request bodies."""
        out: dict[str, Any] = {} if self.verb == "compress" else {"top_n": self.top_n}
        if self.budget is not None:
            out.update(keep_order=self.keep_order, language=self.language)
            out.update(self.budget.keywords())
            if self.first_stage_order is not None:
                out["first_stage_order"] = list(self.first_stage_order)
        return out


def _one_budget(verb: Verb, given: Mapping[str, Any]) -> Budget | None:
    """The budget of a call's keywords (:meth:`VerbArgs.check`): none for ``rerank``,
    :func:`default_budget` for a compress verb given none."""
    raw = tuple(given.get(k) for k in BUDGET_KEYWORDS)
    budget, max_tokens = given.get("budget"), given.get("max_tokens")
    if verb == "rerank":
        if budget is not None or raw != (None, None, None) or max_tokens is not None:
            raise InvalidInputError("rerank takes no budget; use compress or rerank-compress")
        return None
    if budget is None and raw == (None, None, None):
        return default_budget(max_tokens)
    if sum(v is not None for v in (*raw, budget)) > 1:
        raise InvalidInputError("give at most one budget: ratio, target_tokens or threshold")
    return Budget.from_args(*raw, max_tokens=max_tokens, given=budget)


def input_documents(documents: str | Sequence[DocumentLike]) -> list[Document]:
    """A keyword call's documents, converted once: a context string is one document, anything
    else goes through :func:`~ragattn.types.as_documents`.

    Raises:
        InvalidInputError: a malformed document.
    """
    return [Document(text=documents)] if isinstance(documents, str) else as_documents(documents)


def _nonempty(documents: list[Document]) -> list[Document]:
    if not documents:
        raise InvalidInputError("documents must hold at least one document")
    return documents


def _given(frame: Mapping[str, Any]) -> dict[str, Any]:
    """A keyword method's keywords as given (its ``locals()`` less the positional arguments)."""
    return {k: v for k, v in frame.items() if k not in ("self", "query", "documents")}


_R = TypeVar("_R", covariant=True)
_C = TypeVar("_C", covariant=True)
_RC = TypeVar("_RC", covariant=True)


class RerankVerbs(Generic[_R]):
    """The rerank verb: :class:`~ragattn.Reranker` and both clients inherit it and implement the
    checked entry, :meth:`rerank_checked`."""

    def rerank(
        self, query: str, documents: Sequence[DocumentLike], *, top_n: int | None = None
    ) -> _R:
        """Rerank ``documents`` for ``query``; best first, the best ``top_n`` (default: all).

        Raises:
            InvalidInputError: empty query, no documents, a malformed document, or a bad
                ``top_n``.
        """
        args = VerbArgs(verb="rerank", top_n=top_n)
        docs = as_documents(documents)
        return self.rerank_checked(check_query(query), _nonempty(docs), args)

    def rerank_checked(self, query: str, documents: Sequence[Document], args: VerbArgs) -> _R:
        """The checked entry of :meth:`rerank`: ``query`` non-empty, ``documents`` converted and
        non-empty, ``args`` of the ``rerank`` verb, all trusted as they are."""
        raise NotImplementedError


class CompressVerbs(Generic[_C, _RC]):
    """The compress verbs, written once: :class:`~ragattn.compress.Compressor` and both clients
    inherit them and implement the two checked entries. The keyword methods check once
    (:meth:`_compress_given`, :meth:`_rerank_compress_given`), then call the entry; a client
    overrides those two hooks to send the keywords as given (the service checks them)."""

    def compress(
        self,
        query: str,
        documents: str | Sequence[DocumentLike],
        *,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
        budget: Budget | None = None,
        max_tokens: int | None = None,
        keep_order: bool = True,
        tokenizer: Any = None,
        keep_entities: bool = False,
        language: str = AUTO,
        first_stage_order: Sequence[int] | None = None,
    ) -> _C:
        """Compress ``documents`` (or one ``context`` string) for ``query`` under one budget
        (none given: :data:`~ragattn.types.DEFAULT_BUDGET`, a fifth of the tokens, at most 1,024).

        Args:
            query: the question the context should answer (non-empty).
            documents: a context string, or strings / Documents / mappings with ``text``.
            ratio: fraction of tokens to keep, in (0, 1].
            target_tokens: keep at most this many tokens.
            threshold: keep sentences with keep score >= threshold (in [0, 1]).
            budget: the budget as one checked :class:`Budget`, instead of the three above.
            max_tokens: with ``ratio``, the most tokens kept whatever the ratio gives (a
                ceiling, in ``tokenizer``'s tokens; default none); alone, the ceiling of the
                default budget instead of its 1,024.
            keep_order: kept sentences in original order (default) or best first.
            tokenizer: counts tokens: a tokenizer object or a local/offline name; default the
                proxy's.
            keep_entities: always keep sentences naming a capitalised word or number of the query.
            language: the documents' language for sentence splitting: an ISO 639-1 code of
                :data:`~ragattn.sentences.LANGUAGES` (``"de"``: German abbreviations and dates
                end no sentence), or ``"auto"`` (default: by the text's script,
                :func:`~ragattn.sentences.resolve_language`).
            first_stage_order: the documents' indices in your retriever's order, best first,
                when they come ranked (default None: unranked; a position is never read as a
                rank). The read weighs each document's relevance with the order's rank prior
                by ``Compressor(first_stage_prior=...)`` (default 0: the order is checked and
                not read; measured in docs/research/context.md, "A first-stage prior").

        Returns:
            A :class:`CompressionResult`; its text is a concatenation of original substrings
            (documents joined by a blank line); at least one sentence is kept: the best that fits
            the budget, or when none fits, the highest-scoring one alone (over the budget; the
            warnings say so).

        Raises:
            InvalidInputError: empty query, more than one budget or an invalid one (or a
                ``max_tokens`` beside ``target_tokens`` or ``threshold``), malformed documents,
                an unknown ``language``.
        """
        return self._compress_given(query, documents, _given(locals()))

    def rerank_and_compress(
        self,
        query: str,
        documents: Sequence[DocumentLike],
        *,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
        budget: Budget | None = None,
        max_tokens: int | None = None,
        top_n: int | None = None,
        keep_order: bool = True,
        tokenizer: Any = None,
        language: str = AUTO,
        first_stage_order: Sequence[int] | None = None,
    ) -> _RC:
        """Rank ``documents`` and compress the best ``top_n`` of them from one scoring pass.

        The arguments are those of :meth:`compress` plus ``top_n`` (default: all).
        """
        return self._rerank_compress_given(query, documents, _given(locals()))

    def compress_checked(self, query: str, documents: Sequence[Document], args: VerbArgs) -> _C:
        """The checked entry of :meth:`compress`: ``query`` non-empty, ``documents`` converted,
        ``args`` of the ``compress`` verb, all trusted as they are."""
        raise NotImplementedError

    def rerank_and_compress_checked(
        self, query: str, documents: Sequence[Document], args: VerbArgs
    ) -> _RC:
        """The checked entry of :meth:`rerank_and_compress` (``args`` of the ``rerank_compress``
        verb); trusts its arguments as :meth:`compress_checked` does."""
        raise NotImplementedError

    def _compress_given(
        self, query: str, documents: str | Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _C:
        args = VerbArgs.check("compress", given)
        return self.compress_checked(check_query(query), input_documents(documents), args)

    def _rerank_compress_given(
        self, query: str, documents: Sequence[DocumentLike], given: Mapping[str, Any]
    ) -> _RC:
        args = VerbArgs.check("rerank_compress", given)
        query = check_query(query)
        return self.rerank_and_compress_checked(query, _nonempty(input_documents(documents)), args)


RerankEngine = RerankVerbs[RerankResults]
"""What reranks in the calling thread: :class:`ragattn.Reranker` in process,
:class:`ragattn.client.Client` remote."""
AsyncRerankEngine = RerankVerbs[Awaitable[RerankResults]]
"""What reranks when awaited: :class:`ragattn.client.AsyncClient`."""
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
    "AsyncRerankEngine",
    "CompressEngine",
    "CompressVerbs",
    "RerankEngine",
    "RerankVerbs",
    "Verb",
    "VerbArgs",
    "default_budget",
    "input_documents",
    "verb_keywords",
]
