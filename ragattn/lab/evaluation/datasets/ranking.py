"""Reranking sets: queries with their first-stage candidates and the judgments that score them
(TREC DL19, BEIR folders, and a BM25 first stage over a BEIR corpus)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragattn.errors import InvalidInputError
from ragattn.lab.evaluation.datasets.readers import (
    Qrels,
    read_beir_qrels,
    read_jsonl,
    read_trec_qrels,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A first-stage candidate; ``first_stage_rank`` is 1-based, score in the retriever's units."""

    doc_id: str
    text: str
    title: str
    first_stage_score: float
    first_stage_rank: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankQuery:
    """A query with its first-stage candidates in first-stage order."""

    qid: str
    query: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RerankSet:
    """Queries to rerank plus the judgments that score them."""

    queries: tuple[RerankQuery, ...]
    qrels: Qrels


@dataclass(frozen=True, slots=True, kw_only=True)
class CorpusDoc:
    """One BEIR corpus document."""

    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BeirDataset:
    """A BEIR dataset restricted to one split: corpus, the split's queries and its qrels."""

    corpus: Mapping[str, CorpusDoc]
    queries: Mapping[str, str]
    qrels: Qrels


def load_dl19(path: str | Path, top_k: int = 100) -> RerankSet:
    """TREC DL 2019 passage queries with their BM25 top-``top_k`` candidates and the NIST qrels.

    Args:
        path: the ``trec-dl-2019`` folder (``candidates_bm25_top100.jsonl``, ``qrels.trec.txt``).
        top_k: how many BM25 candidates to keep per query (1..100).
    """
    if not 1 <= top_k <= 100:
        raise InvalidInputError(f"top_k must be in 1..100 for DL19, got {top_k}")
    folder = Path(path)
    return load_candidates(
        folder / "candidates_bm25_top100.jsonl", folder / "qrels.trec.txt", top_k
    )


def load_candidates(candidates: str | Path, qrels: str | Path, top_k: int = 100) -> RerankSet:
    """Queries with first-stage candidates from a JSONL file in the DL19 layout (one query per line:
    ``qid``, ``query``, ``candidates[{docid, text, bm25_score, rank}]``) and TREC qrels.

    Args:
        candidates: the JSONL file.
        qrels: a TREC qrels file (``qid 0 docid grade``).
        top_k: how many candidates to keep per query, by rank (>= 1).
    """
    if top_k < 1:
        raise InvalidInputError(f"top_k must be >= 1, got {top_k}")
    queries = []
    for row in read_jsonl(Path(candidates)):
        cands = sorted(row["candidates"], key=lambda c: c["rank"])[:top_k]
        queries.append(
            RerankQuery(
                qid=str(row["qid"]),
                query=row["query"],
                candidates=tuple(
                    Candidate(
                        doc_id=str(c["docid"]),
                        text=c["text"],
                        title=str(c.get("title") or ""),
                        first_stage_score=float(c.get("bm25_score", c.get("score", 0.0))),
                        first_stage_rank=int(c["rank"]),
                    )
                    for c in cands
                ),
            )
        )
    return RerankSet(queries=tuple(queries), qrels=read_trec_qrels(qrels))


def load_beir(path: str | Path, split: Literal["test", "train", "dev"] = "test") -> BeirDataset:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``), one split.

    Only queries with judgments in ``qrels/<split>.tsv`` are returned.
    """
    folder = Path(path)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise InvalidInputError(
            f"{qrels_path} does not exist; valid splits have a qrels/<split>.tsv"
        )
    qrels = read_beir_qrels(qrels_path)
    corpus = {
        str(d["_id"]): CorpusDoc(doc_id=str(d["_id"]), title=d.get("title") or "", text=d["text"])
        for d in read_jsonl(folder / "corpus.jsonl")
    }
    queries = {
        str(q["_id"]): q["text"]
        for q in read_jsonl(folder / "queries.jsonl")
        if str(q["_id"]) in qrels
    }
    return BeirDataset(corpus=corpus, queries=queries, qrels=qrels)


def bm25_candidates(
    corpus: Mapping[str, CorpusDoc], queries: Mapping[str, str], k: int = 100
) -> tuple[RerankQuery, ...]:
    """BM25 (bm25s, Lucene idf, English stopwords, no stemming) top-``k`` over ``title + text``.

    A small stand-in first stage so the harness runs on BEIR data without the retrieval module.
    """
    import bm25s

    doc_ids = list(corpus)
    texts = [f"{corpus[d].title} {corpus[d].text}".strip() for d in doc_ids]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    k = min(k, len(doc_ids))
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", show_progress=False)
    hits, scores = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    out = []
    for row, qid in enumerate(qids):
        cands = []
        for rank, (idx, score) in enumerate(zip(hits[row], scores[row], strict=True), start=1):
            doc = corpus[doc_ids[int(idx)]]
            cands.append(
                Candidate(
                    doc_id=doc.doc_id,
                    text=doc.text,
                    title=doc.title,
                    first_stage_score=float(score),
                    first_stage_rank=rank,
                )
            )
        out.append(RerankQuery(qid=qid, query=queries[qid], candidates=tuple(cands)))
    return tuple(out)


__all__ = [
    "BeirDataset",
    "Candidate",
    "CorpusDoc",
    "RerankQuery",
    "RerankSet",
    "bm25_candidates",
    "load_beir",
    "load_candidates",
    "load_dl19",
]
