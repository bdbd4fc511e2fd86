"""A lexical cascade in front of attention: long contexts are cut before the proxy reads them.

The proxy forward is the cost of every attention method, and it grows with the tokens it reads. A
cheap first scorer ranks a long context's sentences, and attention reads only the best ones, a
``keep`` share of the context's proxy tokens. A sentence the cascade drops is never kept, so the
share of gold sentences it drops bounds the recall it can cost; the thresholds were chosen on that
bound over training questions (``studies/cascade_curve.py``, BENCHMARKS.md §3 "A lexical
cascade"), and what it costs on the shared dev sets is measured there too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ragattn.compress.links import title_pattern
from ragattn.document_probe import document_cosines
from ragattn.errors import InvalidInputError
from ragattn.lexical import bm25_scores
from ragattn.sentence_attention import Unit
from ragattn.types import Budget, Document

if TYPE_CHECKING:
    from ragattn.compress.scorers import UnitScorer

CascadeScorer = Literal["bm25", "documents", "lexical"]
SCORERS: tuple[CascadeScorer, ...] = ("bm25", "documents", "lexical")


def unit_cosines(query: str, documents: Sequence[Document], units: Sequence[Unit]) -> np.ndarray:
    """Each unit's document's MiniLM cosine to the query (title and text, in [-1, 1]): the very
    cosine the document probe reads (:func:`ragattn.document_probe.document_cosines`), so the
    encoder's cache serves it once for both."""
    cosines = document_cosines(query, documents)
    return np.asarray([cosines[u.doc] for u in units], dtype=np.float64)


