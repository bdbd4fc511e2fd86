"""What reaches the generator, at matched budgets (``ragattn eval context``; method in
``docs/context-eval.md`` of the shared docs).

Per question the candidates are a first stage's output, in its order. The system under test,
``one-read`` (:meth:`Compressor.rerank_and_compress`), runs at each budget; its kept text, counted
in the proxy's tokenizer (no special tokens), is ``T`` tokens. Every *matched* system then gets
exactly ``T`` tokens of that question, counted the same way on the text it returns:

- ``rerank-stuff``: the default :class:`Reranker`'s order (query and candidates only, as the
  service is called), whole units of the best passages (each passage's in order) until the next
  unit would not fit: sentences, or a Markdown passage's structural units joined as the read
  joins them (:func:`candidate_texts`), the fences and table headers they repeat counted;
- ``rerank3-compress`` / ``rerank5-compress``: the same ranking's best k passages, compressed by
  the default compressor with ``target_tokens=T``;
- ``lexical``: the lexical compressor over every candidate, ``target_tokens=T``;
- ``first-stage``: the candidates stuffed like ``rerank-stuff``, in the order given.

``compress`` (the default compressor over every candidate at the budget itself) is shown beside
``one-read``. Every system splits and joins a candidate as the read does: a Markdown candidate
along its structure (:func:`ragattn.markdown_units.document_units`, kept units joined as valid
Markdown by :func:`ragattn.compress.assembly.document_text`), any other into sentences
(:func:`ragattn.sentences.split_sentences`), so a stuffed context keeps its code blocks closed
and its table rows under their headers as the read's does. Stuffing never exceeds ``T``; a
compressor keeps its best sentence even when that alone is longer, so each row counts its
questions over the tokens it was given.

This module holds the sets, the budgets and the scoring of a kept context; the systems are in
:mod:`ragattn.lab.evaluation.context_systems`, the run and its report in
:mod:`ragattn.lab.evaluation.context_report`.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragattn.compress import DOC_JOINER
from ragattn.compress.assembly import doc_text, document_text
from ragattn.compress.features import Unit
from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.evaluation.markdown_checks import StructureBreaks
from ragattn.lab.evaluation.markdown_checks import structure_breaks as markdown_breaks
from ragattn.lab.evaluation.metrics import TokenizerLike, count_tokens, normalize_answer
from ragattn.lab.probe_training import SQUAD_EVAL_QUESTIONS, TWOWIKI_TRAIN_FROM
from ragattn.languages import AUTO, check_language
from ragattn.lexical import bm25_scores
from ragattn.markdown_units import document_units
from ragattn.types import AddedText, Budget, Document

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
ABSTRACTIVE = frozenset({"yes", "no", "noanswer"})
"""Normalised answers that are no string of the context; they are not scored by answer kept."""
SCIFACT_TOP_K = 20
Order = Literal["given", "bm25"]
"""The candidates' order: the set's own (``given``) or BM25's over them (:func:`bm25_ranked`)."""
ORDERS: tuple[Order, ...] = ("given", "bm25")
XQUAD_LANGUAGES: tuple[str, ...] = (
    "ar", "de", "el", "en", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh",
)  # fmt: skip
"""XQuAD's languages (its ``xquad.LANG.json`` files)."""
METRICS_VERSION = "2"
"""Part of the cache fingerprint: bump it when a metric's or a system's definition changes (2: a
Markdown candidate is stuffed by its structural units, joined as the read joins them; prose is
stuffed and scored exactly as under 1)."""

SpanRef = tuple[int, int, int]
"""A kept unit: ``(candidate index, start, end)``, a character range of the candidate's text."""


