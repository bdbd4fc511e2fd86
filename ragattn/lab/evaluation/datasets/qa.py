"""QA and compression sets: questions over passages whose gold sentences are known, as character
spans (2Wiki, HotpotQA, MuSiQue, SQuAD v2, SciFact rationales), and a deterministic holdout split.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets.ranking import CorpusDoc, bm25_candidates
from ragattn.lab.evaluation.datasets.readers import read_beir_qrels, read_json, read_jsonl
from ragattn.sentences import split_sentences
from ragattn.types import Document

logger = logging.getLogger(__name__)

Span = tuple[int, int]
"""A half-open character range ``[start, end)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Passage:
    """A context passage with sentence spans and gold labels.

    Attributes:
        title: the passage title (not part of ``text``; spans never include it).
        text: the passage text.
        sentence_spans: ``[start, end)`` character ranges of ``text``, in order, non-overlapping.
        supporting: indices into ``sentence_spans`` of gold supporting sentences (empty when the
            dataset only labels paragraphs, as MuSiQue, or the passage is a distractor).
        is_gold: the dataset marks this passage as supporting (paragraph-level label).
    """

    title: str
    text: str
    sentence_spans: tuple[Span, ...]
    supporting: tuple[int, ...] = ()
    is_gold: bool = False

    def sentence(self, index: int) -> str:
        start, end = self.sentence_spans[index]
        return self.text[start:end]

    @property
    def sentences(self) -> tuple[str, ...]:
        return tuple(self.text[a:b] for a, b in self.sentence_spans)


@dataclass(frozen=True, slots=True, kw_only=True)
class QAExample:
    """A question, its gold answer strings (empty if unanswerable/none) and its passages."""

    qid: str
    question: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...]

    @property
    def num_supporting(self) -> int:
        """Number of gold supporting sentences over all passages."""
        return sum(len(p.supporting) for p in self.passages)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSplit:
    """Disjoint training and evaluation parts of a list of examples (input order kept)."""

    train: tuple[QAExample, ...]
    evaluation: tuple[QAExample, ...]


def joined_passage(
    title: str, sentences: Sequence[str], gold: Iterable[int], *, is_gold: bool
) -> tuple[Passage, int]:
    """Join stripped sentences with single spaces; returns the passage and dropped gold count.

    Sentences that are blank after stripping are left out (and gold indices remapped), so no span
    is ever empty.
    """
    parts: list[str] = []
    spans: list[Span] = []
    remap: dict[int, int] = {}
    cursor = 0
    for i, raw in enumerate(sentences):
        sent = raw.strip()
        if not sent:
            continue
        if parts:
            cursor += 1
        remap[i] = len(spans)
        spans.append((cursor, cursor + len(sent)))
        parts.append(sent)
        cursor += len(sent)
    gold_set = set(gold)
    supporting = tuple(sorted(remap[i] for i in gold_set if i in remap))
    passage = Passage(
        title=title,
        text=" ".join(parts),
        sentence_spans=tuple(spans),
        supporting=supporting,
        is_gold=is_gold or bool(supporting),
    )
    return passage, len(gold_set) - len(supporting)


def split_passage(
    title: str,
    text: str,
    *,
    is_gold: bool,
    gold_chars: Iterable[int] = (),
    language: str = "auto",
) -> Passage:
    """Split ``text`` with split_sentences (by ``language``'s rules); a sentence is gold if it
    holds a ``gold_chars`` offset.

    An offset falling in the whitespace between two sentences belongs to the following sentence.
    """
    spans = tuple((s.start, s.end) for s in split_sentences(text, language=language))
    supporting = set()
    for offset in gold_chars:
        idx = next((i for i, (_, end) in enumerate(spans) if offset < end), None)
        if idx is not None:
            supporting.add(idx)
    return Passage(
        title=title,
        text=text,
        sentence_spans=spans,
        supporting=tuple(sorted(supporting)),
        is_gold=is_gold or bool(supporting),
    )


def _limited(items: Iterable[Any], limit: int | None) -> Iterator[Any]:
    if limit is not None and limit < 0:
        raise InvalidInputError(f"limit must be >= 0 or None, got {limit}")
    for i, item in enumerate(items):
        if limit is not None and i >= limit:
            return
        yield item


