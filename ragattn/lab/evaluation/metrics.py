"""Metrics for reranking (nDCG@10, recall@k) and sentence-level compression.

Ranking metrics follow trec_eval: documents are ordered by descending score, ties broken by
descending doc id (string order); unjudged documents have gain 0; the ideal DCG is computed from
all judged documents of the query, including those the run never retrieved.

Compression metrics work on character spans: a passage's kept spans are ``[start, end)`` ranges
of its text; gold sentences are spans of the same text.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from ragattn.errors import InvalidInputError

Run = Mapping[str, Mapping[str, float]]
"""Scores of a system: ``run[qid][doc_id] = score`` (higher is better)."""

QrelsLike = Mapping[str, Mapping[str, int]]

KEPT_FRACTION = 0.5
"""A gold sentence counts as kept when at least this fraction of its characters is kept."""


def _check_run(run: Run, qrels: QrelsLike) -> list[str]:
    qids = [q for q in run if q in qrels]
    if not qids:
        raise InvalidInputError("the run shares no query id with the qrels; check the qids")
    return qids


def _trec_ndcg_cut_10(run: Run, qrels: QrelsLike, qids: Sequence[str]) -> dict[str, float]:
    """Per-query ``ndcg_cut.10`` of pytrec_eval over ``qids``; a query without ranked documents
    (absent from pytrec_eval's output) scores 0."""
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: {d: int(g) for d, g in qrels[q].items()} for q in qids}, {"ndcg_cut.10"}
    )
    result = evaluator.evaluate({q: {d: float(s) for d, s in run[q].items()} for q in qids})
    return {q: float(result[q]["ndcg_cut_10"]) if q in result else 0.0 for q in qids}


def ndcg_at_10(run: Run, qrels: QrelsLike) -> tuple[float, dict[str, float]]:
    """nDCG@10 with trec_eval semantics (``ndcg_cut.10``, linear gain), via pytrec_eval.

    Averaged over queries present in both ``run`` and ``qrels`` (trec_eval's default); queries
    only in the run are ignored.

    Returns:
        ``(mean, per_query)``, each in [0, 1].
    """
    per_query = _trec_ndcg_cut_10(run, qrels, _check_run(run, qrels))
    return float(np.mean(list(per_query.values()))), per_query


def list_ndcg_at_10(scores: Sequence[np.ndarray], gains: Sequence[np.ndarray]) -> np.ndarray:
    """nDCG@10 of each scored list against its own graded labels (training-time head selection).

    The same trec_eval computation as :func:`ndcg_at_10` (linear gain, ideal DCG from the list's
    labels); tied scores keep list order (the earlier item ranks first), like a stable sort.

    Args:
        scores: per list, one score per item (higher = better).
        gains: per list, the items' relevance grades (0 = not relevant), aligned with ``scores``.

    Returns:
        ``[n_lists]`` values in [0, 1]; a list without a relevant item scores 0.
    """
    if len(scores) != len(gains):
        raise InvalidInputError(f"{len(scores)} score lists for {len(gains)} label lists")
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q, (s, g) in enumerate(zip(scores, gains, strict=True)):
        if len(s) != len(g):
            raise InvalidInputError(f"list {q} has {len(s)} scores for {len(g)} labels")
        n = len(s)
        # trec_eval breaks ties by descending doc id: numbering items backwards, zero-padded,
        # puts the earlier item first.
        ids = [f"{n - 1 - i:09d}" for i in range(n)]
        run[str(q)] = {d: float(x) for d, x in zip(ids, s, strict=True)}
        qrels[str(q)] = {d: int(y) for d, y in zip(ids, g, strict=True)}
    qids = [str(q) for q in range(len(scores))]
    per_list = _trec_ndcg_cut_10(run, qrels, qids) if qids else {}
    return np.asarray([per_list[q] for q in qids], dtype=np.float64)


def _ranked(scores: Mapping[str, float]) -> list[str]:
    return [d for d, _ in sorted(scores.items(), key=lambda x: (x[1], x[0]), reverse=True)]


def recall_at_k(
    run: Run, qrels: QrelsLike, k: int, *, min_relevance: int = 1
) -> tuple[float, dict[str, float]]:
    """Fraction of relevant documents (grade >= ``min_relevance``) in the top ``k``.

    Queries with no relevant document are skipped, as in trec_eval.

    Returns:
        ``(mean, per_query)``, each in [0, 1].
    """
    if k < 1:
        raise InvalidInputError(f"k must be >= 1, got {k}")
    per_query = {}
    for q in _check_run(run, qrels):
        relevant = {d for d, g in qrels[q].items() if g >= min_relevance}
        if relevant:
            top = _ranked(run[q])[:k]
            per_query[q] = len(relevant.intersection(top)) / len(relevant)
    if not per_query:
        raise InvalidInputError(f"no query has a document with grade >= {min_relevance}")
    return float(np.mean(list(per_query.values()))), per_query


# ------------------------------------------------------------------------------- compression


def _covered_chars(span: tuple[int, int], kept: Sequence[tuple[int, int]]) -> int:
    """Characters of ``span`` inside the union of ``kept`` (overlaps in ``kept`` counted once)."""
    start, end = span
    pieces = sorted((max(a, start), min(b, end)) for a, b in kept if b > start and a < end)
    covered, cursor = 0, start
    for a, b in pieces:
        a = max(a, cursor)
        if b > a:
            covered += b - a
            cursor = b
    return covered