# -------------------------------------------------------------------------------------- sets


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextQuestion:
    """A question, its candidates in first-stage order, their gold sentences and the answers.

    Attributes:
        gold: per candidate, its gold sentences as exact strings of its text.
        language: the language the candidates' sentences are split by (a code of
            :data:`~ragattn.languages.LANGUAGES`, or ``"auto"``: each text's script).
        units: per candidate, the ``[start, end)`` character ranges of its units, as the
            compressor splits them (:func:`~ragattn.markdown_units.document_units` by
            ``language``): a Markdown candidate's structural units (whole code blocks or
            line-cut pieces, table headers and rows, sentences of paragraphs and list items),
            any other candidate's sentences (:func:`~ragattn.sentences.split_sentences`).
        ranked: the candidates come in a first stage's order (SciFact's BM25 over the corpus,
            or :func:`bm25_ranked`), which the one read may be given as ``first_stage_order``;
            False where the order is a dataset's (HotpotQA's, 2Wiki's) or a shuffle.
    """

    qid: str
    query: str
    candidates: tuple[Document, ...]
    gold: tuple[tuple[str, ...], ...]
    answers: tuple[str, ...] = ()
    language: str = AUTO
    ranked: bool = False
    units: tuple[tuple[tuple[int, int], ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.gold) != len(self.candidates):
            raise InvalidInputError(f"{self.qid}: one gold tuple per candidate is needed")
        units = tuple(document_units(d.text, language=self.language) for d in self.candidates)
        object.__setattr__(self, "units", units)

    @classmethod
    def from_example(
        cls,
        example: ds.QAExample,
        *,
        titles: bool = True,
        language: str = AUTO,
        ranked: bool = False,
    ) -> ContextQuestion:
        """The question of ``example``; ``titles=False`` gives its candidates as plain strings
        (no title: what Cohere-style string documents and most framework adapters send);
        ``language`` splits the candidates' sentences."""
        return cls(
            qid=example.qid,
            query=example.question,
            candidates=tuple(
                Document(text=p.text, title=(p.title or None) if titles else None)
                for p in example.passages
            ),
            gold=tuple(tuple(p.sentence(i) for i in p.supporting) for p in example.passages),
            answers=example.answers,
            language=language,
            ranked=ranked,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSet:
    """An evaluation set: its path in the data folder, its loader ``(path, first n, language) ->
    examples`` (the language splits the gold sentences of a set that splits its own text: SQuAD,
    XQuAD), the questions read by default and ``end``, the first question index never read
    (training)."""

    path: str
    load: Callable[[Path, int | None, str], tuple[ds.QAExample, ...]]
    default_limit: int | None = None
    end: int | None = None
    ranked: bool = False


def _carried(
    load: Callable[[Path, int | None], tuple[ds.QAExample, ...]],
) -> Callable[[Path, int | None, str], tuple[ds.QAExample, ...]]:
    """A loader whose gold sentences come split in the data: the language changes none."""
    return lambda path, limit, language: load(path, limit)


CROSS_LINGUAL: tuple[tuple[str, str], ...] = (
    ("en", "de"),
    ("de", "en"),
    ("en", "zh"),
    ("zh", "en"),
)
"""XQuAD's cross-lingual sets ``xquad-ASKED-OVER``: the question in one language over the
paragraphs (and gold, and answers) of the same article in another."""


def _cross_lingual(asked: str) -> Callable[[Path, int | None, str], tuple[ds.QAExample, ...]]:
    """A loader of XQuAD's paragraphs at ``path`` with each question asked in ``asked``'s file
    (the question ids are shared, so the same question is drawn in both)."""

    def load(path: Path, limit: int | None, language: str) -> tuple[ds.QAExample, ...]:
        examples = ds.load_xquad_articles(path, limit, language=language)
        questions = {
            ex.qid: ex.question
            for ex in ds.load_xquad_articles(path.with_name(f"xquad.{asked}.json"), limit)
        }
        return tuple(dataclasses.replace(ex, question=questions[ex.qid]) for ex in examples)

    return load


SETS: Mapping[str, ContextSet] = {
    "hotpotqa": ContextSet(
        path="hotpotqa/hotpot_dev_distractor_v1.shared.json", load=_carried(ds.load_hotpot)
    ),
    "hotpotqa-fullwiki": ContextSet(
        path="hotpotqa/hotpot_dev_fullwiki_v1.shared.json", load=_carried(ds.load_hotpot)
    ),
    "2wiki": ContextSet(
        path="2wikimultihopqa/2wiki_dev_sample500.json",
        load=_carried(ds.load_2wiki),
        default_limit=200,
        end=TWOWIKI_TRAIN_FROM,
    ),
    "scifact": ContextSet(
        path="scifact",
        load=_carried(lambda p, n: ds.load_scifact_retrieved(p, "test", SCIFACT_TOP_K, n)),
        ranked=True,
    ),
    "scifact-train": ContextSet(
        path="scifact",
        load=_carried(lambda p, n: ds.load_scifact_retrieved(p, "train", SCIFACT_TOP_K, n)),
        default_limit=40,
        ranked=True,
    ),
    "squad": ContextSet(
        path="squad-v2/dev-v2.0.shared.json",
        load=lambda p, n, language: ds.load_squad_articles(p, n, language=language),
        default_limit=SQUAD_EVAL_QUESTIONS,
        end=SQUAD_EVAL_QUESTIONS,
    ),
    "techdocs": ContextSet(
        path="",
        load=lambda p, n, language: ds.load_techdocs("dev", n, language=language),
        ranked=True,
    ),
    "techdocs-test": ContextSet(
        path="",
        load=lambda p, n, language: ds.load_techdocs("test", n, language=language),
        ranked=True,
    ),
    **{
        f"xquad-{lang}": ContextSet(
            path=f"xquad/xquad.{lang}.json",
            load=lambda p, n, language: ds.load_xquad_articles(p, n, language=language),
        )
        for lang in XQUAD_LANGUAGES
    },
    **{
        f"xquad-{asked}-{over}": ContextSet(
            path=f"xquad/xquad.{over}.json",
            load=_cross_lingual(asked),
        )
        for asked, over in CROSS_LINGUAL
    },
    "drcd": ContextSet(
        path="drcd/DRCD_test.json",
        load=lambda p, n, language: ds.load_xquad_articles(p, n, language=language),
        default_limit=48,
    ),
}
"""The shared sets no probe was trained on: HotpotQA dev (distractor, fullwiki), 2Wiki-200
(questions 200-299 are a margin, 300 on train), SciFact test claims with rationales over BM25
top-20 abstracts (``scifact-train``: the train claims, for choosing defaults), SQuAD's first
1,000 answerable questions over their article's paragraphs; and
XQuAD (``xquad-de``, ``xquad-zh``, ...: the first question of each of its 48 articles over the
article's paragraphs, the same questions in every language; not in the shared folder: put
google-deepmind/xquad's ``xquad.LANG.json`` files, CC BY-SA 4.0, in ``DATA/xquad/``); and
``drcd``: DRCD's test set, questions written natively in (Traditional) Chinese over
Wikipedia articles, read like XQuAD (one drawn question per article over the article's
paragraphs, the first 48 articles; not in the shared folder: put DRCKnowledgeTeam/DRCD's
``DRCD_test.json``, CC BY-SA 3.0, in ``DATA/drcd/``); and
``techdocs`` (its dev questions) / ``techdocs-test`` (its held-out projects): questions answered in
the code, tables and prose of installed packages' READMEs, each over 20 section chunks in BM25's
order (:mod:`ragattn.lab.evaluation.datasets.techdocs`; no data folder: the READMEs are read from
the installed packages)."""


def load_context_set(
    name: str,
    data_dir: Path,
    *,
    offset: int = 0,
    limit: int | None = None,
    titles: bool = True,
    pool: int | None = None,
    language: str = AUTO,
    order: Order = "given",
) -> tuple[ContextQuestion, ...]:
    """Questions ``offset`` to ``offset + limit`` of a set (default: its evaluation slice);
    ``titles=False``: the candidates as plain strings, without their titles; ``pool``: each
    question's candidates padded to that many (:func:`pooled`); ``language``: the sentences
    (the candidates' units and, where the set splits its own text, its gold) split by that
    language's rules (``"auto"``: each text's script); ``order="bm25"``: each question's
    candidates ranked by BM25 over them (:func:`bm25_ranked`, after any pooling), a first stage's
    order where the set has none.

    Raises:
        InvalidInputError: an unknown set or language, or a slice that reaches training questions.
    """
    check_language(language)
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
    examples = spec.load(data_dir / spec.path, end, language)[offset:]
    questions = tuple(
        ContextQuestion.from_example(ex, titles=titles, language=language, ranked=spec.ranked)
        for ex in examples
    )
    questions = questions if pool is None else pooled(questions, pool)
    return bm25_ranked(questions) if order == "bm25" else questions


def bm25_ranked(questions: Sequence[ContextQuestion]) -> tuple[ContextQuestion, ...]:
    """Each question with its candidates in BM25's order over them (the query against each
    candidate's title and text, :func:`ragattn.lexical.bm25_scores`; ties by position): the order
    a lexical first stage gives, for the sets whose own order is none (HotpotQA's, 2Wiki's, a
    pool's shuffle). The questions are ``ranked``."""
    out = []
    for q in questions:
        scores = bm25_scores(q.query, [f"{d.title or ''} {d.text}".strip() for d in q.candidates])
        order = sorted(range(len(q.candidates)), key=lambda i: (-scores[i], i))
        out.append(
            ContextQuestion(
                qid=q.qid,
                query=q.query,
                candidates=tuple(q.candidates[i] for i in order),
                gold=tuple(q.gold[i] for i in order),
                answers=q.answers,
                language=q.language,
                ranked=True,
            )
        )
    return tuple(out)


def pooled(questions: Sequence[ContextQuestion], size: int) -> tuple[ContextQuestion, ...]:
    """Each question with its candidates padded to ``size`` by the candidates of the questions
    after it (wrapping around; a text it already has is skipped), the production shape of a
    reranker's input: 50-100 candidates, most of them a first stage's distractors. The padding
    carries no gold. The candidates are then shuffled in a fixed order (seeded by the question
    id), so neither the question's own candidates nor the padding come first; the
    ``first-stage`` system's order means nothing on a pooled set.

    Raises:
        InvalidInputError: a size below 2, or more candidates than the questions hold.
    """
    if size < 2:
        raise InvalidInputError(f"a pool of {size} candidates: give at least 2")
    out = []
    for k, q in enumerate(questions):
        docs, gold = list(q.candidates), list(q.gold)
        texts = {d.text for d in docs}
        for other in (*questions[k + 1 :], *questions[:k]):
            for d in other.candidates:
                if len(docs) >= size:
                    break
                if d.text not in texts:
                    docs.append(d)
                    gold.append(())
                    texts.add(d.text)
        if len(docs) < size:
            raise InvalidInputError(
                f"{q.qid}: only {len(docs)} distinct candidates for a pool of {size}"
            )
        order = list(range(len(docs)))
        random.Random(q.qid).shuffle(order)
        out.append(
            ContextQuestion(
                qid=q.qid,
                query=q.query,
                candidates=tuple(docs[i] for i in order[:size]),
                gold=tuple(gold[i] for i in order[:size]),
                answers=q.answers,
                language=q.language,
            )
        )
    return tuple(out)


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
    """What a system sends the generator: ``text`` and the units it holds."""

    text: str
    spans: tuple[SpanRef, ...]


def _by_candidate(spans: Iterable[SpanRef]) -> dict[int, list[tuple[int, int]]]:
    """Kept ranges per candidate, candidates in the order the spans first touch them."""
    by_doc: dict[int, list[tuple[int, int]]] = {}
    for doc, start, end in spans:
        by_doc.setdefault(doc, []).append((start, end))
    return by_doc


def _is_units(question: ContextQuestion, doc: int, ranges: Iterable[tuple[int, int]]) -> bool:
    return set(ranges) <= set(question.units[doc])


def kept_document(
    question: ContextQuestion, doc: int, ranges: Sequence[tuple[int, int]]
) -> tuple[str, tuple[AddedText, ...]]:
    """One candidate's kept text, written as the read writes a document, and what it repeats.

    Ranges that are the candidate's units (:attr:`ContextQuestion.units`) are joined by
    :func:`~ragattn.compress.assembly.document_text`: a Markdown candidate's as valid Markdown
    (its repeated fences and table headers returned as :class:`~ragattn.types.AddedText`), any
    other's as its sentences each with the whitespace that follows it. Other ranges (hand-made,
    or kept by another split) are joined that second way, adding nothing. The text is
    right-stripped.
    """
    text = question.candidates[doc].text
    members = [Unit(doc, a, b) for a, b in question.units[doc]]
    kept = [Unit(doc, a, b) for a, b in sorted(ranges)]
    if _is_units(question, doc, ranges):
        return document_text(text, members, kept, question.language)
    return doc_text(text, members, kept), ()


def candidate_texts(question: ContextQuestion, spans: Iterable[SpanRef]) -> dict[int, str]:
    """Each touched candidate's kept text (:func:`kept_document`): its kept units in text order,
    as the compressor writes a document (a Markdown candidate's fences and table headers
    repeated where its kept code and rows need them)."""
    return {
        doc: kept_document(question, doc, ranges)[0] for doc, ranges in _by_candidate(spans).items()
    }


def structure_breaks(question: ContextQuestion, spans: Iterable[SpanRef]) -> StructureBreaks:
    """The broken Markdown structure of a kept context, summed over the candidates it touches
    (:func:`ragattn.lab.evaluation.markdown_checks.structure_breaks` of each candidate's kept
    text, :func:`kept_document`; a table header it repeats counts as kept over its rows): open
    fences, table rows without their header, code lines cut. Ranges that are not the
    candidate's units are read as kept text each followed by the whitespace after it in the
    source."""
    total = StructureBreaks()
    for doc, ranges in _by_candidate(spans).items():
        text = question.candidates[doc].text
        if _is_units(question, doc, ranges):
            kept, added = kept_document(question, doc, ranges)
            shown = [*ranges, *((a.source_start, a.source_end) for a in added if _header(a))]
        else:
            # each kept range with the whitespace after it, as the kept text joins them
            kept = "".join(text[a:b] + _trailing_space(text, b) for a, b in sorted(ranges))
            kept, shown = kept.rstrip(), ranges
        total += markdown_breaks(text, shown, kept)
    return total


def _header(added: AddedText) -> bool:
    # A repeated header is a whole header kept above its rows; a repeated fence is no part of
    # a code line (the fence parse of the kept text judges it).
    return added.kind == "table_header"


def _trailing_space(text: str, end: int) -> str:
    stop = end
    while stop < len(text) and text[stop].isspace():
        stop += 1
    return text[end:stop]


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
    """Whole units of the candidates in ``order`` (each candidate's in text order: sentences, or a
    Markdown candidate's structural units), until the next one would take the joined text
    (:func:`context_text`, a Markdown candidate's repeated fences and table headers included)
    past ``limit`` tokens of ``tokenizer``; never more."""
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
