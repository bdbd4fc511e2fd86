"""What reaches the generator, at matched budgets (``ragattn eval context``; method in
``docs/context-eval.md`` of the shared docs).

Per question the candidates are a first stage's output, in its order. The system under test,
``one-read`` (:meth:`Compressor.rerank_and_compress`), runs at each budget; its kept text, counted
in the proxy's tokenizer (no special tokens), is ``T`` tokens. Every *matched* system then gets
exactly ``T`` tokens of that question, counted the same way on the text it returns:

- ``rerank-stuff``: the default :class:`Reranker`'s order (query and candidates only, as the
  service is called), whole sentences of the best passages (each passage's sentences in order)
  until the next sentence would not fit;
- ``rerank3-compress`` / ``rerank5-compress``: the same ranking's best k passages, compressed by
  the default compressor with ``target_tokens=T``;
- ``lexical``: the lexical compressor over every candidate, ``target_tokens=T``;
- ``first-stage``: the candidates stuffed like ``rerank-stuff``, in the order given.

``compress`` (the default compressor over every candidate at the budget itself) is shown beside
``one-read``. Stuffing never exceeds ``T``; a compressor keeps its best sentence even when that
alone is longer, so each row counts its questions over the tokens it was given.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.compress import DOC_JOINER, Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade
from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.evaluation.harness import fmt_cell, mean_or_none
from ragattn.lab.evaluation.metrics import TokenizerLike, count_tokens, normalize_answer
from ragattn.lab.probe_training import SQUAD_EVAL_QUESTIONS, TWOWIKI_TRAIN_FROM
from ragattn.rerank import Reranker
from ragattn.sentences import split_sentences
from ragattn.types import Budget, CompressionResult, Document, to_plain

logger = logging.getLogger(__name__)

SYSTEM_UNDER_TEST = "one-read"
SYSTEMS: tuple[str, ...] = (
    "one-read",
    "compress",
    "rerank-stuff",
    "rerank3-compress",
    "rerank5-compress",
    "lexical",
    "first-stage",
)
"""Every system, in table order; all but ``one-read`` and ``compress`` get ``one-read``'s tokens."""
MATCHED = frozenset(SYSTEMS) - {"one-read", "compress"}
DEFAULT_BUDGETS = ("0.1", "0.2", "256", "512")
ABSTRACTIVE = frozenset({"yes", "no", "noanswer"})
"""Normalised answers that are no string of the context; they are not scored by answer kept."""
SCIFACT_TOP_K = 20
METRICS_VERSION = "1"
"""Part of the cache fingerprint: bump it when a metric's definition changes."""

SpanRef = tuple[int, int, int]
"""A kept sentence: ``(candidate index, start, end)``, a character range of the candidate's text."""


