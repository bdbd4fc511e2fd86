"""Input limits in proxy tokens: one implementation for the service's routes and the pipeline.

Two steps, so that an oversized request costs microseconds, not a tokenizer pass:

1. :meth:`LimitChecker.precheck` looks only at counts and lengths. A document with more characters
   than ``max_tokens × max_token_chars`` (the most characters one vocabulary token can cover) has
   more tokens than the limit whatever it says, so it is refused before anything is tokenized.
   This is exact, never an estimate: it refuses nothing that the token count would accept.
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
from ragattn.types import Document

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
    """

    max_documents: int = 1000
    max_query_tokens: int = 2048
    max_tokens_per_doc: int = 4096
    max_request_tokens: int = 16_384

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInputError(f"{f.name} must be a positive integer, got {value!r}")

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """The limits of a :class:`ragattn.settings.Settings` (``RAGATTN_MAX_*``)."""
        return cls(
            max_documents=settings.max_documents,
            max_query_tokens=settings.max_query_tokens,
            max_tokens_per_doc=settings.max_tokens_per_doc,
            max_request_tokens=settings.max_request_tokens,
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
        if backend is not None:
            from tokenizers import Tokenizer

            self._backend = Tokenizer.from_str(backend.to_str())
        self.max_token_chars = max_token_chars(tokenizer)
        """Most characters of input one token can stand for; ``None`` when unknown."""

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


def max_token_chars(tokenizer: Any) -> int | None:
    """The most input characters one token of ``tokenizer`` can cover, or ``None`` if unknown.

    For a byte-level or SentencePiece-style vocabulary a token covers at most as many characters
    as its vocabulary entry has symbols (one per byte, or per character); added tokens match their
    literal content. A normalizer other than a plain space replacement could shrink the text before
    it is split (e.g. NFC composing characters), so the bound is only claimed without one.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    spec = json.loads(backend.to_str())
    if not _length_preserving(spec.get("normalizer")):
        return None
    vocab = spec.get("model", {}).get("vocab")
    if isinstance(vocab, dict):
        longest = max((len(k) for k in vocab), default=1)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...]
        longest = max((len(p[0]) for p in vocab), default=1)
    else:
        return None
    added = [len(t.get("content", "")) for t in spec.get("added_tokens", [])]
    return max([longest, *added, 1])


def _length_preserving(normalizer: Any) -> bool:
    if normalizer is None:
        return True
    kind = normalizer.get("type")
    if kind == "Sequence":
        return all(_length_preserving(n) for n in normalizer.get("normalizers", []))
    if kind == "Prepend":
        return True
    if kind == "Replace":
        pattern = normalizer.get("pattern", {}).get("String")
        return isinstance(pattern, str) and len(normalizer.get("content", "")) >= len(pattern)
    return False


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
        """Refuse by counts and lengths alone, without tokenizing (microseconds).

        Args:
            query: the query or question.
            documents: the documents; ``None`` when the request has none (retrieve, ask).
            truncate_to: the caller's own per-document token cap: up to ``max_tokens_per_doc``
                it truncates instead of refusing; above it, it changes nothing (a caller's cap
                can lower the server's limit, never lift it).
            what: how the query is named in messages (``query`` or ``question``).

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: too many documents, a text longer than its limit can be, or
                more tokens in all than ``max_request_tokens`` can be.
        """
        q_bound = self._chars_bound(self.limits.max_query_tokens)
        if q_bound is not None and len(query) > q_bound:
            raise self._query_too_large(what, f"more than {self.limits.max_query_tokens}")
        if documents is None:
            return
        self.check_count(len(documents))
        per_token = self.tokens.max_token_chars
        if per_token is None:
            return
        truncate_to = self._truncation(truncate_to)
        if truncate_to is None:  # long documents are refused, not cut
            d_bound = self.limits.max_tokens_per_doc * per_token
            for i, doc in enumerate(documents):
                if len(doc.text) > d_bound:
                    raise self._document_too_large(i, f"more than {self.limits.max_tokens_per_doc}")
        # Each document has at least ceil(chars / per_token) tokens (at most truncate_to once
        # cut): a sum of lower bounds over the budget is over it whatever the exact count says.
        cap = truncate_to if truncate_to is not None else self.limits.max_tokens_per_doc
        floor = -(-len(query) // per_token)
        for doc in documents:
            floor += min(cap, -(-len(doc.text) // per_token))
        if floor > self.limits.max_request_tokens:
            raise self._request_too_large(f"at least {floor}")

    def _truncation(self, truncate_to: int | None) -> int | None:
        """The caller's cap if it truncates: only one up to the server's limit does (a larger one
        would lift the limit; it is treated as no cap, so long documents are refused fast)."""
        if truncate_to is None or truncate_to > self.limits.max_tokens_per_doc:
            return None
        return truncate_to

    def check_query(self, query: str, *, what: str = "query") -> int:
        """Tokens of ``query``; refuse it over ``max_query_tokens``."""
        self.precheck(query, None, what=what)
        n = self.tokens.count(query)
        if n > self.limits.max_query_tokens:
            raise self._query_too_large(what, str(n))
        return n

    def check(
        self, query: str, documents: Sequence[Document], *, truncate_to: int | None = None
    ) -> CheckedInput:
        """Tokenize and apply the token limits; cut documents to ``truncate_to`` with a warning.

        Raises:
            InvalidInputError: no documents.
            InputTooLargeError: a limit is exceeded (the message names it and its variable).
            TokenizerError: the tokenizer cannot encode the input.
        """
        self.precheck(query, documents, truncate_to=truncate_to)
        truncate_to = self._truncation(truncate_to)
        q_tokens = self.check_query(query)
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
        return InputTooLargeError(
            f"the request has {tokens} tokens (query plus documents after truncation); the limit "
            f"is {self.limits.max_request_tokens} per request (RAGATTN_MAX_REQUEST_TOKENS); "
            "split it into smaller requests or send max_tokens_per_doc to truncate"
        )


__all__ = [
    "CheckedInput",
    "LimitChecker",
    "Limits",
    "TokenOffsets",
    "cut_at_tokens",
    "max_token_chars",
    "truncation_warning",
]