def _hotpot_style(path: Path, limit: int | None, source: str) -> tuple[QAExample, ...]:
    """HotpotQA layout: ``context=[[title,[sentences]]]``, ``supporting_facts=[[title,i]]``."""
    examples, dropped = [], 0
    for rec in _limited(read_json(path), limit):
        gold: dict[str, set[int]] = {}
        for title, idx in rec["supporting_facts"]:
            gold.setdefault(title, set()).add(int(idx))
        titles = {t for t, _ in rec["context"]}
        dropped += sum(len(v) for t, v in gold.items() if t not in titles)
        passages = []
        for title, sentences in rec["context"]:
            passage, lost = joined_passage(
                title, sentences, gold.get(title, ()), is_gold=title in gold
            )
            passages.append(passage)
            dropped += lost
        examples.append(
            QAExample(
                qid=str(rec["_id"]),
                question=rec["question"],
                answers=(rec["answer"],),
                passages=tuple(passages),
            )
        )
    if dropped:
        logger.warning(
            "%s: %d supporting facts point outside the context and were skipped", source, dropped
        )
    return tuple(examples)


def load_2wiki(path: str | Path, limit: int | None = None) -> tuple[QAExample, ...]:
    """2WikiMultihopQA (``2wiki_dev_sample500.json``); first ``limit`` questions in file order."""
    return _hotpot_style(Path(path), limit, "2wiki")


def load_hotpot(path: str | Path, limit: int | None = None) -> tuple[QAExample, ...]:
    """HotpotQA distractor dev, train sample or fullwiki file; first ``limit`` questions.

    In the fullwiki file gold paragraphs are often not retrieved: their supporting facts are
    skipped (logged), and an example may then carry no supporting sentence at all.
    """
    return _hotpot_style(Path(path), limit, "hotpot")


