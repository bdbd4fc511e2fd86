"""Run reranking and sentence-selection systems over a dataset and report one table each.

Timings cover only the system's own call (ranker or ``scorer.score``), on whatever CPU the run
has; they are for comparing systems within one report, not across machines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.baselines import SentenceScorer, select_by_budget
from ragattn.lab.evaluation.datasets import QAExample, Qrels, RerankQuery
from ragattn.lab.evaluation.metrics import (
    TokenizerLike,
    answer_retention,
    count_tokens,
    kept_text,
    ndcg_at_10,
    r_precision,
    supporting_fact_recall,
)
from ragattn.types import to_plain

Ranker = Callable[[RerankQuery], Mapping[str, float]]
"""A reranker under test: scores (higher is better) for every candidate id of the query."""


def fmt_cell(value: float | None, digits: int = 3) -> str:
    """A table cell: ``value`` to ``digits`` decimals, or a dash for no value."""
    return "–" if value is None else f"{value:.{digits}f}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankRow:
    """One reranker's result: mean and per-query nDCG@10 in [0, 1], wall seconds per query."""

    name: str
    ndcg_at_10: float
    per_query: Mapping[str, float]
    seconds_per_query: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankReport:
    """nDCG@10 of every system on the same queries; ``depth`` = most candidates of any query."""

    rows: tuple[RerankRow, ...]
    num_queries: int
    depth: int

    def to_markdown(self) -> str:
        lines = [
            f"| system ({self.num_queries} queries, top-{self.depth}) | nDCG@10 | s / query |",
            "|---|---|---|",
        ]
        lines += [
            f"| {r.name} | {fmt_cell(r.ndcg_at_10, 4)} | {fmt_cell(r.seconds_per_query)} |"
            for r in self.rows
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)


def _run_ranker(name: str, ranker: Ranker, query: RerankQuery) -> dict[str, float]:
    scores = dict(ranker(query))
    expected = {c.doc_id for c in query.candidates}
    if set(scores) != expected:
        raise InvalidInputError(
            f"ranker {name!r} returned {len(scores)} ids for query {query.qid} but it has "
            f"{len(expected)} candidates; score every candidate exactly once"
        )
    return {d: float(s) for d, s in scores.items()}


def evaluate_rerank(
    queries: Sequence[RerankQuery], qrels: Qrels, rankers: Mapping[str, Ranker]
) -> RerankReport:
    """Score every ranker on every query and compute nDCG@10 (trec_eval semantics).

    Raises:
        InvalidInputError: no queries or rankers, or a ranker does not score exactly the
            candidates of a query.
    """
    if not queries or not rankers:
        raise InvalidInputError("evaluate_rerank needs at least one query and one ranker")
    rows = []
    for name, ranker in rankers.items():
        run: dict[str, dict[str, float]] = {}
        elapsed = 0.0
        for query in queries:
            start = time.perf_counter()
            run[query.qid] = _run_ranker(name, ranker, query)
            elapsed += time.perf_counter() - start
        mean, per_query = ndcg_at_10(run, qrels)
        rows.append(
            RerankRow(
                name=name,
                ndcg_at_10=mean,
                per_query=per_query,
                seconds_per_query=elapsed / len(queries),
            )
        )
    return RerankReport(
        rows=tuple(rows),
        num_queries=len(queries),
        depth=max(len(q.candidates) for q in queries),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionRow:
    """One sentence scorer's result; tuples are aligned with ``SelectionReport.budgets``.

    Attributes:
        recall: mean supporting-fact recall per budget, in [0, 1], over examples with gold.
        r_precision: mean R-precision of the scores (budget-free), in [0, 1].
        answer_retention: per budget, fraction of examples whose full context contains an
            extractive answer that still contain it after selection; ``None`` if no such example.
        achieved_ratio: per budget, mean over examples of kept tokens / context tokens.
        seconds_per_example: wall seconds of ``scorer.score`` per example.
    """

    name: str
    recall: tuple[float | None, ...]
    r_precision: float | None
    answer_retention: tuple[float | None, ...]
    achieved_ratio: tuple[float, ...]
    seconds_per_example: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionReport:
    """Sentence selection at token budgets; token counts in ``tokenizer``."""

    rows: tuple[SelectionRow, ...]
    budgets: tuple[float, ...]
    num_examples: int
    num_with_gold: int
    num_with_answer: int
    tokenizer: str

    def to_markdown(self) -> str:
        pct = [f"{b:.0%}" for b in self.budgets]
        head = (
            [f"selector ({self.num_examples} ex.)"]
            + [f"recall @{p}" for p in pct]
            + ["R-prec"]
            + [f"answer kept @{p} (n={self.num_with_answer})" for p in pct]
            + [f"ratio @{p}" for p in pct]
            + ["s / example"]
        )
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            cells = (
                [r.name]
                + [fmt_cell(v) for v in r.recall]
                + [fmt_cell(r.r_precision)]
                + [fmt_cell(v) for v in r.answer_retention]
                + [fmt_cell(v) for v in r.achieved_ratio]
                + [fmt_cell(r.seconds_per_example)]
            )
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)