def sentence_kept(span: tuple[int, int], kept: Sequence[tuple[int, int]]) -> bool:
    """Whether at least :data:`KEPT_FRACTION` of the sentence's characters are in ``kept``.

    Partial credit makes span-based compressors (which may cut a sentence) comparable with
    sentence selectors: a sentence kept by more than half counts, a fragment does not.
    """
    length = span[1] - span[0]
    if length <= 0:
        raise InvalidInputError(f"gold sentence span {span} is empty")
    return _covered_chars(span, kept) >= KEPT_FRACTION * length


def supporting_fact_recall(
    kept_spans: Sequence[Sequence[tuple[int, int]]],
    gold_spans: Sequence[Sequence[tuple[int, int]]],
) -> float | None:
    """Fraction of gold sentences kept, pooled over the passages of one example.

    Args:
        kept_spans: per passage, the kept character ranges of its text.
        gold_spans: per passage, the gold sentence character ranges of its text.

    Returns:
        Recall in [0, 1], or ``None`` when the example has no gold sentence.

    A gold sentence is kept when at least 50 % of its characters fall inside kept spans
    (:func:`sentence_kept`).
    """
    if len(kept_spans) != len(gold_spans):
        raise InvalidInputError(
            f"kept_spans has {len(kept_spans)} passages but gold_spans has {len(gold_spans)}"
        )
    total = sum(len(g) for g in gold_spans)
    if total == 0:
        return None
    hits = sum(sentence_kept(s, k) for k, g in zip(kept_spans, gold_spans, strict=True) for s in g)
    return hits / total


def r_precision(
    sentence_scores: Sequence[np.ndarray], supporting: Sequence[Sequence[int]]
) -> float | None:
    """Precision of the top-R sentences of an example, R = number of gold sentences.

    Sentences of all passages are ranked together by descending score; ties go to the earlier
    sentence (passage order, then position), so a constant scorer behaves like "earliest first".

    Returns:
        R-precision in [0, 1], or ``None`` when the example has no gold sentence.
    """
    if len(sentence_scores) != len(supporting):
        raise InvalidInputError(
            f"{len(sentence_scores)} score arrays for {len(supporting)} passages"
        )
    flat = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in sentence_scores])
    gold = np.zeros(flat.shape[0], dtype=bool)
    offset = 0
    for scores, sup in zip(sentence_scores, supporting, strict=True):
        for i in sup:
            gold[offset + i] = True
        offset += len(scores)
    r = int(gold.sum())
    if r == 0:
        return None
    order = np.argsort(-flat, kind="stable")
    return float(gold[order[:r]].sum()) / r


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, drop punctuation and articles, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _match_form(text: str) -> str:
    """SQuAD normalization, except punctuation (any Unicode ``P*``) separates words.

    Deleting punctuation, as SQuAD does for exact match, glues words ("Rollo's" -> "rollos",
    "Adriatic—fell" -> one word) and would hide answers from a whole-word search.
    """
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(text: str, answers: Sequence[str]) -> bool:
    """Whether any answer occurs in the text as whole words, after SQuAD-style normalization.

    Both sides are lower-cased, articles dropped and punctuation turned into word separators.
    """
    haystack = f" {_match_form(text)} "
    for answer in answers:
        needle = _match_form(answer)
        if needle and f" {needle} " in haystack:
            return True
    return False


def answer_retention(kept_text: str, full_text: str, answers: Sequence[str]) -> bool | None:
    """Whether compression kept the answer, for an example whose full context contains it.

    Returns:
        ``True``/``False`` when the answer is in ``full_text`` (:func:`contains_answer`),
        ``None`` otherwise (nothing to retain: no answer, or an abstractive one such as yes/no).
    """
    extractive = [a for a in answers if normalize_answer(a) not in {"yes", "no"}]
    if not contains_answer(full_text, extractive):
        return None
    return contains_answer(kept_text, extractive)


class TokenizerLike(Protocol):
    """A Hugging Face tokenizer (called on a list of texts, returns ``input_ids``)."""

    name_or_path: str

    def __call__(self, text: Any, *, add_special_tokens: bool = ...) -> Any: ...


def count_tokens(tokenizer: TokenizerLike, texts: Sequence[str]) -> np.ndarray:
    """Token count of each text in ``tokenizer``, without special tokens, as an int array."""
    if not texts:
        return np.zeros(0, dtype=np.int64)
    ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return np.asarray([len(x) for x in ids], dtype=np.int64)


def kept_text(text: str, spans: Sequence[tuple[int, int]], separator: str = " ") -> str:
    """The kept substrings of ``text`` in document order, joined by ``separator``."""
    return separator.join(text[a:b] for a, b in sorted(spans))


def achieved_ratio(
    kept_texts: Sequence[str], full_texts: Sequence[str], tokenizer: TokenizerLike
) -> float:
    """Tokens kept over tokens of the full passages (``tokenizer``, no special tokens), in [0, 1].

    Counted per passage and summed, so a passage boundary never merges two tokens.
    """
    origin = int(count_tokens(tokenizer, full_texts).sum())
    if origin == 0:
        raise InvalidInputError("the full passages have no tokens; nothing to compress")
    return float(count_tokens(tokenizer, kept_texts).sum()) / origin