def keep_by_tokens(
    scores: Sequence[float] | np.ndarray, costs: Sequence[int] | np.ndarray, keep: float
) -> np.ndarray:
    """Indices (ascending) of the best-scoring units whose token costs first reach ``keep`` of
    the total; ties go to the earlier unit. At least one unit is kept when there is one.

    Args:
        scores: one score per unit, higher is better (any units).
        costs: each unit's length in tokens.
        keep: the share of the total tokens to keep, in (0, 1].
    """
    s = np.asarray(scores, dtype=np.float64)
    c = np.asarray(costs, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(0, dtype=np.int64)
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    target = keep * float(c.sum())
    kept: list[int] = []
    total = 0
    for i in order:
        if kept and total >= target:
            break
        kept.append(i)
        total += int(c[i])
    return np.asarray(sorted(kept), dtype=np.int64)


def named_documents(
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    read: Sequence[int] | np.ndarray,
) -> set[int]:
    """The documents whose title (:func:`ragattn.compress.links.title_pattern`) the query names,
    or a ``read`` unit of another document names: the second paragraphs of a multi-hop question,
    which the title links of the document-aware selection lift, and which a first pass that reads
    words alone ranks low."""
    texts = {int(i): documents[units[i].doc].text[units[i].start : units[i].end] for i in read}
    named = set()
    for d, doc in enumerate(documents):
        pattern = title_pattern(doc.title)
        if pattern is None:
            continue
        if pattern.search(query) or any(
            units[i].doc != d and pattern.search(t) for i, t in texts.items()
        ):
            named.add(d)
    return named


def keep_linked(
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    scores: Sequence[float] | np.ndarray,
    costs: Sequence[int] | np.ndarray,
    keep: float,
) -> np.ndarray:
    """:func:`keep_by_tokens` that keeps the sentences of linked documents first: the units the
    first pass keeps name documents (:func:`named_documents`), whose sentences then rank above
    every other sentence, and the same ``keep`` share of tokens is filled in that order. A call
    without titles is cut exactly as by :func:`keep_by_tokens`."""
    first = keep_by_tokens(scores, costs, keep)
    named = named_documents(query, documents, units, first)
    if not named:
        return first
    s = np.asarray(scores, dtype=np.float64)
    lifted = np.where([u.doc in named for u in units], 1.0, 0.0)
    # rank by (linked, score): a linked sentence precedes every other, order kept inside each
    rank = np.lexsort((-s, -lifted))
    order = np.empty(len(s))
    order[rank] = -np.arange(len(s), dtype=np.float64)
    return keep_by_tokens(order, costs, keep)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cascade:
    """When and how much a long context is cut before attention reads it.

    Attributes:
        min_tokens: contexts shorter than this many proxy tokens are read whole.
        keep: the share of the context's proxy tokens attention reads, in (0, 1].
        scorer: the first pass: ``"bm25"`` (BM25 over the context's sentences, no model),
            ``"lexical"`` (the ``lexical`` probe: BM25, MiniLM, position and length) or
            ``"documents"`` (each document's MiniLM cosine: whole documents, best first).
        min_room: the cascade applies only when what it keeps is at least this many times the
            budget's tokens, so that attention still chooses among several times what it keeps.
        links: keep the sentences of linked documents first (:func:`keep_linked`: documents
            whose title the query or a kept sentence of another document names).
        max_read: at most this many proxy tokens are read (None: no cap, ``keep`` alone), but
            never fewer than ``min_room`` times the budget's tokens: the forward's cost grows with
            the tokens it reads, so a cap makes the read of 10-50 candidates cost about the same
            as the read of a few, while attention still chooses among several times what it keeps.
    """

    min_tokens: int = 1024
    keep: float = 0.5
    scorer: CascadeScorer = "bm25"
    min_room: float = 2.0
    links: bool = False
    max_read: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.keep <= 1.0:
            raise InvalidInputError(f"cascade keep must be in (0, 1], got {self.keep}")
        if self.min_tokens < 0:
            raise InvalidInputError(f"cascade min_tokens must be >= 0, got {self.min_tokens}")
        if self.scorer not in SCORERS:
            raise InvalidInputError(
                f"cascade scorer must be one of {', '.join(SCORERS)}, got {self.scorer!r}"
            )
        if self.min_room < 1.0:
            raise InvalidInputError(f"cascade min_room must be >= 1, got {self.min_room}")
        if self.max_read is not None and (
            not isinstance(self.max_read, int)
            or isinstance(self.max_read, bool)
            or self.max_read < 1
        ):
            raise InvalidInputError(
                f"cascade max_read must be a positive number of tokens, got {self.max_read!r}"
            )

    @classmethod
    def parse(cls, spec: str, *, min_tokens: int = 1024, min_room: float = 2.0) -> Cascade:
        """A cascade from ``"KEEP:SCORER"`` (e.g. ``"0.8:lexical"``; the scorer defaults to
        ``lexical``; a ``+links`` suffix, ``"0.8:lexical+links"``, sets :attr:`links`; a
        ``@N`` suffix, ``"0.8:lexical+links@768"``, sets :attr:`max_read`), as the command line
        gives it.

        Raises:
            InvalidInputError: a keep that is not a number in (0, 1], an unknown scorer, or a cap
                that is not a positive integer.
        """
        spec_only, at, cap = spec.partition("@")
        max_read = None
        if at:
            if not cap.isdigit():
                raise InvalidInputError(f"cascade {spec!r}: the cap after @ must be tokens")
            max_read = int(cap)
        spec = spec_only
        keep, _, scorer = spec.partition(":")
        scorer, plus, suffix = scorer.partition("+")
        if plus and (suffix != "links" or not scorer):
            raise InvalidInputError(f"cascade {spec!r}: the only suffix is SCORER+links")
        try:
            share = float(keep)
        except ValueError:
            raise InvalidInputError(f"cascade {spec!r}: KEEP must be a number") from None
        return cls(
            min_tokens=min_tokens,
            keep=share,
            scorer=scorer or "lexical",  # type: ignore[arg-type]  # checked in __post_init__
            links=bool(plus),
            min_room=min_room,
            max_read=max_read,
        )

    @property
    def name(self) -> str:
        """The cascade as :meth:`parse` reads it (``"0.8:lexical"``, ``"0.8:lexical+links"``,
        ``"0.8:lexical+links@768"``)."""
        cap = f"@{self.max_read}" if self.max_read is not None else ""
        return f"{self.keep:g}:{self.scorer}" + ("+links" if self.links else "") + cap

    def read_share(self, context_tokens: int, budget_tokens: int | None) -> float | None:
        """The share of a context of ``context_tokens`` (proxy tokens) that attention reads
        when it is compressed to ``budget_tokens`` (None: no token limit), or None when the
        cascade does not cut it: too short, no token limit, or nothing left to cut once
        attention keeps its room (``min_room`` times the budget)."""
        if context_tokens < self.min_tokens or budget_tokens is None or context_tokens <= 0:
            return None
        read = self.keep * context_tokens
        room = self.min_room * budget_tokens
        if read < room:
            return None
        if self.max_read is not None:
            read = min(read, max(float(self.max_read), room))
        return read / context_tokens if read < context_tokens else None

    def cut(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        budget: Budget,
        *,
        tokenizer: Any,
        lexical: Callable[[], UnitScorer],
    ) -> np.ndarray | None:
        """The units attention reads when this cascade cuts a call (ascending indices), or None
        when the whole context is read. Sizes are counted in ``tokenizer`` (the proxy's);
        ``lexical`` gives the ``lexical`` probe's scorer (loaded on first use)."""
        if len(units) < 2:
            return None
        if self.scorer == "documents" and len({u.doc for u in units}) < 2:
            return None  # one document: its sentences share one cosine, nothing to rank
        texts = [docs[u.doc].text[u.start : u.end] for u in units]
        costs = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        total = sum(costs)
        share = self.read_share(total, budget.token_limit(total))
        if share is None:
            return None
        if self.scorer == "bm25":
            first = bm25_scores(query, texts)
        elif self.scorer == "documents":
            first = unit_cosines(query, docs, units)
        else:
            first = lexical().score(query, docs, units)[0]
        if self.links:
            read = keep_linked(query, docs, units, first, costs, share)
        else:
            read = keep_by_tokens(first, costs, share)
        return read if len(read) < len(units) else None

    def applies(self, context_tokens: int, budget_tokens: int | None) -> bool:
        """Whether a context of ``context_tokens`` compressed to ``budget_tokens`` (None: no
        token limit) is cut: it is long enough and what the cut keeps leaves attention room."""
        return self.read_share(context_tokens, budget_tokens) is not None


DEFAULT_CASCADE = Cascade(
    min_tokens=1024, keep=0.8, scorer="lexical", min_room=1.5, links=True, max_read=1024
)
"""The compressor's default read: a context of 1,024 proxy tokens or more is cut before attention
reads it to at most 1,024 proxy tokens (and at most 80 % of it), never fewer than 1.5 times the
budget's tokens: the ``lexical`` probe's best sentences, with the sentences of linked documents
(named by title in the query or in a sentence the first pass keeps) first. So the read of 10-50
candidates costs about what the read of a few does. Chosen by the rule of BENCHMARKS.md §0 ("The
read for 10-50 candidates"): the cheapest read within 1.0 point of the best evidence recall at 20 %
on the choice sets (the uncapped ``0.8:lexical+links``, the default before, is level and 1.7x its
cost for 20 candidates). The keep share and first pass were chosen earlier on long training
questions (BENCHMARKS.md §3, "A lexical cascade" and "A cascade that keeps linked documents")."""

__all__ = [
    "DEFAULT_CASCADE",
    "SCORERS",
    "Cascade",
    "CascadeScorer",
    "keep_by_tokens",
    "keep_linked",
    "named_documents",
    "unit_cosines",
]