def mean_or_none(values: Sequence[float | bool | None]) -> float | None:
    """The mean of the values that are not None, or None when there are none."""
    kept = [float(v) for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Per-example data shared by all scorers: token counts in the report's tokenizer."""

    example: QAExample
    sentence_tokens: tuple[np.ndarray, ...]
    context_tokens: int
    full_text: str


def _prepare(example: QAExample, tokenizer: TokenizerLike) -> _Prepared:
    sentence_tokens = tuple(count_tokens(tokenizer, p.sentences) for p in example.passages)
    context = int(count_tokens(tokenizer, [p.text for p in example.passages]).sum())
    if context == 0:
        raise InvalidInputError(f"example {example.qid} has an empty context")
    full = " ".join(p.text for p in example.passages)
    return _Prepared(example, sentence_tokens, context, full)


def _score_one(
    name: str,
    scorer: SentenceScorer,
    prep: _Prepared,
    budgets: Sequence[float],
    tokenizer: TokenizerLike,
) -> tuple[float, list[float | None], float | None, list[bool | None], list[float]]:
    ex = prep.example
    start = time.perf_counter()
    scores = scorer.score(ex.question, ex.passages)
    elapsed = time.perf_counter() - start
    if len(scores) != len(ex.passages) or any(
        len(s) != len(p.sentence_spans) for s, p in zip(scores, ex.passages, strict=True)
    ):
        raise InvalidInputError(
            f"scorer {name!r} did not return one score per sentence for {ex.qid}"
        )
    spans = [p.sentence_spans for p in ex.passages]
    gold = [[p.sentence_spans[i] for i in p.supporting] for p in ex.passages]
    recalls, retained, ratios = [], [], []
    for budget in budgets:
        kept = select_by_budget(scores, spans, prep.sentence_tokens, budget)
        texts = [kept_text(p.text, k) for p, k in zip(ex.passages, kept, strict=True)]
        recalls.append(supporting_fact_recall(kept, gold))
        retained.append(answer_retention(" ".join(texts), prep.full_text, ex.answers))
        ratios.append(float(count_tokens(tokenizer, texts).sum()) / prep.context_tokens)
    rprec = r_precision(scores, [p.supporting for p in ex.passages])
    return elapsed, recalls, rprec, retained, ratios


def evaluate_selection(
    examples: Sequence[QAExample],
    scorers: Mapping[str, SentenceScorer],
    budgets: Sequence[float] = (0.2, 0.33),
    *,
    tokenizer: TokenizerLike,
) -> SelectionReport:
    """Select sentences with each scorer at each token budget and measure what survives.

    Selection uses :func:`select_by_budget` on per-sentence token counts. Recall and
    R-precision average over examples with at least one gold sentence; answer retention over
    examples whose full context contains an extractive answer.

    Args:
        examples: questions with passages and gold sentence labels.
        scorers: name -> sentence scorer.
        budgets: fractions of context tokens to keep, each in (0, 1].
        tokenizer: Hugging Face tokenizer that counts tokens (e.g. the proxy's).
    """
    if not examples or not scorers or not budgets:
        raise InvalidInputError("evaluate_selection needs examples, scorers and budgets")
    prepared = [_prepare(ex, tokenizer) for ex in examples]
    rows = []
    for name, scorer in scorers.items():
        elapsed = 0.0
        per_ex = []
        for prep in prepared:
            seconds, recalls, rprec, retained, ratios = _score_one(
                name, scorer, prep, budgets, tokenizer
            )
            elapsed += seconds
            per_ex.append((recalls, rprec, retained, ratios))
        rows.append(
            SelectionRow(
                name=name,
                recall=tuple(mean_or_none([e[0][b] for e in per_ex]) for b in range(len(budgets))),
                r_precision=mean_or_none([e[1] for e in per_ex]),
                answer_retention=tuple(
                    mean_or_none([e[2][b] for e in per_ex]) for b in range(len(budgets))
                ),
                achieved_ratio=tuple(
                    float(np.mean([e[3][b] for e in per_ex])) for b in range(len(budgets))
                ),
                seconds_per_example=elapsed / len(examples),
            )
        )
    num_answer = sum(
        answer_retention(p.full_text, p.full_text, p.example.answers) is not None for p in prepared
    )
    return SelectionReport(
        rows=tuple(rows),
        budgets=tuple(float(b) for b in budgets),
        num_examples=len(examples),
        num_with_gold=sum(ex.num_supporting > 0 for ex in examples),
        num_with_answer=num_answer,
        tokenizer=str(getattr(tokenizer, "name_or_path", type(tokenizer).__name__)),
    )
