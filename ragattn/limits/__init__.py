"""Input limits in proxy tokens: one implementation for the service's routes and the pipeline.

What counts is every token the proxy reads for a request: the query, each document's title and
text (a title is read before its text, :func:`ragattn.prompt.document_text`) and the prompt's own
parts (:mod:`ragattn.limits.prompt_cost`). The per-document limit counts a title with its text; a
caller's ``max_tokens_per_doc`` cuts the text, never the title, so that both fit under it.

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

A refusal that a change of the request avoids says which change, with numbers computed from the
request (:mod:`ragattn.limits.advice`), so that the request it advises is not refused again for the
same reason.

The checker tokenizes with its own copy of the tokenizer, so the service can run it on a thread of
its own while the model thread uses the proxy's tokenizer (a fast tokenizer is not safe to share
across threads when one of them changes its padding or truncation state).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragattn.errors import InputTooLargeError, InvalidInputError, TokenizerError
from ragattn.limits.advice import RequestShape, Room, advise
from ragattn.limits.prompt_cost import PromptCost
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
_ADVICE_TOKENIZED_CHARS = 1 << 16
"""Characters :meth:`LimitChecker.precheck` may tokenize to make a refusal's advice exact (the
query, then the shortest titles and texts, in order); beyond them it counts from an upper bound.
Only a refused request pays it, at most a few milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The most work one request may ask for; counts in the proxy's tokens.

    Attributes:
        max_documents: documents per request.
        max_query_tokens: tokens of the query (or question).
        max_tokens_per_doc: tokens of one document, its title and text together; longer is
            refused unless the caller asks to truncate (then its text is cut, with a warning).
        max_tokens_per_doc_basis: how ``max_tokens_per_doc`` was set when it is not
            ``RAGATTN_MAX_TOKENS_PER_DOC`` as given (the service lowers it to the request
            budget); the 413 says it. None: the setting.
        max_request_tokens: tokens of the whole request (query, every document's title and text
            after truncation, and the prompt's own parts): the work one request may queue for
            the model.
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
    max_tokens_per_doc_basis: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name.endswith("_basis"):
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
        document_tokens: proxy tokens of each document as scored (after truncation), its title
            and text together.
        prompt_tokens: proxy tokens of the prompt's own parts for these documents
            (:class:`~ragattn.limits.prompt_cost.PromptCost`).
        warnings: one line per truncated document.
    """

    documents: tuple[Document, ...]
    query_tokens: int
    document_tokens: tuple[int, ...]
    prompt_tokens: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def input_tokens(self) -> int:
        """Query plus document tokens: what the service bills as ``input_tokens``."""
        return self.query_tokens + sum(self.document_tokens)

    @property
    def request_tokens(self) -> int:
        """Every token the request budget counts: :attr:`input_tokens` and the prompt's parts."""
        return self.input_tokens + self.prompt_tokens


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


def title_text(document: Document) -> str:
    """The title the prompt reads for ``document`` (stripped; empty when it has none)."""
    return document.title.strip() if document.title else ""


def truncation_warning(index: int, tokens: int | str, kept: int, *, title: int = 0) -> str:
    """The warning for a document cut to ``kept`` tokens (the wording the API documents);
    ``title``: tokens of its title, counted in both numbers and never cut."""
    why = "max_tokens_per_doc" if not title else f"max_tokens_per_doc; its {title}-token title kept"
    return f"documents[{index}] truncated from {tokens} to {kept} tokens ({why})"


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
        self.prompt = PromptCost.measure(self._counts, limits.max_documents)
        """The prompt's own parts, counted against the request budget."""

    def _counts(self, texts: Sequence[str]) -> list[int]:
        return [len(o) for o in self.tokens.offsets(texts)]

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
        Titles count with their texts, and the prompt's own parts are counted exactly (they are
        the same for every request of as many documents). A refusal's advice may tokenize up to
        :data:`_ADVICE_TOKENIZED_CHARS` characters of the request; a request that passes is never
        tokenized here.

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
        cap = self._truncation(truncate_to)
        titles = [title_text(d) for d in documents]

        def shape() -> RequestShape:
            return self._bounded_shape(query, documents, titles)

        self._precheck_lengths(documents, titles, cap, shape)
        # Each document has at least its floor's tokens (at most the cap once cut): a sum of lower
        # bounds over the budget is over it whatever the exact count says. Documents are bounded
        # in groups, stopping at the first group that takes the sum over the budget.
        per_doc = self.limits.max_tokens_per_doc
        limit = cap if cap is not None else per_doc
        stop = cap if cap is not None else per_doc + 1
        most = stop * self._longest()  # characters that prove ``stop`` tokens: none read past them
        title_most = per_doc * self._longest()
        budget = self.limits.max_request_tokens
        total = q_floor + self.prompt.total(len(documents), _titled(documents))
        start = 0
        while start < len(documents):
            end, chars = start, 0
            while end < len(documents) and (end == start or chars < _FLOOR_GROUP_CHARS):
                chars += min(len(documents[end].text), most) + min(len(titles[end]), title_most)
                end += 1
            title_floors = self._floors(titles[start:end], per_doc)
            text_floors = self._floors([d.text for d in documents[start:end]], stop)
            for i, (t, x) in enumerate(zip(title_floors, text_floors, strict=True), start):
                self._refuse_document(i, t, t + x, cap, shape, exact=False)
                total += min(limit, t + x)
            if total > budget:
                raise self._request_too_large(f"at least {total}", shape(), cap)
            start = end

    def _precheck_lengths(
        self,
        documents: Sequence[Document],
        titles: Sequence[str],
        cap: int | None,
        shape: Callable[[], RequestShape],
    ) -> None:
        """Length alone first, over every document (free), so the first long one is named."""
        per_token = self.tokens.max_token_chars
        if per_token is None:
            return
        per_doc = self.limits.max_tokens_per_doc
        most = per_doc * per_token
        for i, (doc, title) in enumerate(zip(documents, titles, strict=True)):
            if len(title) > most:
                raise self._title_too_large(i, f"more than {per_doc}")
            if cap is None and len(title) + len(doc.text) > most:
                raise self._document_too_large(i, f"more than {per_doc}", shape())

    def _refuse_document(
        self,
        index: int,
        title: int,
        size: int,
        cap: int | None,
        shape: Callable[[], RequestShape],
        *,
        exact: bool,
    ) -> None:
        """Refuse document ``index`` with ``title`` tokens of title and ``size`` of title and
        text (lower bounds unless ``exact``): a title at the per-document limit (it is never
        cut, so it would leave no room for text), a document over it (without a cap), or a title
        at the caller's ``cap`` on a document the cap must cut."""
        per_doc = self.limits.max_tokens_per_doc
        if title >= per_doc:
            raise self._title_too_large(index, str(title) if exact else f"at least {title}")
        if cap is None and size > per_doc:
            raise self._document_too_large(
                index, str(size) if exact else f"more than {per_doc}", shape()
            )
        if cap is not None and title >= cap and size > cap:
            shown_title = str(title) if exact else f"at least {title}"
            raise self._no_room_for_text(index, shown_title, cap, shape())

    def _bounded_shape(
        self, query: str, documents: Sequence[Document], titles: Sequence[str]
    ) -> RequestShape:
        """The request's counts for a precheck refusal's advice: exact for the query and the
        shortest texts (:data:`_ADVICE_TOKENIZED_CHARS`), upper bounds for the rest."""
        per_doc = self.limits.max_tokens_per_doc
        texts = [query, *titles, *(d.text for d in documents)]
        n = len(documents)
        stops = [self.limits.max_query_tokens, *([per_doc] * n), *([per_doc + 1] * n)]
        counts = self._ceilings(texts, stops)
        title_counts = counts[1 : 1 + n]
        sizes = [
            min(per_doc + 1, t + x) for t, x in zip(title_counts, counts[1 + n :], strict=True)
        ]
        return RequestShape(
            query=counts[0], titles=title_counts, sizes=sizes, titled=_titled(documents)
        )

    def _ceilings(self, texts: Sequence[str], stops: Sequence[int]) -> list[int]:
        """Upper bounds on the tokens of ``texts``, each capped at its stop (a text over its stop
        is counted as the stop: no advice reaches it). Texts that may be within their stop are
        tokenized while :data:`_ADVICE_TOKENIZED_CHARS` last, shortest first; the others count
        their UTF-8 bytes plus one, an upper bound for the vocabularies :class:`TokenFloor`
        supports (a token holds at least one byte; SentencePiece may add one for its leading
        space). Without a floor every text within its stop's characters is tokenized."""
        per_token = self.tokens.max_token_chars
        by_bytes = self.tokens.floor is not None
        out = list(stops)
        exact: list[int] = []
        left = _ADVICE_TOKENIZED_CHARS
        for i in sorted(range(len(texts)), key=lambda j: len(texts[j])):
            text, stop = texts[i], stops[i]
            if per_token is not None and len(text) > stop * per_token:
                continue  # more than ``stop`` tokens, counted as ``stop``
            if not by_bytes or len(text) <= left:
                left -= len(text)
                exact.append(i)
            else:
                out[i] = min(stop, len(text.encode("utf-8", "surrogatepass")) + 1)
        if exact:
            try:
                counts = self._counts([texts[i] for i in exact])
            except TokenizerError:  # check() names it; the advice stays a bound
                counts = [stops[i] for i in exact]
            for i, n in zip(exact, counts, strict=True):
                out[i] = min(stops[i], n)
        return out

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
            InputTooLargeError: a limit is exceeded (the message names it and its variable, and
                what to send instead where a change of the request avoids it).
            TokenizerError: the tokenizer cannot encode the input.
        """
        if not prechecked:
            self.precheck(query, documents, truncate_to=truncate_to)
        cap = self._truncation(truncate_to)
        q_tokens = self.check_query(query, prechecked=True)
        titles = self._counts([title_text(d) for d in documents])  # each under the limit's units
        per_doc = self.limits.max_tokens_per_doc
        warnings: list[str] = []
        if cap is None:
            texts = self._counts([d.text for d in documents])
            docs = list(documents)
            counts = sizes = [t + x for t, x in zip(titles, texts, strict=True)]
        else:
            docs, counts, warnings, cut = self._truncated(documents, cap, titles)
            # A cut document counts as over every cap the advice may name (its whole count is
            # unknown: only a bounded prefix was tokenized).
            sizes = [per_doc + 1 if c else n for n, c in zip(counts, cut, strict=True)]

        def shape() -> RequestShape:
            return RequestShape(
                query=q_tokens, titles=titles, sizes=sizes, titled=_titled(documents)
            )

        for i, (t, n) in enumerate(zip(titles, counts, strict=True)):
            self._refuse_document(i, t, n, cap, shape, exact=True)
        checked = CheckedInput(
            documents=tuple(docs),
            query_tokens=q_tokens,
            document_tokens=tuple(counts),
            prompt_tokens=self.prompt.total(len(documents), _titled(documents)),
            warnings=tuple(warnings),
        )
        if checked.request_tokens > self.limits.max_request_tokens:
            raise self._request_too_large(str(checked.request_tokens), shape(), cap)
        return checked

    def truncate(
        self, documents: Sequence[Document], max_tokens: int, *, titles: Sequence[int] | None = None
    ) -> tuple[list[Document], list[int], list[str]]:
        """Cut each document's text so that its title and text have at most ``max_tokens``
        tokens, with a warning per cut one.

        Never refuses: for the caller's own ``max_tokens_per_doc`` and for passages the caller did
        not write (retrieval hits). A title is never cut, and at least one token of text is kept,
        so a title of ``max_tokens`` tokens or more leaves its document over (:meth:`check`
        refuses those). Only a bounded prefix of a long text is tokenized, so the warning of a
        very long document gives a lower bound ("over N").

        Args:
            documents: the documents.
            max_tokens: the most tokens of each document, title and text together.
            titles: tokens of each document's title, when already counted.

        Returns:
            The documents (cut ones shortened, ids kept), their tokens as scored (title and
            text), the warnings.
        """
        docs, counts, warnings, _ = self._truncated(documents, max_tokens, titles)
        return docs, counts, warnings

    def _truncated(
        self, documents: Sequence[Document], max_tokens: int, titles: Sequence[int] | None
    ) -> tuple[list[Document], list[int], list[str], list[bool]]:
        """:meth:`truncate`, and which documents were cut."""
        if titles is None:
            titles = self._counts([title_text(d) for d in documents])
        keeps = [max(1, max_tokens - t) for t in titles]
        texts = [d.text for d in documents]
        per_token = self.tokens.max_token_chars
        if per_token is not None:
            texts = [
                t[: k * per_token + _TRUNCATION_MARGIN_CHARS]
                for t, k in zip(texts, keeps, strict=True)
            ]
        out: list[Document] = []
        counts: list[int] = []
        warnings: list[str] = []
        cut: list[bool] = []
        rows = zip(documents, texts, self.tokens.offsets(texts), titles, keeps, strict=True)
        for i, (doc, text, offsets, title, keep) in enumerate(rows):
            end = cut_at_tokens(offsets, keep)
            cut.append(end is not None)
            if end is None:
                out.append(doc)
                counts.append(title + len(offsets))
                continue
            whole = len(text) == len(doc.text)
            total = str(title + len(offsets)) if whole else f"over {title + len(offsets) - 1}"
            out.append(dataclasses.replace(doc, text=doc.text[:end]))
            counts.append(title + keep)
            warnings.append(truncation_warning(i, total, title + keep, title=title))
        return out, counts, warnings, cut

    def _room(self, cap: int | None) -> Room:
        return Room(
            budget=self.limits.max_request_tokens,
            per_doc=self.limits.max_tokens_per_doc,
            cap=cap,
            prompt=self.prompt,
        )

    def _per_doc_basis(self) -> str:
        return self.limits.max_tokens_per_doc_basis or "RAGATTN_MAX_TOKENS_PER_DOC"

    def _query_too_large(self, what: str, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"{what} has {tokens} tokens; the limit is {self.limits.max_query_tokens} "
            "(RAGATTN_MAX_QUERY_TOKENS)"
        )

    def _document_too_large(
        self, index: int, tokens: str, shape: RequestShape
    ) -> InputTooLargeError:
        return InputTooLargeError(
            f"documents[{index}] has {tokens} tokens; the limit is "
            f"{self.limits.max_tokens_per_doc} per document, its title and text together "
            f"({self._per_doc_basis()}); {advise(shape, self._room(None))}"
        )

    def _title_too_large(self, index: int, tokens: str) -> InputTooLargeError:
        return InputTooLargeError(
            f"documents[{index}].title has {tokens} tokens; the limit is "
            f"{self.limits.max_tokens_per_doc} per document, its title and text together "
            f"({self._per_doc_basis()}), and a title is never truncated: shorten the title, or "
            "send its words at the start of the text, where max_tokens_per_doc can truncate them"
        )

    def _no_room_for_text(
        self, index: int, tokens: str, cap: int, shape: RequestShape
    ) -> InputTooLargeError:
        return InputTooLargeError(
            f"documents[{index}].title has {tokens} tokens, so max_tokens_per_doc={cap} leaves "
            "no room for its text (the cap counts the title with the text, and a title is never "
            f"truncated); {advise(shape, self._room(cap))}"
        )

    def _request_too_large(
        self, tokens: str, shape: RequestShape, cap: int | None
    ) -> InputTooLargeError:
        basis = self.limits.request_budget_basis
        return InputTooLargeError(
            f"the request has {tokens} tokens (query, documents' titles and texts after "
            "truncation, and the prompt's own parts); the limit is "
            f"{self.limits.max_request_tokens} per request "
            f"({basis or 'RAGATTN_MAX_REQUEST_TOKENS'}); {advise(shape, self._room(cap))}"
        )


def _titled(documents: Sequence[Document]) -> int:
    """How many documents have a title (each adds the line break after it to the prompt)."""
    return sum(1 for d in documents if d.title)


__all__ = [
    "CheckedInput",
    "LimitChecker",
    "Limits",
    "PromptCost",
    "TokenOffsets",
    "cut_at_tokens",
    "title_text",
    "truncation_warning",
]
