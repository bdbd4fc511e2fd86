"""Input limits in proxy tokens: one implementation for the service's routes and the pipeline.

Two steps, so that an oversized request costs microseconds, not a tokenizer pass:

1. :meth:`LimitChecker.precheck` looks only at counts, lengths and a lower bound on the tokens of
   each text (:class:`~ragattn.token_bounds.TokenFloor`: which neighbouring bytes or characters
   the vocabulary joins in one token). A text whose bound is over its limit has more tokens than
   the limit whatever the tokenizer says, so it is refused before anything is tokenized. This is
   exact, never an estimate: it refuses nothing that the token count would accept. The bound is
   tight for every script (astral-plane text, CJK, combining marks, emoji: within a few percent
   of the count), so a request the tokenizer would refuse is almost always refused here, in
   milliseconds.
2. :meth:`LimitChecker.check` tokenizes (with character offsets) and applies the token limits; a
   caller's own ``truncate_to`` cuts longer documents at a token boundary with a warning instead.

The checker tokenizes with its own copy of the tokenizer, so the service can run it on a thread of
its own while the model thread uses the proxy's tokenizer (a fast tokenizer is not safe to share
across threads when one of them changes its padding or truncation state).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragattn.errors import InputTooLargeError, InvalidInputError, TokenizerError
from ragattn.request_budget import MAX_TOKENS, RequestBudget
from ragattn.settings import COUNT_CEILING, TOKEN_CEILING
from ragattn.token_bounds import TokenFloor, longest_token_chars
from ragattn.types import Document
from ragattn.validation import shown

_FLOOR_GROUP_CHARS = 1 << 18
"""Characters bounded in one vectorized step of :meth:`LimitChecker.precheck`; the sum is checked
against the budget after each, so an oversized request stops being read soon after it is over."""
_TRUNCATION_MARGIN_CHARS = 1024
"""Characters tokenized past ``truncate_to × max_token_chars`` when a long document is truncated:
the first tokens of a prefix are those of the whole text unless one pre-token (a word) is longer
than this, so truncation never tokenizes more than it keeps."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The most work one request may ask for; counts in the proxy's tokens.

    Attributes:
        max_documents: documents per request.
        max_query_tokens: tokens of the query (or question).
        max_tokens_per_doc: tokens of one document; longer is refused unless the caller asks to
            truncate (then it is cut, with a warning).
        max_request_tokens: tokens of the whole request (query plus every document after
            truncation): the work one request may queue for the model.
        request_budget_basis: how ``max_request_tokens`` was derived when
            ``RAGATTN_MAX_REQUEST_TOKENS`` is unset (:meth:`RequestBudget.basis
            <ragattn.request_budget.RequestBudget.basis>`); the 413 says it.

    Each count is at most its settings' ceiling (:data:`~ragattn.settings.COUNT_CEILING`
    documents, :data:`~ragattn.settings.TOKEN_CEILING` tokens), whoever builds the limits.
    """

    max_documents: int = 1000
    max_query_tokens: int = 2048
    max_tokens_per_doc: int = 4096
    max_request_tokens: int = MAX_TOKENS
    request_budget_basis: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name == "request_budget_basis":
                continue
            value = getattr(self, f.name)
            ceiling = COUNT_CEILING if f.name == "max_documents" else TOKEN_CEILING
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= ceiling:
                raise InvalidInputError(
                    f"{f.name} must be a positive integer of at most {ceiling}, got {shown(value)}"
                )

    @classmethod
    def from_settings(cls, settings: Any, budget: RequestBudget | None = None) -> Limits:
        """The limits of a :class:`ragattn.settings.Settings` (``RAGATTN_MAX_*``); ``budget`` is
        the request budget chosen at start-up (:func:`ragattn.request_budget.choose_budget`),
        else the setting, else :data:`~ragattn.request_budget.MAX_TOKENS`."""
        return cls(
            max_documents=settings.max_documents,
            max_query_tokens=settings.max_query_tokens,
            max_tokens_per_doc=settings.max_tokens_per_doc,
            max_request_tokens=(
                budget.tokens if budget is not None else settings.max_request_tokens or MAX_TOKENS
            ),
            request_budget_basis=budget.basis() if budget is not None else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedInput:
    """A query and documents within the limits, as they should be scored.

    Attributes:
        documents: the documents, truncated where the caller asked for it (same order, same ids).
        query_tokens: proxy tokens of the query.
        document_tokens: proxy tokens of each document as scored (after truncation).
        warnings: one line per truncated document.
    """

    documents: tuple[Document, ...]
    query_tokens: int
    document_tokens: tuple[int, ...]
    warnings: tuple[str, ...] = ()

    @property
    def input_tokens(self) -> int:
        """Query plus document tokens: what the service bills as ``input_tokens``."""
        return self.query_tokens + sum(self.document_tokens)


class TokenOffsets:
    """Token character offsets of texts, computed with a private copy of a tokenizer.

    Args:
        tokenizer: a Hugging Face tokenizer (fast or slow).
    """

    def __init__(self, tokenizer: Any) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self._backend: Any = None
        self._tokenizer = tokenizer
        spec: dict[str, Any] | None = None
        if backend is not None:
            from tokenizers import Tokenizer

            text = backend.to_str()
            self._backend = Tokenizer.from_str(text)
            spec = json.loads(text)
        self.max_token_chars = None if spec is None else longest_token_chars(spec)
        """Most characters of input one token can stand for; ``None`` when unknown."""
        self.floor = None if spec is None else TokenFloor.from_spec(spec)
        """A lower bound on the tokens of a text (``None``: this tokenizer's kind is unsupported,
        and only ``max_token_chars`` bounds it)."""

    def offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Per text, the ``(start, end)`` character span of each token (no special tokens).

        Raises:
            TokenizerError: the tokenizer cannot encode a text (e.g. a lone surrogate).
        """
        if not texts:
            return []
        try:
            if self._backend is not None:
                encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
                return [list(e.offsets) for e in encodings]
            enc = self._tokenizer(
                list(texts), add_special_tokens=False, return_offsets_mapping=True
            )
            return [list(o) for o in enc["offset_mapping"]]
        except Exception as exc:  # tokenizers raise bare exceptions on malformed text
            raise TokenizerError(
                f"the proxy tokenizer could not encode the input: {type(exc).__name__}"
            ) from exc

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        return len(self.offsets([text])[0]) if text else 0


