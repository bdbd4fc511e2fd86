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

from ragattn.compress.links import link_pattern
from ragattn.document_probe import CandidateCosines
from ragattn.errors import InvalidInputError
from ragattn.lexical import bm25_scores
from ragattn.sentence_attention import Unit
from ragattn.types import Budget, Document

if TYPE_CHECKING:
    from ragattn.compress.scorers import ProbeScorer


CascadeScorer = Literal["bm25", "documents", "lexical"]
SCORERS: tuple[CascadeScorer, ...] = ("bm25", "documents", "lexical")
CascadeDense = Literal["sentences", "pooled"]
DENSE: tuple[CascadeDense, ...] = ("sentences", "pooled")
MiniLMPass = Literal["documents", "pooled"]
"""MiniLM's one pass over a call's documents (the read's ``candidates`` stage): ``documents``,
each document's cosine (title and text); ``pooled``, those and each sentence's cosine pooled from
the same pass (:func:`ragattn.document_probe.document_and_unit_cosines`)."""


def unit_cosines(units: Sequence[Unit], cosines: np.ndarray) -> np.ndarray:
    """Each unit's document's MiniLM cosine to the query (title and text, in [-1, 1]) from
    ``cosines``, one per document: the very cosine the document probe reads
    (:func:`ragattn.embed.document_cosines`)."""
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
    """The documents whose name (:func:`ragattn.compress.links.link_name`: the title, or for a
    plain string the name it gives itself) the query names, or a ``read`` unit of another
    document names: the second paragraphs of a multi-hop question,
    which the title links of the document-aware selection lift, and which a first pass that reads
    words alone ranks low."""
    texts = {int(i): documents[units[i].doc].text[units[i].start : units[i].end] for i in read}
    named = set()
    for d, doc in enumerate(documents):
        pattern = link_pattern(doc)
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


def precuts(precut: float | None, share: float, total: float) -> bool:
    """Whether a :attr:`Cascade.precut` leaves the ``lexical`` first pass some documents
    unscored when attention reads ``share`` of a context of ``total`` proxy tokens: ``precut``
    times what it reads is less than the whole."""
    return precut is not None and precut * share * total < total


