"""The compression probe's one-pass document score as a rerank fusion feature (issue 19, item 5-6).

A document's probe score is its best sentence's keep probability under the compress method
(``Compressor.rerank_and_compress``: one scoring pass for rerank and compress). The fusion is an
order-free logistic regression over per-list z-scores of that score, candidate-local BM25 and
MiniLM, as ``fused-no-attention`` is without the probe. Its weights are fitted on MuSiQue train
lists only: the compression probe itself was trained on sentences of the HotpotQA, 2Wiki, SciFact,
NQ and SQuAD training sources, so its scores on those lists would be optimistic.

Evaluation: DL19 BM25 top-K, nDCG@10 (trec_eval semantics), candidates in a seeded shuffle (no
first-stage order), and the obvious cases' half for choosing
(``tests/data/obvious_cases_choose.json``, 4 orders).

    python studies/probe_rerank_fusion.py --train 40 --top-k 20 --out fusion.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ragattn.compress import DEFAULT_METHOD, Compressor
from ragattn.lab.evaluation.datasets import load_candidates
from ragattn.lab.evaluation.metrics import ndcg_at_10
from ragattn.lab.rerank_training import load_rerank_training
from ragattn.proxy import load_proxy
from ragattn.rerank.features import bm25_local, dense_local, zscore
from ragattn.types import Document

sys.path.insert(0, str(Path(__file__).resolve().parent))
from obvious_cases import CASES, orders  # noqa: E402


def list_features(comp: Compressor, query: str, docs: list[Document]) -> dict[str, list[float]]:
    """The three per-document features of one list (raw, not yet z-scored)."""
    ranked, _ = comp.rerank_and_compress(query, docs, ratio=1.0)
    probe = np.zeros(len(docs))
    for r in ranked:
        probe[r.index] = r.raw_score
    return {
        "probe": probe.tolist(),
        "bm25": bm25_local(query, docs).tolist(),
        "dense": dense_local(query, docs).tolist(),
    }


def design(feats: dict[str, list[float]], columns: tuple[str, ...]) -> np.ndarray:
    """``[n_docs, len(columns)]``: the named features, each z-scored within the list."""
    return np.stack([zscore(np.asarray(feats[c])) for c in columns], axis=1)


FUSIONS = {
    "probe+bm25+minilm": ("probe", "bm25", "dense"),
    "probe+minilm": ("probe", "dense"),
    "bm25+minilm (fused-no-attention, order-free)": ("bm25", "dense"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument(
        "--method", default=DEFAULT_METHOD, help="The compress probe method (default: the default)."
    )
    parser.add_argument("--train", type=int, default=40, help="MuSiQue train lists for the fit.")
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--limit", type=int, default=None, help="First N DL19 queries.")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from sklearn.linear_model import LogisticRegression

    capability = torch.backends.cpu.get_cpu_capability()
    print(f"cpu capability {capability}", flush=True)
    proxy = load_proxy(threads=2)
    comp = Compressor(proxy, method=args.method)

    started = time.perf_counter()
    train = [
        ex
        for ex in load_rerank_training(args.data, per_source=args.train)
        if ex.source == "musique-train"
    ]
    train_feats = [list_features(comp, ex.query, list(ex.documents)) for ex in train]
    train_labels = [np.asarray(ex.labels) for ex in train]
    train_s = time.perf_counter() - started
    weights = {}
    for name, columns in FUSIONS.items():
        x = np.concatenate([design(f, columns) for f in train_feats])
        y = np.concatenate(train_labels)
        model = LogisticRegression(C=1.0, max_iter=1000, class_weight="balanced").fit(x, y)
        weights[name] = (model.coef_[0].tolist(), float(model.intercept_[0]))
    print("fusion weights (z-scored columns in order)", json.dumps(weights), flush=True)

    folder = args.data / "trec-dl-2019"
    rset = load_candidates(
        folder / "candidates_bm25_top100.jsonl", folder / "qrels.trec.txt", top_k=args.top_k
    )
    queries = rset.queries[: args.limit]
    runs: dict[str, dict[str, dict[str, float]]] = {
        k: {} for k in ["minilm", f"compress:{args.method}", *FUSIONS]
    }
    started = time.perf_counter()
    for q in queries:
        cands = list(q.candidates)
        random.Random(f"13:{q.qid}").shuffle(cands)
        docs = [Document(text=c.text, id=c.doc_id, title=c.title or None) for c in cands]
        feats = list_features(comp, q.query, docs)
        ids = [c.doc_id for c in cands]
        runs["minilm"][q.qid] = dict(zip(ids, feats["dense"], strict=True))
        runs[f"compress:{args.method}"][q.qid] = dict(zip(ids, feats["probe"], strict=True))
        for name, columns in FUSIONS.items():
            coef, b = weights[name]
            raw = design(feats, columns) @ np.asarray(coef) + b
            runs[name][q.qid] = dict(zip(ids, raw.tolist(), strict=True))
    dl19_s = (time.perf_counter() - started) / len(queries)
    qrels = {qid: rset.qrels[qid] for qid in runs["minilm"] if qid in rset.qrels}
    dl19 = {name: ndcg_at_10(run, qrels)[0] for name, run in runs.items()}

    cases = json.loads(CASES.read_text())["cases"]
    obvious = {name: 0 for name in runs}
    trials = 0
    for case in cases:
        for docs_text in orders(case["relevant"], case["distractors"]):
            docs = [Document(text=t) for t in docs_text]
            feats = list_features(comp, case["query"], docs)
            rel = docs_text.index(case["relevant"])
            trials += 1
            obvious["minilm"] += int(np.argmax(feats["dense"]) == rel)
            obvious[f"compress:{args.method}"] += int(np.argmax(feats["probe"]) == rel)
            for name, columns in FUSIONS.items():
                coef, b = weights[name]
                raw = design(feats, columns) @ np.asarray(coef) + b
                obvious[name] += int(np.argmax(raw) == rel)

    print(
        f"\nDL19 top-{args.top_k}, {len(queries)} queries, shuffled candidates; fusion fitted on "
        f"{len(train)} MuSiQue train lists ({train_s:.0f} s); {dl19_s:.2f} s per DL19 query; "
        f"cpu capability {capability}"
    )
    print(f"| system | DL19 top-{args.top_k} nDCG@10 | obvious cases, relevant first |")
    print("|---|---|---|")
    for name in runs:
        print(f"| {name} | {dl19[name]:.4f} | {obvious[name]}/{trials} |")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "weights": weights,
                    "dl19": dl19,
                    "obvious": obvious,
                    "trials": trials,
                    "train_lists": len(train),
                    "top_k": args.top_k,
                    "seconds_per_dl19_query": dl19_s,
                    "cpu_capability": capability,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
