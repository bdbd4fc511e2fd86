"""Ranking lists in the retrieval shape, built from training portions only (issue 27, item 1).

Each list is a first stage's output: **BM25 top-20 over a pooled corpus** (bm25s, the harness's
first stage), never a question's own handful of paragraphs, so the negatives are the look-alikes a
retriever returns. Gold documents are kept where BM25 found them; lists where it found none are
dropped (they carry no ranking signal). Document order is shuffled with a seed, and documents are
cut to ``max_tokens`` proxy tokens, as a service reranking 128-token passages would see them.

Sources and their pools (no evaluation slice is read: not DL19, not SciFact test, not the first
``TWOWIKI_TRAIN_FROM`` 2Wiki questions, not HotpotQA dev, not SQuAD's evaluation articles):

- ``hotpotqa-train``, ``musique-train``: the 100-question train samples, pooled paragraphs,
  gold = supporting paragraphs;
- ``2wiki-train``: questions from ``TWOWIKI_TRAIN_FROM`` on, pooled paragraphs, supporting gold;
- ``scifact-train``: the 809 train claims over the 5,183-abstract corpus, train qrels;
- ``fiqa-dev``: the 500 dev queries over the 2,944-answer gold pool, dev qrels;
- ``nq-train``: the 1,328 NQ-open questions over every question's gold passage, own passage gold;
- ``squad-train``: answerable questions of the articles after the evaluation slice, over those
  articles' paragraphs, the question's paragraph gold.

``msmarco-train`` (110 web queries, their positives and mined negatives pooled) is built the same
way and kept **out of training**: it is a left-out transfer check, as its README asks.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragattn.lab.evaluation import datasets as ds
from ragattn.types import Document

TWOWIKI_TRAIN_FROM = 300
"""2Wiki questions before this index are never read (the first 200 are evaluation; 200-299 are
kept out as a margin, as the compression probes do)."""
SQUAD_EVAL_QUESTIONS = 1000
LIST_SIZE = 20
TRAINING_SOURCES = (
    "hotpotqa-train",
    "musique-train",
    "2wiki-train",
    "scifact-train",
    "fiqa-dev",
    "nq-train",
    "squad-train",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RankingList:
    """One query with its first-stage documents in shuffled order and 0/1 gold labels."""

    source: str
    qid: str
    query: str
    documents: tuple[Document, ...]
    labels: tuple[int, ...]

    @property
    def key(self) -> str:
        """A stable id of the list (source, query id and document texts)."""
        payload = "\x1f".join([self.source, self.qid, *(d.text for d in self.documents)])
        return hashlib.sha256(payload.encode()).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class _Pool:
    corpus: Mapping[str, ds.CorpusDoc]
    queries: Mapping[str, str]
    gold: Mapping[str, frozenset[str]]


def _doc_key(title: str, text: str) -> str:
    return hashlib.sha256(f"{title}\x1f{text}".encode()).hexdigest()[:16]


def _paragraph_pool(examples: Sequence[ds.QAExample]) -> _Pool:
    corpus: dict[str, ds.CorpusDoc] = {}
    queries: dict[str, str] = {}
    gold: dict[str, frozenset[str]] = {}
    for ex in examples:
        mine = set()
        for p in ex.passages:
            key = _doc_key(p.title, p.text)
            corpus.setdefault(key, ds.CorpusDoc(doc_id=key, title=p.title, text=p.text))
            if p.is_gold:
                mine.add(key)
        if mine:
            queries[ex.qid] = ex.question
            gold[ex.qid] = frozenset(mine)
    return _Pool(corpus, queries, gold)


def _beir_pool(folder: Path, split: str) -> _Pool:
    beir = ds.load_beir(folder, split)  # type: ignore[arg-type]
    gold = {q: frozenset(d for d, g in rels.items() if g > 0) for q, rels in beir.qrels.items()}
    queries = {q: t for q, t in beir.queries.items() if gold.get(q)}
    return _Pool(beir.corpus, queries, gold)


def _fiqa_pool(folder: Path) -> _Pool:
    qrels = ds.read_beir_qrels(folder / "qrels" / "dev.tsv")
    corpus = {
        str(d["_id"]): ds.CorpusDoc(doc_id=str(d["_id"]), title="", text=d["text"])
        for d in ds.read_jsonl(folder / "corpus.jsonl")
    }
    queries = {
        str(q["_id"]): q["text"]
        for q in ds.read_jsonl(folder / "queries.jsonl")
        if str(q["_id"]) in qrels
    }
    gold = {q: frozenset(d for d, g in qrels[q].items() if g > 0) for q in queries}
    return _Pool(corpus, queries, gold)


def _nq_pool(folder: Path) -> _Pool:
    rows = list(ds.read_jsonl(folder / "nq-open-oracle.shared.jsonl"))
    corpus = {
        f"nq{r['line_index']}": ds.CorpusDoc(
            doc_id=f"nq{r['line_index']}", title=r["ctxs"][0]["title"], text=r["ctxs"][0]["text"]
        )
        for r in rows
    }
    queries = {f"nq{r['line_index']}": r["question"] for r in rows}
    return _Pool(corpus, queries, {q: frozenset([q]) for q in queries})


def _squad_pool(path: Path) -> _Pool:
    held_out = {p.title for ex in ds.load_squad(path, SQUAD_EVAL_QUESTIONS) for p in ex.passages}
    examples = [ex for ex in ds.load_squad(path) if ex.passages[0].title not in held_out]
    return _paragraph_pool(examples)


def _msmarco_pool(path: Path) -> _Pool:
    corpus: dict[str, ds.CorpusDoc] = {}
    queries: dict[str, str] = {}
    gold: dict[str, frozenset[str]] = {}
    for row in ds.read_jsonl(path):
        qid = str(row["qid"])
        queries[qid] = row["query"]
        positives = set()
        for kind in ("positives", "negatives"):
            for p in row[kind]:
                key = _doc_key("", p["text"])
                corpus.setdefault(key, ds.CorpusDoc(doc_id=key, title="", text=p["text"]))
                if kind == "positives":
                    positives.add(key)
        gold[qid] = frozenset(positives)
    return _Pool(corpus, queries, gold)


def _pools(data_dir: Path) -> dict[str, Callable[[], _Pool]]:
    d = data_dir
    return {
        "hotpotqa-train": lambda: _paragraph_pool(
            ds.load_hotpot(d / "hotpotqa" / "hotpot_train_v1.1.sample100.shared.json")
        ),
        "musique-train": lambda: _paragraph_pool(
            ds.load_musique(d / "musique" / "musique_ans_v1.0_train.sample100.jsonl")
        ),
        "2wiki-train": lambda: _paragraph_pool(
            ds.load_2wiki(d / "2wikimultihopqa" / "2wiki_dev_sample500.json")[TWOWIKI_TRAIN_FROM:]
        ),
        "scifact-train": lambda: _beir_pool(d / "scifact", "train"),
        "fiqa-dev": lambda: _fiqa_pool(d / "fiqa-goldpool"),
        "nq-train": lambda: _nq_pool(d / "nq-open-oracle"),
        "squad-train": lambda: _squad_pool(d / "squad-v2" / "dev-v2.0.shared.json"),
        "msmarco-train": lambda: _msmarco_pool(d / "msmarco-train" / "train.jsonl"),
    }


def cut_to_tokens(text: str, tokenizer: object, max_tokens: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_tokens`` tokens of ``tokenizer``
    (cut at a token boundary, by its character offsets)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)  # type: ignore[operator]
    offsets = enc["offset_mapping"]
    if len(offsets) <= max_tokens:
        return text
    return text[: offsets[max_tokens - 1][1]].rstrip()


def source_lists(
    source: str,
    data_dir: Path,
    tokenizer: object,
    *,
    max_tokens: int = 128,
    size: int = LIST_SIZE,
    seed: int = 13,
) -> Iterator[RankingList]:
    """The lists of one source, in a seeded random query order (so any prefix is a sample)."""
    pool = _pools(data_dir)[source]()
    qids = sorted(pool.queries)
    random.Random(f"{seed}:{source}:order").shuffle(qids)
    hits = ds.bm25_candidates(pool.corpus, {q: pool.queries[q] for q in qids}, k=size)
    for hit in hits:
        labels = [1 if c.doc_id in pool.gold[hit.qid] else 0 for c in hit.candidates]
        if not any(labels):
            continue
        docs = [
            Document(text=cut_to_tokens(c.text, tokenizer, max_tokens), title=c.title or None)
            for c in hit.candidates
        ]
        order = list(range(len(docs)))
        random.Random(f"{seed}:{source}:{hit.qid}").shuffle(order)
        yield RankingList(
            source=source,
            qid=hit.qid,
            query=hit.query,
            documents=tuple(docs[i] for i in order),
            labels=tuple(labels[i] for i in order),
        )


def round_robin(
    data_dir: Path,
    tokenizer: object,
    sources: Sequence[str] = TRAINING_SOURCES,
    *,
    max_tokens: int = 128,
    per_source: int | None = None,
    seed: int = 13,
) -> list[RankingList]:
    """Lists of every source interleaved one by one, so any prefix of an extraction that stopped
    early holds every source about equally (a source that runs out leaves the rotation)."""
    per = [
        list(source_lists(s, data_dir, tokenizer, max_tokens=max_tokens, seed=seed))[:per_source]
        for s in sources
    ]
    out: list[RankingList] = []
    for i in range(max((len(p) for p in per), default=0)):
        out.extend(p[i] for p in per if i < len(p))
    return out


def dev_lists(
    data_dir: Path, tokenizer: object, *, top_k: int = 20, max_tokens: int = 128
) -> list[RankingList]:
    """The shared dev sets as lists: DL19 (NIST qrels, graded) and SciFact test (BM25 over the
    corpus), each query's BM25 top-``top_k`` in a seeded shuffle, read in windows of 20 in that
    order. Used to report, never to fit."""
    out: list[RankingList] = []
    dl19 = ds.load_dl19(data_dir / "trec-dl-2019", top_k=top_k)
    beir = ds.load_beir(data_dir / "scifact", "test")
    scifact = ds.bm25_candidates(beir.corpus, beir.queries, k=top_k)
    sets = (("dl19", dl19.queries, dl19.qrels), ("scifact", scifact, beir.qrels))
    for name, queries, qrels in sets:
        for q in queries:
            cands = list(q.candidates)
            random.Random(f"dev:{name}:{q.qid}").shuffle(cands)
            for w in range(0, len(cands), LIST_SIZE):
                window = cands[w : w + LIST_SIZE]
                out.append(
                    RankingList(
                        source=f"{name}-top{top_k}",
                        qid=q.qid,
                        query=q.query,
                        documents=tuple(
                            Document(
                                text=cut_to_tokens(c.text, tokenizer, max_tokens),
                                title=c.title or None,
                            )
                            for c in window
                        ),
                        labels=tuple(int(qrels.get(q.qid, {}).get(c.doc_id, 0)) for c in window),
                    )
                )
    return out


def cached_lists(
    name: str,
    build: Callable[[], list[RankingList]],
    *,
    tokenizer: str,
    cache_dir: str | Path | None = None,
) -> list[RankingList]:
    """``build()``'s lists, kept as JSON in
    ``<cache_dir>/rerank-lists/<name>-<tokenizer>.json`` (BM25 over the pools takes minutes;
    the lists are deterministic, so a rebuild gives the same). ``cache_dir`` is
    ``RAGATTN_CACHE_DIR`` as the edge read it, default ``~/.cache/ragattn``.

    Documents are cut to a number of *proxy* tokens, so the same name under another proxy's
    tokenizer is another set of lists: ``tokenizer`` (the proxy's name) is part of the key."""
    import json
    import os

    from ragattn.lab.cache_dirs import lab_cache_dir

    folder = lab_cache_dir(cache_dir, "rerank-lists")
    tag = re.sub(r"[^A-Za-z0-9._-]+", "_", tokenizer)
    path = folder / f"{name}-{tag}.json"
    if path.is_file():
        rows = json.loads(path.read_text())
        return [
            RankingList(
                source=r["source"],
                qid=r["qid"],
                query=r["query"],
                documents=tuple(Document(text=t, title=h) for t, h in r["documents"]),
                labels=tuple(r["labels"]),
            )
            for r in rows
        ]
    lists = build()
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "source": r.source,
            "qid": r.qid,
            "query": r.query,
            "documents": [[d.text, d.title] for d in r.documents],
            "labels": list(r.labels),
        }
        for r in lists
    ]
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(rows))
    tmp.replace(path)
    return lists