def precut_units(
    query: str,
    documents: Sequence[Document],
    units: Sequence[Unit],
    costs: Sequence[int],
    precut: float | None,
    share: float,
    cosines: np.ndarray,
) -> np.ndarray | None:
    """The units (ascending) of the documents a ``lexical`` first pass scores under a
    :attr:`Cascade.precut`, or None when it scores every unit (:func:`precuts`): documents the
    query names (:func:`ragattn.compress.links.link_pattern`) first, then by ``cosines``,
    MiniLM's cosine of each whole document (:func:`ragattn.embed.document_cosines`, the pass
    the ranking reads), whole documents until they hold ``precut`` times the tokens attention
    reads (``share`` of the context)."""
    total = float(sum(costs))
    if precut is None or not precuts(precut, share, total):
        return None
    per_doc = np.zeros(len(documents))
    for u, c in zip(units, costs, strict=True):
        per_doc[u.doc] += c
    patterns = [link_pattern(d) for d in documents]
    named = np.asarray([1.0 if p is not None and p.search(query) else 0.0 for p in patterns])
    order = np.lexsort((np.arange(len(documents)), -cosines, -named))
    target = precut * share * total
    chosen: set[int] = set()
    held = 0.0
    for d in order:
        if chosen and held >= target:
            break
        chosen.add(int(d))
        held += per_doc[d]
    return np.asarray([i for i, u in enumerate(units) if u.doc in chosen], dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class CutSizes:
    """A context a :class:`Cascade` cuts, in proxy tokens (:meth:`Cascade.sizes`).

    Attributes:
        texts: each unit's text.
        costs: each unit's length in proxy tokens.
        limit: the budget's tokens for this context (None: no token limit).
        share: the share of the context's tokens attention reads, in (0, 1).
    """

    texts: list[str]
    costs: list[int]
    limit: int | None
    share: float

    @property
    def total(self) -> int:
        """The context's proxy tokens."""
        return sum(self.costs)


def _ran(cosines: CandidateCosines | None) -> CandidateCosines:
    """The ``candidates`` stage's MiniLM pass, which the read's plan runs wherever a cut reads
    it (:meth:`Cascade.minilm_pass`)."""
    if cosines is None:
        raise ValueError("the cut reads MiniLM's document pass, which the read's plan did not run")
    return cosines


@dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    """What a :class:`Cascade` lets attention read.

    Attributes:
        read: the units attention reads (ascending indices).
        first: the first pass's score of every unit (higher is better; -inf for a unit the
            :attr:`Cascade.precut` left unscored).
        fill: the :attr:`Cascade.ceiling` left attention less than its room for the budget, so
            the unread units fill the rest of it after every read one, in ``first``'s order.
    """

    read: np.ndarray
    first: np.ndarray
    fill: bool = False

    def fill_scores(self, read_scores: np.ndarray) -> np.ndarray:
        """Every unit's keep score: ``read_scores`` (in [0, 1], one per :attr:`read` unit) where
        attention read, and for the unread ones 0, or with :attr:`fill` a score below every read
        unit's in the first pass's order (still >= 0)."""
        scores = np.zeros(len(self.first))
        scores[self.read] = read_scores
        if not self.fill:
            return scores
        unread = np.setdiff1d(np.arange(len(self.first)), self.read)
        if not len(unread):
            return scores
        floor = float(np.min(read_scores)) if len(read_scores) else 1.0
        if floor <= 0.0:
            return scores  # nothing below a read unit's 0 that stays >= 0
        order = sorted(unread.tolist(), key=lambda i: (-self.first[i], i))
        step = floor / (len(order) + 1)
        for rank, i in enumerate(order):
            scores[i] = floor - step * (rank + 1)
        return scores


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
        ceiling: attention never reads more than this many proxy tokens, whatever the budget
            (None: no ceiling). A budget whose room (``min_room`` times its tokens) is above the
            ceiling is filled past what attention read: the unread sentences follow every read
            one, in the first pass's order (:attr:`Cut.fill`), and the result's warnings say so.
        precut: the ``lexical`` first pass scores only the sentences of the documents MiniLM
            ranks best (the documents the query names first), whole documents until they hold
            ``precut`` times the tokens attention reads (None: every sentence). MiniLM's cosine of
            each whole document is computed once for the ranking anyway; embedding every
            sentence of 100 candidates is what made the read cost grow with them.
        dense: where the ``lexical`` first pass's MiniLM cosine of a sentence comes from:
            ``"sentences"`` (each sentence encoded alone) or ``"pooled"`` (the mean of MiniLM's
            token states over the sentence in the whole-document pass the precut and the
            document scores read anyway: no MiniLM forward of the cut's own;
            :func:`ragattn.document_probe.document_and_unit_cosines`). ``pooled`` takes 25-31 %
            off the one read but kept less evidence on its rule's choice cells (a sentence pooled
            in its paragraph stands out less from it), so ``sentences`` is the default
            (docs/research/performance.md, "Sentence cosines from the document pass").
    """

    min_tokens: int = 1024
    keep: float = 0.5
    scorer: CascadeScorer = "bm25"
    min_room: float = 2.0
    links: bool = False
    max_read: int | None = None
    ceiling: int | None = None
    precut: float | None = None
    dense: CascadeDense = "sentences"

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
        if self.ceiling is not None and (
            not isinstance(self.ceiling, int) or isinstance(self.ceiling, bool) or self.ceiling < 1
        ):
            raise InvalidInputError(
                f"cascade ceiling must be a positive number of tokens, got {self.ceiling!r}"
            )
        if self.precut is not None and not (
            isinstance(self.precut, int | float) and 1.0 <= self.precut < float("inf")
        ):
            raise InvalidInputError(f"cascade precut must be a number >= 1, got {self.precut!r}")
        if self.dense not in DENSE:
            raise InvalidInputError(
                f"cascade dense must be one of {', '.join(DENSE)}, got {self.dense!r}"
            )

    @classmethod
    def parse(cls, spec: str, *, min_tokens: int = 1024, min_room: float = 2.0) -> Cascade:
        """A cascade from ``"KEEP:SCORER"`` (e.g. ``"0.8:lexical"``; the scorer defaults to
        ``lexical``; a ``+links`` suffix, ``"0.8:lexical+links"``, sets :attr:`links`; a
        ``@N`` suffix, ``"0.8:lexical+links@768"``, sets :attr:`max_read`; then optionally
        ``,ceiling=N``, ``,precut=P`` and ``,dense=pooled``:
        ``"0.8:lexical+links@1024,ceiling=2048,precut=4"``), as the command line gives it.

        Raises:
            InvalidInputError: a keep that is not a number in (0, 1], an unknown scorer, a cap
                or ceiling that is not a positive integer, or an unknown option.
        """
        spec, *options = spec.split(",")
        extra: dict[str, float | int] = {}
        dense = "sentences"
        for option in options:
            key, eq, value = option.partition("=")
            if not eq or key not in ("ceiling", "precut", "dense"):
                raise InvalidInputError(
                    f"cascade option {option!r}: the options are ceiling=N, precut=P and "
                    "dense=sentences|pooled"
                )
            if key == "dense":
                dense = value
                continue
            try:
                extra[key] = int(value) if key == "ceiling" else float(value)
            except ValueError:
                raise InvalidInputError(f"cascade option {option!r} needs a number") from None
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
            ceiling=int(extra["ceiling"]) if "ceiling" in extra else None,
            precut=float(extra["precut"]) if "precut" in extra else None,
            dense=dense,  # type: ignore[arg-type]  # checked in __post_init__
        )

    @property
    def name(self) -> str:
        """The cascade as :meth:`parse` reads it (``"0.8:lexical"``, ``"0.8:lexical+links"``,
        ``"0.8:lexical+links@1024,ceiling=2048,precut=4"``)."""
        cap = f"@{self.max_read}" if self.max_read is not None else ""
        ceiling = f",ceiling={self.ceiling}" if self.ceiling is not None else ""
        precut = f",precut={self.precut:g}" if self.precut is not None else ""
        dense = f",dense={self.dense}" if self.dense != "sentences" else ""
        links = "+links" if self.links else ""
        return f"{self.keep:g}:{self.scorer}{links}{cap}{ceiling}{precut}{dense}"

    def read_share(self, context_tokens: int, budget_tokens: int | None) -> float | None:
        """The share of a context of ``context_tokens`` (proxy tokens) that attention reads
        when it is compressed to ``budget_tokens`` (None: no token limit), or None when the
        cascade does not cut it: too short, or nothing left to cut once attention keeps its room
        (``min_room`` times the budget). The :attr:`ceiling` bounds the read for every budget,
        a score threshold (no token limit) included."""
        if context_tokens <= 0 or context_tokens < self.min_tokens:
            return None
        read = float(context_tokens)
        if budget_tokens is not None:
            room = self.min_room * budget_tokens
            if self.keep * context_tokens >= room:
                read = self.keep * context_tokens
                if self.max_read is not None:
                    read = min(read, max(float(self.max_read), room))
        if self.ceiling is not None:
            read = min(read, float(self.ceiling))
        return read / context_tokens if read < context_tokens else None

    def fills(self, context_tokens: int, budget_tokens: int | None) -> bool:
        """Whether the :attr:`ceiling` leaves attention less than its room for this budget, so
        that the unread sentences fill the rest of it in the first pass's order."""
        if self.ceiling is None or context_tokens <= self.ceiling:
            return False
        if budget_tokens is None:
            return False
        return self.min_room * budget_tokens > self.ceiling

    def sizes(
        self, docs: Sequence[Document], units: Sequence[Unit], budget: Budget, *, tokenizer: Any
    ) -> CutSizes | None:
        """The sizes this cascade cuts a call by, counted in ``tokenizer`` (the proxy's), or None
        when the whole context is read (too short, one sentence, no room to cut, or one document
        for a ``documents`` first pass: its sentences share one cosine)."""
        if len(units) < 2:
            return None
        if self.scorer == "documents" and len({u.doc for u in units}) < 2:
            return None
        texts = [docs[u.doc].text[u.start : u.end] for u in units]
        costs = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        total = sum(costs)
        limit = budget.token_limit(total)
        share = self.read_share(total, limit)
        if share is None:
            return None
        return CutSizes(texts=texts, costs=costs, limit=limit, share=share)

    def minilm_pass(self, sizes: CutSizes | None) -> MiniLMPass | None:
        """The MiniLM pass over every document the cut reads (the read's ``candidates`` stage
        runs it): ``"pooled"`` (the document cosines and each sentence's pooled from them, for a
        ``lexical`` first pass with :attr:`dense` ``"pooled"``), ``"documents"`` (the document
        cosines: a ``documents`` first pass, or a :attr:`precut`), or None."""
        if sizes is None or self.scorer == "bm25":
            return None
        if self.scorer == "lexical" and self.dense == "pooled":
            return "pooled"
        if self.scorer == "documents" or precuts(self.precut, sizes.share, sizes.total):
            return "documents"
        return None

    def cut(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        sizes: CutSizes,
        *,
        lexical: Callable[[], ProbeScorer],
        cosines: CandidateCosines | None,
    ) -> Cut | None:
        """What attention reads of a call of these ``sizes`` (:meth:`sizes`), or None when the
        first pass keeps every sentence. ``lexical`` gives the ``lexical`` probe's scorer
        (loaded on first use); ``cosines``, MiniLM's pass over the documents, where
        :meth:`minilm_pass` names one (the read's ``candidates`` stage ran it).

        Raises:
            ValueError: ``cosines`` missing where the first pass reads them.
        """
        costs, share = sizes.costs, sizes.share
        if self.scorer == "bm25":
            first = bm25_scores(query, sizes.texts)
        elif self.scorer == "documents":
            first = unit_cosines(units, _ran(cosines).documents)
        else:
            first = self._lexical_first(query, docs, units, sizes, lexical, cosines)
        if self.links:
            read = keep_linked(query, docs, units, first, costs, share)
        else:
            read = keep_by_tokens(first, costs, share)
        if len(read) >= len(units):
            return None
        return Cut(read=read, first=first, fill=self.fills(sizes.total, sizes.limit))

    def _lexical_first(
        self,
        query: str,
        docs: Sequence[Document],
        units: Sequence[Unit],
        sizes: CutSizes,
        lexical: Callable[[], ProbeScorer],
        cosines: CandidateCosines | None,
    ) -> np.ndarray:
        """The ``lexical`` probe's scores, over the sentences of the :attr:`precut` documents
        only when it applies (the others score -inf: never read, filled last); with
        :attr:`dense` ``"pooled"`` its MiniLM column comes from the document pass."""
        unit_cos = _ran(cosines).units if self.dense == "pooled" else None
        sentences = None
        if precuts(self.precut, sizes.share, sizes.total):
            sentences = precut_units(
                query, docs, units, sizes.costs, self.precut, sizes.share, _ran(cosines).documents
            )
        if sentences is None:
            scores = lexical().score_with_features(query, docs, units, dense=unit_cos)[0]
            return np.asarray(scores, dtype=np.float64)
        first = np.full(len(units), -np.inf)
        first[sentences] = lexical().score_with_features(
            query,
            docs,
            [units[i] for i in sentences],
            dense=unit_cos[sentences] if unit_cos is not None else None,
        )[0]
        return first

    def applies(self, context_tokens: int, budget_tokens: int | None) -> bool:
        """Whether a context of ``context_tokens`` compressed to ``budget_tokens`` (None: no
        token limit) is cut: it is long enough and what the cut keeps leaves attention room."""
        return self.read_share(context_tokens, budget_tokens) is not None