def fullwiki_paragraph_sets(
    path: str | Path, n_candidates: int, n_sets: int, skip: int = 0
) -> list[tuple[str, list[Document]]]:
    """``n_sets`` (question, candidates) pairs of ``n_candidates`` distinct titled paragraphs of
    the HotpotQA fullwiki file, the cost benchmarks' inputs of a given shape: a set of ``n``
    candidates is the paragraphs of ``ceil(n / 10)`` consecutive questions (ten each), asked by
    the first of them; sets start at question ``skip`` and share no question. No gold is read:
    the pairs time a read, they do not score it."""
    records = read_json(Path(path))
    per = -(-n_candidates // 10)
    out = []
    for q in range(n_sets):
        group = records[skip + q * per : skip + (q + 1) * per]
        docs = [
            Document(text="".join(sentences), title=title)
            for record in group
            for title, sentences in record["context"]
        ]
        out.append((group[0]["question"], docs[:n_candidates]))
    return out


def load_musique(path: str | Path, limit: int | None = None) -> tuple[QAExample, ...]:
    """MuSiQue-Ans (jsonl). Labels are paragraph-level only: ``Passage.is_gold`` is set,
    ``Passage.supporting`` stays empty. Answers are the answer followed by its aliases."""
    examples = []
    for rec in _limited(read_jsonl(Path(path)), limit):
        passages = tuple(
            split_passage(p["title"], p["paragraph_text"], is_gold=bool(p["is_supporting"]))
            for p in rec["paragraphs"]
        )
        answers = tuple(dict.fromkeys([rec["answer"], *rec.get("answer_aliases", [])]))
        examples.append(
            QAExample(
                qid=str(rec["id"]), question=rec["question"], answers=answers, passages=passages
            )
        )
    return tuple(examples)


def load_squad(
    path: str | Path,
    limit: int | None = None,
    *,
    answerable_only: bool = True,
    language: str = "auto",
) -> tuple[QAExample, ...]:
    """SQuAD v2 JSON; one example per question with its paragraph as the single passage.

    Gold sentences are those (from :func:`split_sentences`, by ``language``) holding any
    annotator's ``answer_start``; answers are the distinct answer texts. Unanswerable questions
    (kept only with ``answerable_only=False``) have no answers and no gold sentence.
    """

    def records() -> Iterator[QAExample]:
        for article in read_json(Path(path))["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    if answerable_only and qa.get("is_impossible", False):
                        continue
                    answers = [a for a in qa.get("answers", []) if not qa.get("is_impossible")]
                    passage = split_passage(
                        article["title"],
                        para["context"],
                        is_gold=bool(answers),
                        gold_chars=[int(a["answer_start"]) for a in answers],
                        language=language,
                    )
                    yield QAExample(
                        qid=str(qa["id"]),
                        question=qa["question"],
                        answers=tuple(dict.fromkeys(a["text"] for a in answers)),
                        passages=(passage,),
                    )

    return tuple(_limited(records(), limit))


def load_xquad_articles(
    path: str | Path, limit: int | None = None, *, language: str = "auto"
) -> tuple[QAExample, ...]:
    """XQuAD (SQuAD v1.1 questions and paragraphs translated by professionals into eleven
    languages): one question per article over every paragraph of its article (in article order);
    the first ``limit`` articles. The question is the first of one paragraph drawn at random
    (seeded by the article's first question id, so every language draws the same), so the
    question's paragraph sits anywhere in the article, not first: article order is no first
    stage (``ragattn eval context --order bm25`` gives one). Gold sentences are the sentences of the
    question's paragraph holding an ``answer_start``, split by ``language``'s rules (as
    :func:`ragattn.sentences.split_sentences` reads it); question ids are shared across languages,
    so every language asks the same questions.
    """
    examples = []
    for article in _limited(read_json(Path(path))["data"], limit):
        title = article.get("title", "")
        paras = article["paragraphs"]
        asked = [k for k, p in enumerate(paras) if p["qas"]]
        owner = asked[random.Random(str(paras[asked[0]]["qas"][0]["id"])).randrange(len(asked))]
        qa = paras[owner]["qas"][0]
        answers = qa["answers"]
        passages = [
            Passage(
                title=title,
                text=p["context"],
                sentence_spans=tuple(
                    (s.start, s.end) for s in split_sentences(p["context"], language=language)
                ),
                supporting=(),
                is_gold=False,
            )
            for p in paras
        ]
        spans = passages[owner].sentence_spans
        gold = {
            next((i for i, (_, end) in enumerate(spans) if int(a["answer_start"]) < end), None)
            for a in answers
        }
        passages[owner] = Passage(
            title=title,
            text=paras[owner]["context"],
            sentence_spans=spans,
            supporting=tuple(sorted(i for i in gold if i is not None)),
            is_gold=True,
        )
        examples.append(
            QAExample(
                qid=str(qa["id"]),
                question=qa["question"],
                answers=tuple(dict.fromkeys(a["text"] for a in answers)),
                passages=tuple(passages),
            )
        )
    return tuple(examples)


def load_scifact_rationales(
    path: str | Path, split: Literal["test", "train"] = "test", limit: int | None = None
) -> tuple[QAExample, ...]:
    """SciFact claims that have rationale sentences, with their cited abstracts as passages.

    The claim is the question (no answers). Passages are every abstract the claim cites (BEIR
    qrels of ``split``), in qrels order, sentences from ``corpus_sentences.jsonl``; supporting
    sentences are the ``evidence_sentence_ids`` of ``evidence.jsonl``. Claims without evidence
    are left out because they have nothing to recall.
    """
    folder = Path(path)
    qrels = read_beir_qrels(folder / "qrels" / f"{split}.tsv")
    evidence: dict[str, dict[str, set[int]]] = {}
    claims: dict[str, str] = {}
    for row in read_jsonl(folder / "evidence.jsonl"):
        qid = str(row["query_id"])
        if qid in qrels:
            claims[qid] = row["claim"]
            evidence.setdefault(qid, {}).setdefault(str(row["doc_id"]), set()).update(
                int(i) for i in row["evidence_sentence_ids"]
            )
    needed = {d for q in evidence for d in (*qrels[q], *evidence[q])}
    docs = {
        str(d["_id"]): d
        for d in read_jsonl(folder / "corpus_sentences.jsonl")
        if str(d["_id"]) in needed
    }
    examples = []
    for qid in _limited(sorted(evidence, key=int), limit):
        doc_ids = list(dict.fromkeys([*qrels[qid], *evidence[qid]]))
        passages = tuple(
            joined_passage(
                docs[d]["title"], docs[d]["sentences"], evidence[qid].get(d, ()), is_gold=True
            )[0]
            for d in doc_ids
        )
        examples.append(QAExample(qid=qid, question=claims[qid], answers=(), passages=passages))
    return tuple(examples)


def split_for_training(
    examples: Sequence[QAExample], holdout_fraction: float, seed: int = 0
) -> DataSplit:
    """Set aside about ``holdout_fraction`` of the examples for training, deterministically.

    Membership depends only on ``(seed, qid)`` (a SHA-256 hash mapped to [0, 1)), not on list
    order or length, so loading with a different ``limit`` never moves a question from training
    into evaluation. Use the same seed everywhere a model is trained and evaluated.
    """
    if not 0.0 <= holdout_fraction <= 1.0:
        raise InvalidInputError(f"holdout_fraction must be in [0, 1], got {holdout_fraction}")
    train: list[QAExample] = []
    evaluation: list[QAExample] = []
    for ex in examples:
        digest = hashlib.sha256(f"{seed}:{ex.qid}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        (train if u < holdout_fraction else evaluation).append(ex)
    return DataSplit(train=tuple(train), evaluation=tuple(evaluation))


def load_squad_articles(
    path: str | Path, limit: int | None = None, *, language: str = "auto"
) -> tuple[QAExample, ...]:
    """SQuAD v2 answerable questions, each over every paragraph of its article (the article is
    the first stage's output, its paragraphs in article order); first ``limit`` questions.

    The questions are those of :func:`load_squad` (same order, same answers); gold sentences are
    the sentences of the question's own paragraph holding an ``answer_start`` (every paragraph
    split by ``language``), and the other paragraphs carry none.
    """
    articles: list[tuple[Passage, ...]] = []
    owners: dict[str, tuple[int, int]] = {}
    for a, article in enumerate(read_json(Path(path))["data"]):
        title = article["title"]
        articles.append(
            tuple(
                split_passage(title, p["context"], is_gold=False, language=language)
                for p in article["paragraphs"]
            )
        )
        for k, para in enumerate(article["paragraphs"]):
            owners.update({str(qa["id"]): (a, k) for qa in para["qas"]})
    examples = []
    for ex in load_squad(path, limit, language=language):
        a, k = owners[ex.qid]
        passages = list(articles[a])
        passages[k] = ex.passages[0]
        examples.append(
            QAExample(
                qid=ex.qid, question=ex.question, answers=ex.answers, passages=tuple(passages)
            )
        )
    return tuple(examples)


def load_scifact_retrieved(
    path: str | Path,
    split: Literal["test", "train"] = "test",
    k: int = 20,
    limit: int | None = None,
) -> tuple[QAExample, ...]:
    """SciFact claims with rationales, each over its BM25 top-``k`` abstracts of the whole corpus
    (:func:`bm25_candidates`, in BM25 order) instead of the abstracts it cites.

    The claims are those of :func:`load_scifact_rationales` (claims with evidence, by id; no
    answers). An abstract's sentences come from ``corpus_sentences.jsonl`` joined as in
    :func:`joined_passage`; its supporting sentences are the claim's evidence sentences in it, so
    a claim whose evidence abstracts BM25 missed carries fewer gold sentences, or none.
    """
    folder = Path(path)
    claims = load_scifact_rationales(folder, split, limit)
    wanted = {c.qid for c in claims}
    evidence: dict[str, dict[str, set[int]]] = {}
    for row in read_jsonl(folder / "evidence.jsonl"):
        if str(row["query_id"]) in wanted:
            evidence.setdefault(str(row["query_id"]), {}).setdefault(
                str(row["doc_id"]), set()
            ).update(int(i) for i in row["evidence_sentence_ids"])
    sentences = {str(d["_id"]): d for d in read_jsonl(folder / "corpus_sentences.jsonl")}
    corpus = {
        d: CorpusDoc(
            doc_id=d,
            title=doc["title"],
            text=joined_passage(doc["title"], doc["sentences"], (), is_gold=False)[0].text,
        )
        for d, doc in sentences.items()
    }
    hits = bm25_candidates(corpus, {c.qid: c.question for c in claims}, k=k)
    examples = []
    for claim, hit in zip(claims, hits, strict=True):
        gold = evidence.get(claim.qid, {})
        passages = tuple(
            joined_passage(
                sentences[c.doc_id]["title"],
                sentences[c.doc_id]["sentences"],
                gold.get(c.doc_id, ()),
                is_gold=c.doc_id in gold,
            )[0]
            for c in hit.candidates
        )
        examples.append(
            QAExample(qid=claim.qid, question=claim.question, answers=(), passages=passages)
        )
    return tuple(examples)


__all__ = [
    "DataSplit",
    "Passage",
    "QAExample",
    "Span",
    "joined_passage",
    "load_2wiki",
    "load_hotpot",
    "load_musique",
    "load_scifact_rationales",
    "load_scifact_retrieved",
    "load_squad",
    "load_squad_articles",
    "split_for_training",
    "split_passage",
]
