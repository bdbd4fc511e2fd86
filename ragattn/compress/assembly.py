"""Result assembly: from keep scores to the compressed context and its result types.

The :class:`~ragattn.compress.Compressor` scores every sentence (a :class:`Unit` of a document);
this module selects the sentences a budget keeps (:func:`ragattn.compress.budget.select`, counted
in the result's tokenizer), joins them back into text made only of substrings of the input, and
builds the :class:`~ragattn.types.CompressionResult` and, for the one read, the ranked
:class:`~ragattn.types.RerankResults`.

A Markdown document (:mod:`ragattn.markdown_units`) is joined so that it stays valid Markdown:
its kept units in their original order, a kept piece of code between its fences, a kept table row
under its header; the fences and headers repeated for that are the document's
:attr:`~ragattn.types.CompressedDocument.added`, counted in the result's tokens (a header once per
table and document) and in the budget, never kept spans.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ragattn.compress.budget import select
from ragattn.compress.features import Unit
from ragattn.contract import VerbArgs
from ragattn.languages import AUTO
from ragattn.markdown_units import join_kept, markdown_units
from ragattn.types import (
    AddedText,
    CompressedDocument,
    CompressionResult,
    KeptSpan,
    RerankResult,
    RerankResults,
)

if TYPE_CHECKING:
    from ragattn.types import Document

DOC_JOINER = "\n\n"
"""Documents are joined with a blank line in the original and the compressed context alike."""

_ENTITY = re.compile(r"\b(?:[A-Z][\w'-]+|\d[\d,.]*)\b")


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of ``text`` in ``tokenizer`` without special tokens (0 for empty text)."""
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Counting:
    """The tokenizer a result's tokens are counted in, and its name (``result.tokenizer``)."""

    tokenizer: Any
    name: str

    def count(self, text: str) -> int:
        return count_tokens(self.tokenizer, text)


def entity_units(query: str, docs: Sequence[Document], units: Sequence[Unit]) -> list[int]:
    """Units naming a capitalised word (not the first) or a number of the query."""
    words = query.split()
    entities = {m.group(0).lower() for m in _ENTITY.finditer(" ".join(words[1:]))}
    if not entities:
        return []
    return [
        i
        for i, u in enumerate(units)
        if any(e in docs[u.doc].text[u.start : u.end].lower() for e in entities)
    ]


def compression_result(
    docs: Sequence[Document],
    indices: Sequence[int],
    units: Sequence[Unit],
    scores: np.ndarray,
    args: VerbArgs,
    *,
    counting: Counting,
    method: str,
    forced: Sequence[int] = (),
    notes: Sequence[str] = (),
) -> CompressionResult:
    """Select units under ``args.budget`` and assemble the result.

    Args:
        docs: the documents compressed, in the order of the context.
        indices: each document's input position (``CompressedDocument.index``).
        units: the sentences, ``unit.doc`` indexing ``docs``.
        scores: each unit's keep score in [0, 1].
        args: the checked call (its budget, ``keep_order``).
        counting: the tokenizer the budget and the result count in.
        method: the compress method's name (``result.method``).
        forced: units kept whatever their score (``keep_entities``).
        notes: warnings that go first into the result's.
    """
    origin_tokens = counting.count(DOC_JOINER.join(doc.text for doc in docs))
    if not units:
        return _empty_result(docs, indices, origin_tokens, counting.name, method)
    budget = args.compress_budget
    language = args.language
    costs = [counting.count(docs[u.doc].text[u.start : u.end]) for u in units]
    # The joined text's count holds what a Markdown document repeats (fences, a table's header
    # once), so the budget's check after the greedy pass drops units until that fits too.
    kept = select(
        list(scores),
        costs,
        budget,
        origin_tokens,
        lambda ids: counting.count(context_text(docs, units, sorted(ids), language)),
        forced=forced,
    )
    if args.keep_order:
        text = context_text(docs, units, sorted(kept), language)
    else:
        text = _best_first_text(docs, units, scores, kept, language)
    compressed_tokens = counting.count(text)
    warnings = list(notes)
    limit = budget.token_limit(origin_tokens)
    if limit is not None and compressed_tokens > limit:
        reason = (
            "forced entity sentences"
            if forced
            else "no sentence fits the budget, so the best one is kept alone"
        )
        warnings.append(f"kept {compressed_tokens} tokens, over the budget of {limit}: {reason}")
    return CompressionResult(
        compressed_text=text,
        documents=_compressed_documents(docs, indices, units, scores, sorted(kept), language),
        origin_tokens=origin_tokens,
        compressed_tokens=compressed_tokens,
        ratio=compressed_tokens / origin_tokens if origin_tokens else 1.0,
        tokenizer=counting.name,
        method=method,
        warnings=tuple(warnings),
    )


def _empty_result(
    docs: Sequence[Document],
    indices: Sequence[int],
    origin_tokens: int,
    tokenizer: str,
    method: str,
) -> CompressionResult:
    """The result of a context without a sentence: every document empty, nothing kept."""
    empty = tuple(
        CompressedDocument(
            index=i, text="", kept_spans=(), sentence_scores=(), sentence_spans=(), document=doc
        )
        for i, doc in zip(indices, docs, strict=True)
    )
    return CompressionResult(
        compressed_text="",
        documents=empty,
        origin_tokens=origin_tokens,
        compressed_tokens=0,
        ratio=1.0,
        tokenizer=tokenizer,
        method=method,
        warnings=("the context holds no text; nothing to compress",),
    )


