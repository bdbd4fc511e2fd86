"""Typed loaders for the shared evaluation data (reranking and sentence-level compression).

Every loader reads the file layout documented in the README.md of its folder under the shared
data directory and returns frozen dataclasses, so the harness never touches raw JSON. Passage
texts built from pre-split sentences (2Wiki, HotpotQA, SciFact) are the stripped sentences joined
with single spaces; each sentence's ``(start, end)`` character span slices back to exactly that
stripped sentence. Texts that come whole (SQuAD, MuSiQue) are split with
:func:`ragattn.sentences.split_sentences`.
"""

from __future__ import annotations

from ragattn.lab.evaluation.datasets.qa import (
    DataSplit,
    Passage,
    QAExample,
    Span,
    fullwiki_paragraph_sets,
    joined_passage,
    load_2wiki,
    load_hotpot,
    load_musique,
    load_scifact_rationales,
    load_scifact_retrieved,
    load_squad,
    load_squad_articles,
    load_xquad_articles,
    split_for_training,
    split_passage,
)
from ragattn.lab.evaluation.datasets.ranking import (
    BeirDataset,
    Candidate,
    CorpusDoc,
    RerankQuery,
    RerankSet,
    bm25_candidates,
    load_beir,
    load_candidates,
    load_dl19,
)
from ragattn.lab.evaluation.datasets.readers import (
    Qrels,
    read_beir_qrels,
    read_json,
    read_jsonl,
    read_trec_qrels,
)
from ragattn.lab.evaluation.datasets.techdocs import load_techdocs

__all__ = [
    "BeirDataset",
    "Candidate",
    "CorpusDoc",
    "DataSplit",
    "Passage",
    "QAExample",
    "Qrels",
    "RerankQuery",
    "RerankSet",
    "Span",
    "bm25_candidates",
    "fullwiki_paragraph_sets",
    "joined_passage",
    "load_2wiki",
    "load_beir",
    "load_candidates",
    "load_dl19",
    "load_hotpot",
    "load_musique",
    "load_scifact_rationales",
    "load_scifact_retrieved",
    "load_squad",
    "load_squad_articles",
    "load_techdocs",
    "load_xquad_articles",
    "read_beir_qrels",
    "read_json",
    "read_jsonl",
    "read_trec_qrels",
    "split_for_training",
    "split_passage",
]