# -------------------------------------------------------------------------------------- sets


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextQuestion:
    """A question, its candidates in first-stage order, their gold sentences and the answers.

    Attributes:
        gold: per candidate, its gold sentences as exact strings of its text.
        units: per candidate, the ``[start, end)`` character ranges of its sentences
            (:func:`split_sentences`, as the compressor splits them).
    """

    qid: str
    query: str
    candidates: tuple[Document, ...]
    gold: tuple[tuple[str, ...], ...]
    answers: tuple[str, ...] = ()
    units: tuple[tuple[tuple[int, int], ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.gold) != len(self.candidates):
            raise InvalidInputError(f"{self.qid}: one gold tuple per candidate is needed")
        units = tuple(
            tuple((s.start, s.end) for s in split_sentences(d.text)) for d in self.candidates
        )
        object.__setattr__(self, "units", units)

    @classmethod
    def from_example(cls, example: ds.QAExample) -> ContextQuestion:
        return cls(
            qid=example.qid,
            query=example.question,
            candidates=tuple(
                Document(text=p.text, title=p.title or None) for p in example.passages
            ),
            gold=tuple(tuple(p.sentence(i) for i in p.supporting) for p in example.passages),
            answers=example.answers,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSet:
    """An evaluation set: its path in the data folder, its loader ``(path, first n) -> examples``,
    the questions read by default and ``end``, the first question index never read (training)."""

    path: str
    load: Callable[[Path, int | None], tuple[ds.QAExample, ...]]
    default_limit: int | None = None
    end: int | None = None


SETS: Mapping[str, ContextSet] = {
    "hotpotqa": ContextSet(
        path="hotpotqa/hotpot_dev_distractor_v1.shared.json", load=ds.load_hotpot
    ),
    "hotpotqa-fullwiki": ContextSet(
        path="hotpotqa/hotpot_dev_fullwiki_v1.shared.json", load=ds.load_hotpot
    ),
    "2wiki": ContextSet(
        path="2wikimultihopqa/2wiki_dev_sample500.json",
        load=ds.load_2wiki,
        default_limit=200,
        end=TWOWIKI_TRAIN_FROM,
    ),
    "scifact": ContextSet(
        path="scifact",
        load=lambda p, n: ds.load_scifact_retrieved(p, "test", SCIFACT_TOP_K, n),
    ),
    "squad": ContextSet(
        path="squad-v2/dev-v2.0.shared.json",
        load=ds.load_squad_articles,
        default_limit=SQUAD_EVAL_QUESTIONS,
        end=SQUAD_EVAL_QUESTIONS,
    ),
}
"""The shared sets no probe was trained on: HotpotQA dev (distractor, fullwiki), 2Wiki-200
(questions 200-299 are a margin, 300 on train), SciFact test claims with rationales over BM25
top-20 abstracts, SQuAD's first 1,000 answerable questions over their article's paragraphs."""


def load_context_set(
    name: str, data_dir: Path, *, offset: int = 0, limit: int | None = None
) -> tuple[ContextQuestion, ...]:
    """Questions ``offset`` to ``offset + limit`` of a set (default: its evaluation slice).

    Raises:
        InvalidInputError: an unknown set, or a slice that reaches training questions.
    """
    if name not in SETS:
        raise InvalidInputError(f"unknown set {name!r}; valid: {', '.join(SETS)}")
    spec = SETS[name]
    given = limit is not None
    limit = limit if given else spec.default_limit
    end = None if limit is None else offset + limit
    if spec.end is not None:
        if given and end is not None and end > spec.end:
            raise InvalidInputError(
                f"{name} questions from {spec.end} on are training material; "
                f"keep offset + limit <= {spec.end}"
            )
        end = spec.end if end is None else min(end, spec.end)
    examples = spec.load(data_dir / spec.path, end)[offset:]
    return tuple(ContextQuestion.from_example(ex) for ex in examples)


def parse_budget(text: str) -> Budget:
    """``"0.2"`` is a ratio (fraction of the candidates' tokens, in (0, 1]); ``"256"``, an
    integer > 1, is a number of proxy tokens.

    Raises:
        InvalidInputError: anything else.
    """
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if number.is_integer() and number > 1 and "." not in text:
        return Budget(kind="target_tokens", value=int(number))
    if 0 < number <= 1:
        return Budget(kind="ratio", value=number)
    raise InvalidInputError(
        f"budget {text!r} is neither a ratio in (0, 1] nor a token count (an integer > 1)"
    )


def budget_label(budget: Budget) -> str:
    """``ratio 0.2`` or ``256 tokens``."""
    if budget.kind == "target_tokens":
        return f"{int(budget.value)} tokens"
    return f"{budget.kind} {budget.value:g}"


# -------------------------------------------------------------------------- kept text, metrics


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptContext:
    """What a system sends the generator: ``text`` and the sentences it holds."""

    text: str
    spans: tuple[SpanRef, ...]


def candidate_texts(question: ContextQuestion, spans: Iterable[SpanRef]) -> dict[int, str]:
    """Each touched candidate's kept sentences in text order, each with the whitespace that
    follows it in the candidate, right-stripped (as the compressor writes a document)."""
    by_doc: dict[int, list[tuple[int, int]]] = {}
    for doc, start, end in spans:
        by_doc.setdefault(doc, []).append((start, end))
    out = {}
    for doc, kept in by_doc.items():
        text = question.candidates[doc].text
        starts = [a for a, _ in question.units[doc]]
        parts = [text[a : next((s for s in starts if s >= b), len(text))] for a, b in sorted(kept)]
        out[doc] = "".join(parts).rstrip()
    return out


def context_text(question: ContextQuestion, spans: Sequence[SpanRef]) -> str:
    """Candidates in the order ``spans`` first touch them, joined as the compressor joins them."""
    texts = candidate_texts(question, spans)
    return DOC_JOINER.join(texts[d] for d in dict.fromkeys(doc for doc, _, _ in spans))


def n_tokens(tokenizer: TokenizerLike, text: str) -> int:
    """Tokens of ``text`` in ``tokenizer``, no special tokens (0 for an empty text)."""
    return int(count_tokens(tokenizer, [text])[0]) if text else 0


def stuff(
    question: ContextQuestion, order: Iterable[int], limit: int, tokenizer: TokenizerLike
) -> KeptContext:
    """Whole sentences of the candidates in ``order`` (each candidate's in text order), until the
    next one would take the joined text past ``limit`` tokens of ``tokenizer``; never more."""
    spans: list[SpanRef] = []
    text = ""
    for doc in order:
        for start, end in question.units[doc]:
            trial = [*spans, (doc, start, end)]
            trial_text = context_text(question, trial)
            if n_tokens(tokenizer, trial_text) > limit:
                return KeptContext(text=text, spans=tuple(spans))
            spans, text = trial, trial_text
    return KeptContext(text=text, spans=tuple(spans))


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One system's context for one question at one budget, scored.

    Attributes:
        budget: the budget's label (:func:`budget_label`).
        tokens: tokens of the kept text (proxy tokenizer, no special tokens).
        limit: the most tokens the system was given: ``one-read``'s tokens for a matched system,
            the budget's own limit for ``one-read`` and ``compress``.
        seconds: wall-clock seconds of this system alone on the question, reranking included.
        gold_kept: gold sentences found verbatim in the kept text of their own candidate.
        gold_present: gold sentences among the candidates.
        answer_kept: an answer (case-folded) is in the kept text; None without an answer other
            than yes / no / noanswer.
        passages: candidates with at least one kept sentence.
        spans: the kept sentences.
    """

    qid: str
    system: str
    budget: str
    tokens: int
    limit: int
    seconds: float
    gold_kept: int
    gold_present: int
    answer_kept: bool | None
    passages: int
    spans: tuple[SpanRef, ...] = ()

    @property
    def over(self) -> bool:
        return self.tokens > self.limit

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Outcome:
        names = cls.__dataclass_fields__
        values = {k: v for k, v in record.items() if k in names}
        values["spans"] = tuple(tuple(s) for s in values.get("spans", ()))
        return cls(**values)


def extractive(answers: Iterable[str]) -> list[str]:
    """The answers a context can hold as a string: not yes / no / noanswer, not blank."""
    return [a for a in answers if a.strip() and normalize_answer(a) not in ABSTRACTIVE]


def score_context(
    question: ContextQuestion,
    kept: KeptContext,
    *,
    system: str,
    budget: str,
    tokens: int,
    limit: int,
    seconds: float,
) -> Outcome:
    """Score a kept context: evidence (verbatim, per candidate), answer kept, passages touched."""
    texts = candidate_texts(question, kept.spans)
    answers = extractive(question.answers)
    folded = kept.text.casefold()
    return Outcome(
        qid=question.qid,
        system=system,
        budget=budget,
        tokens=tokens,
        limit=limit,
        seconds=seconds,
        gold_kept=sum(g in texts.get(d, "") for d, gold in enumerate(question.gold) for g in gold),
        gold_present=sum(len(g) for g in question.gold),
        answer_kept=any(a.casefold() in folded for a in answers) if answers else None,
        passages=len(texts),
        spans=kept.spans,
    )


# -------------------------------------------------------------------------------------- systems

RERANK_K: Mapping[str, int] = {"rerank3-compress": 3, "rerank5-compress": 5}


def _kept(result: CompressionResult, positions: Sequence[int]) -> KeptContext:
    """A compressor's context; ``positions[i]`` is the candidate the call's document ``i`` is."""
    spans = tuple(
        (positions[d.index], s.start, s.end) for d in result.documents for s in d.kept_spans
    )
    return KeptContext(text=result.compressed_text, spans=spans)


class ForwardMemo:
    """Keeps the default compressor's last forwards, so the budgets of one question share them.

    The proxy forward of a (question, documents, sentences) triple does not depend on the budget;
    only the selection does. The memo wraps the compressor's scorer (its ``score`` and
    ``score_with_features``) and returns a forward already computed for the same triple, adding
    the seconds it took when computed to :attr:`replayed`, so a system is still timed as if it had
    run the forward itself.
    """

    def __init__(self, scorer: Any, size: int = 16) -> None:
        self.replayed = 0.0
        self._memo: OrderedDict[tuple[Any, ...], tuple[Any, float]] = OrderedDict()
        self._size = size
        for name in ("score", "score_with_features"):
            inner = getattr(scorer, name, None)
            if inner is not None:
                setattr(scorer, name, self._wrap(name, inner))

    def _wrap(self, name: str, inner: Any) -> Any:
        def call(query: str, docs: Sequence[Document], units: Sequence[Any]) -> Any:
            key = (name, query, tuple((d.text, d.title) for d in docs), tuple(units))
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
                self.replayed += found[1]
                return found[0]
            start = time.perf_counter()
            value = inner(query, docs, units)
            self._memo[key] = (value, time.perf_counter() - start)
            if len(self._memo) > self._size:
                self._memo.popitem(last=False)
            return value

        return call


class ContextSystems:
    """The systems of the comparison over one proxy: the default compressor (``one-read``,
    ``compress``, ``rerankK-compress``), the lexical compressor and the default reranker.

    Args:
        compressor: the default :class:`Compressor`.
        lexical: a :class:`Compressor` with ``method="lexical"``.
        reranker: the default :class:`Reranker` (its order feeds every ``rerank*`` system).
        tokenizer: counts every system's tokens (default: the compressor's proxy's).
    """

    def __init__(
        self,
        compressor: Compressor,
        lexical: Compressor,
        reranker: Reranker,
        tokenizer: TokenizerLike | None = None,
    ) -> None:
        self.compressor = compressor
        self.lexical = lexical
        self.reranker = reranker
        self.tokenizer: TokenizerLike = tokenizer or compressor.proxy.tokenizer
        self._ranking: tuple[str, tuple[int, ...], float] | None = None
        self._warm = False
        self._forwards = ForwardMemo(compressor.scorer)

    @classmethod
    def from_proxy(cls, proxy: Any, *, cascade: Cascade | None = DEFAULT_CASCADE) -> ContextSystems:
        """Every system on one loaded :class:`~ragattn.proxy.Proxy`; ``cascade`` is the default
        compressor's (the read of ``one-read`` and of the ``rerankK-compress`` systems)."""
        return cls(
            Compressor(proxy, cascade=cascade),
            Compressor(proxy, method="lexical"),
            Reranker(proxy),
        )

    def fingerprint(self) -> str:
        """The proxy's weights, the scoring code and assets, and these systems' settings."""
        from ragattn.fingerprint import model_fingerprint

        c = self.compressor
        return model_fingerprint(
            c.proxy,
            f"compress={c.method}",
            f"selection={c.selection}",
            f"cascade={c.cascade!r}",
            f"models={c.models_dir}",
            f"lexical={self.lexical.method}",
            f"rerank={self.reranker.method}",
            f"metrics={METRICS_VERSION}",
        )

    @staticmethod
    def _cold() -> None:
        """Forget the MiniLM vectors of earlier calls: the reranker, the lexical probe and the
        document weighting embed the same texts, and each system is timed as if alone."""
        from ragattn.embed import shared_embedder

        shared_embedder().clear_cache()

    def _warm_up(self, question: ContextQuestion) -> None:
        """One untimed call of each model, so that no system's first question pays for loading
        and first-call allocation."""
        if not self._warm:
            docs = list(question.candidates)
            self.compressor.rerank_and_compress(question.query, docs, ratio=0.2)
            self.lexical.compress(question.query, docs, ratio=0.2)
            self.reranker.rerank(question.query, docs)
            self._warm = True

    def _rank(self, question: ContextQuestion) -> tuple[tuple[int, ...], float]:
        """The reranker's order of the candidates (best first) and its wall seconds, computed
        once per question and charged to every system that reads it."""
        if self._ranking is None or self._ranking[0] != question.qid:
            self._cold()
            start = time.perf_counter()
            ranked = self.reranker.rerank(question.query, list(question.candidates))
            seconds = time.perf_counter() - start
            self._ranking = (question.qid, tuple(r.index for r in ranked), seconds)
        return self._ranking[1], self._ranking[2]

    def _matched(
        self, system: str, question: ContextQuestion, tokens: int
    ) -> tuple[KeptContext, float]:
        if tokens < 1:
            return KeptContext(text="", spans=()), 0.0
        order, seconds = self._rank(question) if system.startswith("rerank") else ((), 0.0)
        docs = list(question.candidates)
        self._cold()
        self._forwards.replayed = 0.0
        start = time.perf_counter()
        if system == "first-stage":
            kept = stuff(question, range(len(docs)), tokens, self.tokenizer)
        elif system == "rerank-stuff":
            kept = stuff(question, order, tokens, self.tokenizer)
        elif system == "lexical":
            result = self.lexical.compress(question.query, docs, target_tokens=tokens)
            kept = _kept(result, range(len(docs)))
        else:
            best = order[: RERANK_K[system]]
            result = self.compressor.compress(
                question.query, [docs[i] for i in best], target_tokens=tokens
            )
            kept = _kept(result, best)
        return kept, seconds + time.perf_counter() - start + self._forwards.replayed

    def run(
        self, system: str, question: ContextQuestion, budget: Budget, tokens: int = 0
    ) -> Outcome:
        """One system on one question: ``one-read`` and ``compress`` at ``budget``, a matched
        system with exactly ``tokens`` (``one-read``'s on this question at this budget)."""
        self._warm_up(question)
        if system in MATCHED:
            kept, seconds = self._matched(system, question, tokens)
            limit = tokens
        else:
            docs = list(question.candidates)
            self._cold()
            self._forwards.replayed = 0.0
            start = time.perf_counter()
            if system == SYSTEM_UNDER_TEST:
                _, result = self.compressor.rerank_and_compress(question.query, docs, budget=budget)
            else:
                result = self.compressor.compress(question.query, docs, budget=budget)
            seconds = time.perf_counter() - start + self._forwards.replayed
            kept = _kept(result, range(len(docs)))
            limit = budget.token_limit(result.origin_tokens) or 0
        return score_context(
            question,
            kept,
            system=system,
            budget=budget_label(budget),
            tokens=n_tokens(self.tokenizer, kept.text),
            limit=limit,
            seconds=seconds,
        )


# ---------------------------------------------------------------------------------------- cache


class OutcomeCache:
    """Outcomes appended to ``<folder>/context-<dataset>.jsonl`` as they are computed, one JSON
    object a line keyed by dataset, question id, system, budget and the systems' fingerprint
    (:meth:`ContextSystems.fingerprint`), so an interrupted run resumes where it stopped. Lines of
    another fingerprint stay in the file unread; a line cut short by an interruption is skipped."""

    def __init__(self, folder: Path, dataset: str, fingerprint: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"context-{dataset}.jsonl"
        self.dataset = dataset
        self.fingerprint = fingerprint
        self._known: dict[tuple[str, str, str], Outcome] = {}
        self._newline = False
        if self.path.is_file():
            raw = self.path.read_bytes()
            self._newline = bool(raw) and not raw.endswith(b"\n")
            for line in raw.decode("utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("dataset") == dataset and record.get("fingerprint") == fingerprint:
                    outcome = Outcome.from_record(record)
                    self._known[(outcome.qid, outcome.system, outcome.budget)] = outcome

    def __len__(self) -> int:
        return len(self._known)

    def get(self, qid: str, system: str, budget: str) -> Outcome | None:
        return self._known.get((qid, system, budget))

    def put(self, outcome: Outcome) -> None:
        self._known[(outcome.qid, outcome.system, outcome.budget)] = outcome
        record = {"dataset": self.dataset, "fingerprint": self.fingerprint, **to_plain(outcome)}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if self._newline else "") + json.dumps(record) + "\n")
        self._newline = False


# --------------------------------------------------------------------------------------- report


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextRow:
    """One system at one budget, means over the questions.

    Attributes:
        matched: the system was given ``one-read``'s tokens (else the budget itself).
        evidence_recall: gold kept / gold present, in [0, 1], averaged over the questions with
            gold among their candidates; None when none has.
        answer_kept: share in [0, 1] of the questions with an extractive answer whose answer is
            in the kept text; None when none has one.
        passages: candidates touched per question.
        tokens: kept tokens per question (proxy tokenizer).
        seconds: wall-clock seconds per question.
        over_ids: the questions whose kept text is longer than the tokens given.
    """

    budget: str
    system: str
    matched: bool
    evidence_recall: float | None
    answer_kept: float | None
    passages: float
    tokens: float
    seconds: float
    over_ids: tuple[str, ...]


def summarize(outcomes: Sequence[Outcome], *, budget: str, system: str) -> ContextRow:
    """The row of ``system`` at ``budget`` from its outcomes (one per question)."""
    if not outcomes:
        raise InvalidInputError(f"no outcome of {system} at {budget}")
    return ContextRow(
        budget=budget,
        system=system,
        matched=system in MATCHED,
        evidence_recall=mean_or_none(
            [o.gold_kept / o.gold_present for o in outcomes if o.gold_present]
        ),
        answer_kept=mean_or_none(
            [float(o.answer_kept) for o in outcomes if o.answer_kept is not None]
        ),
        passages=float(np.mean([o.passages for o in outcomes])),
        tokens=float(np.mean([o.tokens for o in outcomes])),
        seconds=float(np.mean([o.seconds for o in outcomes])),
        over_ids=tuple(o.qid for o in outcomes if o.over),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextReport:
    """Every system at every budget on one set; tokens counted in ``tokenizer``."""

    dataset: str
    num_questions: int
    num_with_gold: int
    num_with_answer: int
    tokenizer: str
    cpu_capability: str
    threads: int
    fingerprint: str
    rows: tuple[ContextRow, ...]
    outcomes: tuple[Outcome, ...]

    def to_markdown(self) -> str:
        lines = [
            f"{self.dataset}: {self.num_questions} questions, gold among the candidates in "
            f"{self.num_with_gold}, an extractive answer in {self.num_with_answer}",
            f"tokens in {self.tokenizer}; CPU capability {self.cpu_capability}, "
            f"{self.threads} torch threads; systems {self.fingerprint}",
            "",
            f"| budget | system | evidence recall (n={self.num_with_gold}) | answer kept "
            f"(n={self.num_with_answer}) | passages | tokens | s / question | over |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            name = r.system if r.matched else f"{r.system} *"
            cells = [r.budget, name, fmt_cell(r.evidence_recall), fmt_cell(r.answer_kept)]
            cells += [
                fmt_cell(r.passages, 2),
                fmt_cell(r.tokens, 1),
                fmt_cell(r.seconds),
                str(len(r.over_ids)),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "\\* at the budget itself; every other row gets one-read's tokens of each question, "
            "never more (over: questions past the tokens given).",
        ]
        lines += [
            f"over budget: {r.system} at {r.budget}: {', '.join(r.over_ids[:10])}"
            + (" …" if len(r.over_ids) > 10 else "")
            for r in self.rows
            if r.over_ids
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values; outcomes without their spans (the cache has them)."""
        out: dict[str, Any] = to_plain(self)
        for outcome in out["outcomes"]:
            outcome.pop("spans", None)
        return out


def evaluate_context(
    dataset: str,
    questions: Sequence[ContextQuestion],
    systems: ContextSystems,
    budgets: Sequence[Budget],
    names: Sequence[str] = SYSTEMS,
    *,
    cache: OutcomeCache | None = None,
    progress: bool = True,
) -> ContextReport:
    """Run ``one-read`` and the systems ``names`` on every question at every budget and report.

    ``one-read`` always runs (it sets each question's tokens). Outcomes found in ``cache`` are
    reused, new ones appended to it.

    Raises:
        InvalidInputError: no question, no budget, a threshold budget or an unknown system.
    """
    if not questions or not budgets:
        raise InvalidInputError("evaluate_context needs questions and budgets")
    if unknown := [n for n in names if n not in SYSTEMS]:
        raise InvalidInputError(f"unknown systems {unknown}; valid: {', '.join(SYSTEMS)}")
    if any(b.kind == "threshold" for b in budgets):
        raise InvalidInputError("a threshold keeps no set number of tokens; give ratios or tokens")
    chosen = [s for s in SYSTEMS if s == SYSTEM_UNDER_TEST or s in names]
    from tqdm import tqdm

    by_row: dict[tuple[str, str], list[Outcome]] = {}
    for question in tqdm(questions, desc=dataset, disable=not progress, mininterval=5.0):
        for budget in budgets:
            tokens = 0
            for system in chosen:
                label = budget_label(budget)
                outcome = cache.get(question.qid, system, label) if cache else None
                if outcome is not None and system in MATCHED and outcome.limit != tokens:
                    outcome = None  # matched to another one-read run: match it again
                if outcome is None:
                    outcome = systems.run(system, question, budget, tokens)
                    if cache is not None:
                        cache.put(outcome)
                if system == SYSTEM_UNDER_TEST:
                    tokens = outcome.tokens
                by_row.setdefault((label, system), []).append(outcome)
    return _report(dataset, questions, systems, by_row, cache)


def _report(
    dataset: str,
    questions: Sequence[ContextQuestion],
    systems: ContextSystems,
    by_row: Mapping[tuple[str, str], Sequence[Outcome]],
    cache: OutcomeCache | None,
) -> ContextReport:
    import torch

    return ContextReport(
        dataset=dataset,
        num_questions=len(questions),
        num_with_gold=sum(any(q.gold) for q in questions),
        num_with_answer=sum(bool(extractive(q.answers)) for q in questions),
        tokenizer=str(getattr(systems.tokenizer, "name_or_path", type(systems.tokenizer).__name__)),
        cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
        threads=torch.get_num_threads(),
        fingerprint=cache.fingerprint if cache else systems.fingerprint(),
        rows=tuple(summarize(o, budget=b, system=s) for (b, s), o in by_row.items()),
        outcomes=tuple(o for outs in by_row.values() for o in outs),
    )