def _compressed_documents(
    docs: Sequence[Document],
    indices: Sequence[int],
    units: Sequence[Unit],
    scores: np.ndarray,
    kept: Sequence[int],
    language: str = AUTO,
) -> tuple[CompressedDocument, ...]:
    """Each document's kept text, kept spans (offsets into its text), sentence scores and, for
    a Markdown document, the fences and headers its text repeats."""
    out = []
    for d, (index, doc) in enumerate(zip(indices, docs, strict=True)):
        members = [i for i in range(len(units)) if units[i].doc == d]
        doc_kept = [i for i in kept if units[i].doc == d]
        spans = tuple(
            KeptSpan(
                doc_index=index,
                start=units[i].start,
                end=units[i].end,
                score=float(scores[i]),
                text=doc.text[units[i].start : units[i].end],
            )
            for i in doc_kept
        )
        text, added = document_text(
            doc.text, [units[i] for i in members], [units[i] for i in doc_kept], language
        )
        out.append(
            CompressedDocument(
                index=index,
                text=text,
                kept_spans=spans,
                sentence_scores=tuple(float(scores[i]) for i in members),
                sentence_spans=tuple((units[i].start, units[i].end) for i in members),
                document=doc,
                added=added,
            )
        )
    return tuple(out)


def ranked_results(
    docs: Sequence[Document],
    raw: np.ndarray,
    relevance: np.ndarray,
    top_n: int | None,
    method: str,
) -> RerankResults:
    """The documents by ``raw`` score, best first (exact ties in input order), the best
    ``top_n`` (None: all); ``relevance`` in [0, 1]."""
    ranked = sorted(range(len(docs)), key=lambda i: (-raw[i], i))[:top_n]
    return RerankResults(
        [
            RerankResult(
                index=i,
                relevance_score=float(relevance[i]),
                raw_score=float(raw[i]),
                document=docs[i],
            )
            for i in ranked
        ],
        method=method,
    )


def doc_text(text: str, members: Sequence[Unit], kept: Sequence[Unit]) -> str:
    """Kept sentences of one document in order, each with its original trailing whitespace (so the
    result is a concatenation of substrings of ``text``), right-stripped."""
    starts = [u.start for u in members]
    out = []
    for u in kept:
        nxt = next((s for s in starts if s >= u.end), len(text))
        out.append(text[u.start : nxt])
    return "".join(out).rstrip()


def document_text(
    text: str, members: Sequence[Unit], kept: Sequence[Unit], language: str = AUTO
) -> tuple[str, tuple[AddedText, ...]]:
    """One document's kept text and what it repeats: a Markdown document's units joined as valid
    Markdown (:func:`~ragattn.markdown_units.join_kept`), any other's by :func:`doc_text` (with
    nothing added). ``members`` are all the document's units, ``language`` the call's (the one
    its units were split by)."""
    structure = markdown_units(text, language=language) if kept else None
    if structure is not None:
        position = {(u.start, u.end): n for n, u in enumerate(structure)}
        if all((u.start, u.end) in position for u in members):
            return join_kept(text, structure, [position[(u.start, u.end)] for u in kept])
    return doc_text(text, members, kept), ()


def context_text(
    docs: Sequence[Document],
    units: Sequence[Unit],
    ordered: Sequence[int],
    language: str = AUTO,
) -> str:
    """The compressed context: per document :func:`document_text`, non-empty ones joined by
    :data:`DOC_JOINER`."""
    parts = []
    for d, doc in enumerate(docs):
        members = [u for u in units if u.doc == d]
        kept = [units[i] for i in ordered if units[i].doc == d]
        if kept:
            parts.append(document_text(doc.text, members, kept, language)[0])
    return DOC_JOINER.join(p for p in parts if p)


def _best_first_text(
    docs: Sequence[Document],
    units: Sequence[Unit],
    scores: np.ndarray,
    kept: Sequence[int],
    language: str,
) -> str:
    """The kept units best first (``keep_order=False``), joined by :data:`DOC_JOINER`; a Markdown
    document's kept units stay together, in their order, where its best one ranks (a code piece
    or a table row alone, out of its order, would not be valid Markdown)."""
    parts: list[str] = []
    placed: set[int] = set()
    for i in sorted(kept, key=lambda i: (-scores[i], i)):
        unit = units[i]
        doc = docs[unit.doc]
        if markdown_units(doc.text, language=language) is None:
            parts.append(doc.text[unit.start : unit.end])
        elif unit.doc not in placed:
            placed.add(unit.doc)
            members = [u for u in units if u.doc == unit.doc]
            mine = [units[k] for k in sorted(kept) if units[k].doc == unit.doc]
            parts.append(document_text(doc.text, members, mine, language)[0])
    return DOC_JOINER.join(parts)


__all__ = [
    "DOC_JOINER",
    "Counting",
    "compression_result",
    "context_text",
    "count_tokens",
    "doc_text",
    "document_text",
    "entity_units",
    "ranked_results",
]