def truncation_warning(index: int, tokens: int | str, kept: int) -> str:
    """The warning for a document cut to ``kept`` tokens (the wording the API documents)."""
    return f"documents[{index}] truncated from {tokens} to {kept} tokens (max_tokens_per_doc)"


def cut_at_tokens(offsets: Sequence[tuple[int, int]], max_tokens: int) -> int | None:
    """The character end of the ``max_tokens``-th token, or ``None`` when the text fits."""
    if len(offsets) <= max_tokens:
        return None
    return int(offsets[max_tokens - 1][1])


class LimitChecker:
    """Applies :class:`Limits` to a query and its documents in the proxy's tokens.

    Args:
        tokenizer: the proxy's tokenizer (a private copy is made; see :class:`TokenOffsets`).
        limits: the limits to apply.
    """

    def __init__(self, tokenizer: Any, limits: Limits) -> None:
        self.limits = limits
        self.tokens = TokenOffsets(tokenizer)

    def _chars_bound(self, max_tokens: int) -> int | None:
        per_token = self.tokens.max_token_chars
        return None if per_token is None else max_tokens * per_token

    def check_count(self, n_documents: int) -> None:
        """Refuse no documents, or more than ``max_documents``."""
        if n_documents < 1:
            raise InvalidInputError("documents must hold at least one document")
        limit = self.limits.max_documents
        if n_documents > limit:
            raise InputTooLargeError(
                f"{n_documents} documents sent; this server accepts at most {limit} per request "
                "(RAGATTN_MAX_DOCUMENTS); split the request"
            )

    def precheck(
        self,
        query: str,
        documents: Sequence[Document] | None,
        *,
        truncate_to: int | None = None,
        what: str = "query",
    ) -> None:
        """Refuse by counts, lengths and a lower bound on each text's tokens, without tokenizing.

        The bound (:class:`TokenFloor`) reads at most about ``max_request_tokens`` × the longest
        token's units in all, whatever the body holds: milliseconds, never a tokenizer pass.

        Args:
            query: the query or question.
            documents: the documents; ``None`` when the request has none (retrieve, ask).
            truncate_to: the caller's own per-document token cap: up to ``max_tokens_per_doc``
                it truncates instead of refusing; above it, it changes nothing (a caller's cap
                can lower the server's limit, never lift it).
            what: how the query is named in messages (``query`` or ``question``).

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: too many documents, a text with more tokens than its limit, or
                more tokens in all than ``max_request_tokens``, by the lower bound.
        """
        q_limit = self.limits.max_query_tokens
        q_floor = self._floors([query], q_limit + 1)[0]
        if q_floor > q_limit:
            raise self._query_too_large(what, f"more than {q_limit}")
        if documents is None:
            return
        self.check_count(len(documents))
        truncate_to = self._truncation(truncate_to)
        per_doc = self.limits.max_tokens_per_doc
        per_token = self.tokens.max_token_chars
        if truncate_to is None and per_token is not None:
            # Length alone first, over every document (free), so the first long one is named.
            for i, doc in enumerate(documents):
                if len(doc.text) > per_doc * per_token:
                    raise self._document_too_large(i, f"more than {per_doc}")
        # Each document has at least its floor's tokens (at most truncate_to once cut): a sum of
        # lower bounds over the budget is over it whatever the exact count says. Documents are
        # bounded in groups, stopping at the first group that takes the sum over the budget.
        budget = self.limits.max_request_tokens
        cap = truncate_to if truncate_to is not None else per_doc
        stop = cap if truncate_to is not None else per_doc + 1
        most = stop * self._longest()  # characters that prove ``stop`` tokens: none read past them
        total = q_floor
        start = 0
        while start < len(documents):
            end, chars = start, 0
            while end < len(documents) and (end == start or chars < _FLOOR_GROUP_CHARS):
                chars += min(len(documents[end].text), most)
                end += 1
            floors = self._floors([d.text for d in documents[start:end]], stop)
            for i, n in enumerate(floors, start):
                if truncate_to is None and n > per_doc:
                    raise self._document_too_large(i, f"more than {per_doc}")
                total += min(cap, n)
            if total > budget:
                raise self._request_too_large(f"at least {total}")
            start = end

    def _longest(self) -> int:
        floor = self.tokens.floor
        return floor.longest if floor is not None else (self.tokens.max_token_chars or 1)

    def _floors(self, texts: Sequence[str], stop: int) -> list[int]:
        """Lower bounds on the tokens of ``texts`` (capped at ``stop``): :class:`TokenFloor` when
        the tokenizer has one, else characters / the longest token's characters, else 0."""
        floor = self.tokens.floor
        if floor is not None:
            return floor.counts(texts, stop)
        per_token = self.tokens.max_token_chars
        if per_token is None:
            return [0] * len(texts)
        return [min(stop, -(-len(t) // per_token)) for t in texts]

    def _truncation(self, truncate_to: int | None) -> int | None:
        """The caller's cap if it truncates: only one up to the server's limit does (a larger one
        would lift the limit; it is treated as no cap, so long documents are refused fast)."""
        if truncate_to is None or truncate_to > self.limits.max_tokens_per_doc:
            return None
        return truncate_to

    def check_query(self, query: str, *, what: str = "query", prechecked: bool = False) -> int:
        """Tokens of ``query``; refuse it over ``max_query_tokens``.

        ``prechecked``: the caller has run :meth:`precheck` on this query already (the service
        does, before the tokenizer thread), so its bound is not computed twice."""
        if not prechecked:
            self.precheck(query, None, what=what)
        n = self.tokens.count(query)
        if n > self.limits.max_query_tokens:
            raise self._query_too_large(what, str(n))
        return n

    def check(
        self,
        query: str,
        documents: Sequence[Document],
        *,
        truncate_to: int | None = None,
        prechecked: bool = False,
    ) -> CheckedInput:
        """Tokenize and apply the token limits; cut documents to ``truncate_to`` with a warning.

        ``prechecked``: the caller has run :meth:`precheck` on this input already (the service
        does, before the cache and the tokenizer thread), so the bounds are not computed twice.

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: a limit is exceeded (the message names it and its variable).
            TokenizerError: the tokenizer cannot encode the input.
        """
        if not prechecked:
            self.precheck(query, documents, truncate_to=truncate_to)
        truncate_to = self._truncation(truncate_to)
        q_tokens = self.check_query(query, prechecked=True)
        warnings: list[str] = []
        if truncate_to is None:
            counts = [len(o) for o in self.tokens.offsets([d.text for d in documents])]
            docs = list(documents)
        else:
            docs, counts, warnings = self.truncate(documents, truncate_to)
        for i, n in enumerate(counts):
            if n > self.limits.max_tokens_per_doc:
                raise self._document_too_large(i, str(n))
        total = q_tokens + sum(counts)
        if total > self.limits.max_request_tokens:
            raise self._request_too_large(str(total))
        return CheckedInput(
            documents=tuple(docs),
            query_tokens=q_tokens,
            document_tokens=tuple(counts),
            warnings=tuple(warnings),
        )

    def truncate(
        self, documents: Sequence[Document], max_tokens: int
    ) -> tuple[list[Document], list[int], list[str]]:
        """Cut each document to its first ``max_tokens`` tokens, with a warning per cut one.

        Never refuses: for the caller's own ``max_tokens_per_doc`` and for passages the caller did
        not write (retrieval hits). Only a bounded prefix of a long text is tokenized, so the
        warning of a very long document gives a lower bound ("over N").

        Returns:
            The documents (cut ones shortened, ids kept), their tokens as scored, the warnings.
        """
        texts = [d.text for d in documents]
        bound = self._chars_bound(max_tokens)
        if bound is not None:
            texts = [t[: bound + _TRUNCATION_MARGIN_CHARS] for t in texts]
        out: list[Document] = []
        counts: list[int] = []
        warnings: list[str] = []
        for i, (doc, text, offsets) in enumerate(
            zip(documents, texts, self.tokens.offsets(texts), strict=True)
        ):
            cut = cut_at_tokens(offsets, max_tokens)
            if cut is None:
                out.append(doc)
                counts.append(len(offsets))
                continue
            whole = len(text) == len(doc.text)
            total = str(len(offsets)) if whole else f"over {len(offsets) - 1}"
            out.append(dataclasses.replace(doc, text=doc.text[:cut]))
            counts.append(max_tokens)
            warnings.append(truncation_warning(i, total, max_tokens))
        return out, counts, warnings

    def _query_too_large(self, what: str, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"{what} has {tokens} tokens; the limit is {self.limits.max_query_tokens} "
            "(RAGATTN_MAX_QUERY_TOKENS)"
        )

    def _document_too_large(self, index: int, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"documents[{index}] has {tokens} tokens; the limit is "
            f"{self.limits.max_tokens_per_doc} (RAGATTN_MAX_TOKENS_PER_DOC); "
            f"send max_tokens_per_doc (at most {self.limits.max_tokens_per_doc}) to truncate "
            "instead"
        )

    def _request_too_large(self, tokens: str) -> InputTooLargeError:
        basis = self.limits.request_budget_basis
        return InputTooLargeError(
            f"the request has {tokens} tokens (query plus documents after truncation); the limit "
            f"is {self.limits.max_request_tokens} per request "
            f"({basis or 'RAGATTN_MAX_REQUEST_TOKENS'}); "
            "split it into smaller requests or send max_tokens_per_doc to truncate"
        )


__all__ = [
    "CheckedInput",
    "LimitChecker",
    "Limits",
    "TokenOffsets",
    "cut_at_tokens",
    "truncation_warning",
]
