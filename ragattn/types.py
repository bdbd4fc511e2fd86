"""Public value types that cross module boundaries.

All result types are frozen, keyword-only dataclasses with ``to_dict()``; numbers stay numbers.
:class:`Budget` is the one compression budget every front end passes on (see
:mod:`ragattn.contract` for the rest of the engine contract).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragattn.errors import InvalidInputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """A candidate passage: its text, an optional caller id and title, and free metadata.

    ``title`` is prepended to the text in prompts (as BEIR-style rerankers do) but never counted as
    part of ``text`` for character spans.
    """

    text: str
    id: str | None = None
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "id": self.id,
            "title": self.title,
            "metadata": dict(self.metadata),
        }


DocumentLike = str | Document | Mapping[str, Any]


def as_document(value: DocumentLike, position: int) -> Document:
    """Coerce a string, :class:`Document` or mapping with ``text`` (and ``id``/``title``) to a
    Document.

    Raises:
        InvalidInputError: the value is neither a string nor carries a string ``text``.
    """
    if isinstance(value, Document):
        return value
    if isinstance(value, str):
        return Document(text=value)
    if isinstance(value, Mapping):
        text = value.get("text")
        if not isinstance(text, str):
            raise InvalidInputError(f"documents[{position}] has no string 'text' field")
        doc_id = value.get("id")
        title = value.get("title")
        if title is not None and not isinstance(title, str):
            raise InvalidInputError(f"documents[{position}].title must be a string")
        extra = {k: v for k, v in value.items() if k not in {"text", "id", "title"}}
        meta = value.get("metadata", extra)
        return Document(
            text=text,
            id=None if doc_id is None else str(doc_id),
            title=title,
            metadata=meta if isinstance(meta, Mapping) else extra,
        )
    raise InvalidInputError(
        f"documents[{position}] must be a string or an object with a 'text' field, "
        f"got {type(value).__name__}"
    )


def as_documents(values: Iterable[DocumentLike]) -> list[Document]:
    """Coerce every element with :func:`as_document`; an iterable of strings is the common case."""
    if isinstance(values, str | bytes):
        raise InvalidInputError(
            "documents must be a list of strings or objects, not a single string"
        )
    return [as_document(v, i) for i, v in enumerate(values)]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenSpan:
    """A half-open token range ``[start, end)`` in a tokenized prompt."""

    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def as_slice(self) -> slice:
        return slice(self.start, self.end)


def to_plain(value: Any) -> Any:
    """``dataclasses.asdict`` that also turns tuples into lists for JSON."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: to_plain(v) for k, v in asdict(value).items()}
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [to_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankResult:
    """One reranked document.

    Attributes:
        index: position of the document in the caller's input list.
        relevance_score: in [0, 1]; a fixed monotone map of ``raw_score`` documented by the method
            (higher is more relevant); comparable within one call, not calibrated across calls.
        raw_score: the method's own score (e.g. calibrated attention mass, in units of attention
            probability summed over document tokens and averaged over heads).
        document: the input document (text, id, title, metadata kept).
        pruned_text: only from a rerank that also pruned (the service's rerank routes with
            ``prune``): the document's kept sentences, a concatenation of substrings of
            ``document.text`` (for a Markdown document with the fences and table headers listed
            in ``added``); ``None`` when nothing was pruned.
        kept_spans: with ``pruned_text``, the kept sentences as character ranges (Unicode code
            points) of ``document.text`` with their keep scores in [0, 1]; empty otherwise.
        added: with ``pruned_text``, the fences and table headers repeated into it so that a
            Markdown document's kept text stays valid Markdown (never kept spans;
            :attr:`CompressedDocument.added`); empty otherwise.
    """

    index: int
    relevance_score: float
    raw_score: float
    document: Document
    pruned_text: str | None = None
    kept_spans: tuple[KeptSpan, ...] = ()
    added: tuple[AddedText, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "relevance_score": self.relevance_score,
            "raw_score": self.raw_score,
            "document": self.document.to_dict(),
        }
        if self.pruned_text is not None:
            out["pruned_text"] = self.pruned_text
            out["kept_spans"] = [to_plain(s) for s in self.kept_spans]
            if self.added:
                out["added"] = [to_plain(a) for a in self.added]
        return out


class RerankResults(tuple[RerankResult, ...]):
    """Results in descending relevance, a tuple with helpers; ``warnings`` reports
    splits/truncations."""

    warnings: tuple[str, ...]
    method: str
    windows: int

    def __new__(
        cls,
        results: Iterable[RerankResult],
        *,
        warnings: Iterable[str] = (),
        method: str = "",
        windows: int = 1,
    ) -> RerankResults:
        obj = super().__new__(cls, tuple(results))
        obj.warnings = tuple(warnings)
        obj.method = method
        obj.windows = windows
        return obj

    def top_k(self, k: int) -> RerankResults:
        return RerankResults(
            self[:k], warnings=self.warnings, method=self.method, windows=self.windows
        )

    def by_id(self, doc_id: str) -> RerankResult:
        for r in self:
            if r.document.id == doc_id:
                return r
        raise KeyError(doc_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [r.to_dict() for r in self],
            "warnings": list(self.warnings),
            "method": self.method,
            "windows": self.windows,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptSpan:
    """A kept sentence: character range ``[start, end)`` of ``documents[doc_index].text`` and its
    score.

    ``score`` is the method's keep probability in [0, 1] (higher is more useful to answer the
    query).
    """

    doc_index: int
    start: int
    end: int
    score: float
    text: str


AddedKind = Literal["fence", "table_header"]
"""What the library repeats in a compressed Markdown document: a code block's opening or closing
fence, or a table's header (its header and delimiter rows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AddedText:
    """Text the library repeated into a compressed document so that its kept Markdown stays
    valid (a fence around a kept piece of code, a header over a kept table row); never a kept
    span, since the source did not have it there.

    Attributes:
        kind: what it is (:data:`AddedKind`).
        text: the text inserted, ``document.text[source_start:source_end]``.
        offset: where it was inserted: ``CompressedDocument.text[offset:offset + len(text)]``
            is ``text`` (Unicode code points).
        source_start, source_end: the span of ``document.text`` it repeats.
    """

    kind: AddedKind
    text: str
    offset: int
    source_start: int
    source_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressedDocument:
    """One input document after compression.

    ``text`` is its kept spans, in their original order, joined by whitespace; for a Markdown
    document (:mod:`ragattn.markdown_units`) also the fences and table headers the library
    repeated so that it stays valid Markdown, listed in ``added`` (empty for any other text).
    """

    index: int
    text: str
    kept_spans: tuple[KeptSpan, ...]
    sentence_scores: tuple[float, ...]
    sentence_spans: tuple[tuple[int, int], ...]
    document: Document
    added: tuple[AddedText, ...] = ()


StageSeconds = tuple[tuple[str, float], ...]
"""Where a call's time went: ``(stage, seconds)`` pairs in the order the stages ran, wall-clock
seconds (``time.perf_counter``) of this call only (the compress read's stages are
``ragattn.compress.read.STAGES``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressionResult:
    """The result of one compression call.

    Token counts are in ``tokenizer`` (the downstream model's, default the proxy's). ``ratio`` is
    ``compressed_tokens / origin_tokens`` (fraction kept, 0 < ratio <= 1).

    ``stage_seconds`` says where the call's time went: the wall-clock seconds of each stage of the
    read that made this result (``sentences``, ``candidates``, ``cut``, ``forward``, ``documents``,
    ``selection``, ``ranking`` for ``rerank_and_compress`` only, ``assembly``), this call only,
    loading before the call excluded; empty for a result the read did not just make (a remote
    one, or one built by hand). It is not part of the answer: two results that differ only in it
    compare equal.
    """

    compressed_text: str
    documents: tuple[CompressedDocument, ...]
    origin_tokens: int
    compressed_tokens: int
    ratio: float
    tokenizer: str
    method: str
    warnings: tuple[str, ...] = ()
    stage_seconds: StageSeconds = field(default=(), compare=False)

    @property
    def kept_spans(self) -> tuple[KeptSpan, ...]:
        return tuple(s for d in self.documents for s in d.kept_spans)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)


# -- budgets and arguments ---------------------------------------------------------------------

BudgetKind = Literal["ratio", "target_tokens", "threshold"]
MAX_TARGET_TOKENS = 10_000_000
"""The largest ``target_tokens`` (``ragattn.settings.TOKEN_CEILING``, the most tokens any setting
or request names), so that no budget overflows a float."""
DEFAULT_MAX_CONTEXT_TOKENS = 1024
"""The token ceiling of :data:`DEFAULT_BUDGET` (and of the two-pass flow's default ratio), so
that the context a generator gets stops growing with the candidates.

Why 1,024: the one read's attention reads at most 2,048 proxy tokens (the ``ceiling`` of
:data:`ragattn.compress.cascade.DEFAULT_CASCADE`) and leaves the budget a room of 1.5 times its
tokens; 1,024 is the largest round budget whose room (1.5 x 1,024 = 1,536) fits that read, so the
default budget never makes the read fill past what attention read. It also fits a 2k-4k-token
generator window with room for the question and the answer. At the one read's ratio 0.2: 20
candidates of ~128 tokens (2,560 tokens) keep 512 (the ceiling does not bind); 100 candidates
(12,800 tokens) keep 1,024 instead of 2,560."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """One compression budget, valid by construction: ``kind`` and its ``value``.

    ``ratio`` is the fraction of tokens kept, in (0, 1]; ``target_tokens`` the most tokens kept, a
    positive integer; ``threshold`` the lowest keep score kept, in [0, 1]. ``max_tokens`` (ratio
    only, optional) is a ceiling on a ratio budget: the most tokens kept whatever the ratio gives
    (:data:`DEFAULT_MAX_CONTEXT_TOKENS` says why the defaults set one), in the tokens the budget
    counts in.

    Raises:
        InvalidInputError: a non-number, a value out of range, or a ``max_tokens`` that is not a
            positive integer of at most :data:`MAX_TARGET_TOKENS` or is on a non-ratio budget.
    """

    kind: BudgetKind
    value: float
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        kind, value = self.kind, self.value
        # Compared before any conversion: a 400-digit int overflows float() (and math.isnan).
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInputError(f"{kind} must be a number")
        if isinstance(value, float) and math.isnan(value):
            raise InvalidInputError(f"{kind} must be a number")
        if kind == "ratio" and not 0 < value <= 1:
            raise InvalidInputError("ratio is the fraction of tokens kept and must be in (0, 1]")
        whole = isinstance(value, int) or value.is_integer()
        if kind == "target_tokens" and not (whole and 1 <= value <= MAX_TARGET_TOKENS):
            raise InvalidInputError(
                f"target_tokens must be a positive integer of at most {MAX_TARGET_TOKENS}"
            )
        if kind == "threshold" and not 0 <= value <= 1:
            raise InvalidInputError("threshold must be in [0, 1]")
        object.__setattr__(self, "value", float(value))
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens", _checked_max_tokens(kind, self.max_tokens))

    @classmethod
    def from_args(
        cls,
        ratio: float | None = None,
        target_tokens: int | None = None,
        threshold: float | None = None,
        *,
        max_tokens: int | None = None,
        given: Budget | None = None,
    ) -> Budget:
        """The one budget given: ``given`` (already checked) or one of the three keywords, with
        ``max_tokens`` as the ceiling of a ``ratio``.

        Raises:
            InvalidInputError: none or more than one budget, a value out of range, or a
                ``max_tokens`` without a ``ratio`` (or beside ``given``: set it on the budget).
        """
        candidates: tuple[tuple[BudgetKind, float | int | None], ...] = (
            ("ratio", ratio),
            ("target_tokens", target_tokens),
            ("threshold", threshold),
        )
        named = [(kind, value) for kind, value in candidates if value is not None]
        if len(named) + (given is not None) != 1:
            raise InvalidInputError("give exactly one budget: ratio, target_tokens or threshold")
        if given is not None:
            if max_tokens is not None:
                raise InvalidInputError(
                    "max_tokens is part of the budget: give Budget(..., max_tokens=...) instead"
                )
            return given
        kind, value = named[0]
        # checked in __post_init__
        return cls(kind=kind, value=value, max_tokens=max_tokens)  # type: ignore[arg-type]

    def keywords(self) -> dict[str, float | int]:
        """The budget as the keywords (and wire fields) it was given as: ``{"ratio": 0.5}``, or
        ``{"ratio": 0.2, "max_tokens": 1024}`` with a ceiling."""
        out: dict[str, float | int] = {
            self.kind: int(self.value) if self.kind == "target_tokens" else self.value
        }
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out

    def token_limit(self, origin_tokens: int) -> int | None:
        """The most tokens kept out of ``origin_tokens``; ``None`` for a threshold. A ratio keeps
        ``floor(ratio * origin_tokens)`` (at least 1), at most ``max_tokens`` when set."""
        if self.kind == "ratio":
            limit = max(1, math.floor(self.value * origin_tokens))
            return limit if self.max_tokens is None else min(limit, self.max_tokens)
        if self.kind == "target_tokens":
            return int(self.value)
        return None


def _checked_max_tokens(kind: BudgetKind, max_tokens: object) -> int:
    """``max_tokens`` of a ratio budget: a positive integer of at most
    :data:`MAX_TARGET_TOKENS` (``bool`` is not one).

    Raises:
        InvalidInputError: a non-ratio budget, or anything else.
    """
    if kind != "ratio":
        raise InvalidInputError(
            f"max_tokens is the token ceiling of a ratio budget; send it with ratio, not with "
            f"{kind}"
        )
    if (
        isinstance(max_tokens, bool)
        or not isinstance(max_tokens, int)
        or not 1 <= max_tokens <= MAX_TARGET_TOKENS
    ):
        raise InvalidInputError(
            f"max_tokens must be a positive integer of at most {MAX_TARGET_TOKENS}"
        )
    return max_tokens


DEFAULT_BUDGET = Budget(kind="ratio", value=0.2, max_tokens=DEFAULT_MAX_CONTEXT_TOKENS)
"""The budget of a call that names none, the same on every door: the library's verbs
(``compress``, ``rerank_and_compress``), ``/v1/compress``, ``/v1/rerank_compress`` and the rerank
routes' ``prune: {}``, the SDK (it sends nothing; the service applies this), the LangChain and
LlamaIndex adapters, ``ragattn batch``, and ``ask`` / ``/v1/ask`` / ``ragattn ask`` (the one read).

Keep a fifth of the tokens, at most 1,024 (:data:`DEFAULT_MAX_CONTEXT_TOKENS` says why 1,024: the
one read's attention reads at most 2,048 proxy tokens and leaves a budget a room of 1.5 times its
tokens, so the default never fills past what attention read). 20 candidates of ~128 tokens
(2,560) keep 512 tokens, the ceiling not binding; 100 (12,800) keep 1,024, not 2,560. A
``max_tokens`` given alone replaces the ceiling (:func:`ragattn.contract.default_budget`); a
``ratio`` given has none unless ``max_tokens`` gives one.

One flow keeps its own ratio: ``flow="two_pass"`` compresses only the ``top_n`` (5) passages its
reranker kept, so it keeps half of their tokens under the same ceiling
(:data:`ragattn.pipeline.FLOW_DEFAULTS` says why)."""


def check_top_n(top_n: object) -> int | None:
    """``top_n`` itself when it is None (keep all) or a positive integer (``bool`` is not one).

    Raises:
        InvalidInputError: anything else.
    """
    if top_n is None:
        return None
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise InvalidInputError("top_n must be a positive integer or None (keep all)")
    return top_n