DEFAULT_CASCADE = Cascade(
    min_tokens=1024,
    keep=0.8,
    scorer="lexical",
    min_room=1.5,
    links=True,
    max_read=1024,
    ceiling=2048,
    precut=4,
)
"""The compressor's default read: a context of 1,024 proxy tokens or more is cut before attention
reads it to at most 1,024 proxy tokens (and at most 80 % of it), never fewer than 1.5 times the
budget's tokens, and never more than 2,048 (the ceiling: a larger budget is filled past the read in
the first pass's order, and the warnings say so): the ``lexical`` probe's best sentences (scored
only in the documents MiniLM ranks best, whole documents up to 4 times what attention reads: the
precut, so the first cut does not embed every sentence of 50-100 candidates), with the
sentences of linked documents (named by title, or by the name a plain string gives itself, in the
query or in a sentence the first pass keeps) first. So the read of 10-100 candidates costs about
what the read of a few does. The cap was chosen by the rule of BENCHMARKS.md §0 ("The read for 10-50
candidates"): the cheapest read within 1.0 point of the best evidence recall at 20 % on the choice
sets; the ceiling is the bound issue 50 asks for and the precut was chosen by the rule of
docs/research/context.md ("The read at production shape": the cheapest precut within 1.0 point of
the read without one in every cell of two pooled 50-candidate sets, titled and plain, at 20 % and
256 tokens; P = 2 missed by 1.5 points, P = 4 held). The keep share and first pass were chosen
earlier on long training questions (BENCHMARKS.md §3, "A lexical cascade" and "A cascade that keeps
linked documents")."""

__all__ = [
    "DEFAULT_CASCADE",
    "SCORERS",
    "Cascade",
    "CascadeDense",
    "CascadeScorer",
    "Cut",
    "DENSE",
    "keep_by_tokens",
    "keep_linked",
    "named_documents",
    "precut_units",
    "unit_cosines",
]
