"""The standalone reranker outside English: nDCG@10 and MRR of each candidate per language.

The rule (declared before measuring, docs/research/languages.md, "The standalone reranker outside
English"): XQuAD, one question per article over its article's paragraphs (48 a language), and
DRCD's first 48 articles; the paragraphs passed as plain strings (no title) in a shuffle seeded by
the question id, query and documents only; a paragraph is relevant when it contains an answer
string verbatim. The choice is the best mean nDCG@10 over de, zh, ar, ru, es, hi among candidates
that rerank 20 passages of 128 tokens in at most 1.0 s (``--cost``: 20 German XQuAD paragraphs
cut to 128 Gemma tokens, the median of 3 timed calls after one warm-up). MiniLM's vector cache is
off, so every call pays its encoder (seconds are those of a new call).

Candidates (``--method``): ``minilm``, ``bm25``, ``fused-no-attention`` (rerank methods with no
proxy forward), ``attention-probe@gemma3-270m`` (a rerank method on a named proxy) and
``one-read@gemma3-270m`` (the multilingual compressor's one-pass ranking,
``rerank_and_compress`` on Gemma with the BM25 first pass). Every rerank method reads with
``multilingual=None``: the method named ranks every language.

    python studies/rerank_languages.py --data-dir DATA [--set de --set drcd ...]
        [--method minilm,bm25] [--limit 48] [--threads 2] [--cost] [--out report.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ragattn.lab.evaluation import datasets as ds
from ragattn.lab.evaluation.metrics import list_ndcg_at_10
from ragattn.types import Document

CHOICE = ("de", "zh", "ar", "ru", "es", "hi")
HELD_OUT = ("el", "ro", "th", "tr", "vi", "drcd")
ENGLISH = ("en",)
METHODS = "minilm,bm25,fused-no-attention,attention-probe@gemma3-270m,one-read@gemma3-270m"
SEED = 13

Ranker = Callable[[str, Sequence[Document]], np.ndarray]
"""Raw scores (higher = better) aligned with the documents."""


def ranker(name: str, threads: int | None) -> Ranker:
    """The candidate ``name`` as a function of query and documents."""
    if name.startswith("one-read@"):
        from ragattn.compress import Compressor

        compressor = Compressor(
            name.split("@", 1)[1], threads=threads, multilingual=None, first_pass="bm25"
        )

        def read(query: str, docs: Sequence[Document]) -> np.ndarray:
            ranked, _ = compressor.rerank_and_compress(query, list(docs), ratio=1.0)
            raw = np.zeros(len(docs))
            for r in ranked:
                raw[r.index] = r.raw_score
            return raw

        return read
    from ragattn.proxy import DEFAULT_PROXY
    from ragattn.rerank import Reranker

    method, _, proxy = name.partition("@")
    reranker = Reranker(proxy or DEFAULT_PROXY, method=method, threads=threads, multilingual=None)
    return lambda query, docs: np.asarray(reranker.score(query, docs).raw, dtype=np.float64)


def lists(
    set_name: str, data_dir: Path, limit: int
) -> list[tuple[str, list[Document], np.ndarray]]:
    """``(query, documents in the seeded shuffle, gains)`` per question of a set."""
    path = (
        data_dir / "drcd" / "DRCD_test.json"
        if set_name == "drcd"
        else data_dir / "xquad" / f"xquad.{set_name}.json"
    )
    out = []
    for ex in ds.load_xquad_articles(path, limit):
        texts = [p.text for p in ex.passages]
        random.Random(f"{SEED}:{ex.qid}").shuffle(texts)
        gains = np.asarray([int(any(a in t for a in ex.answers)) for t in texts])
        out.append((ex.question, [Document(text=t) for t in texts], gains))
    return out


def first_relevant(scores: Sequence[np.ndarray], gains: Sequence[np.ndarray]) -> list[int]:
    """Per list, the 1-based rank of its first relevant item (ties: the earlier item first; 0
    for a list without one)."""
    ranks = []
    for s, g in zip(scores, gains, strict=True):
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))
        ranks.append(next((r for r, i in enumerate(order, 1) if g[i] > 0), 0))
    return ranks


def mrr(scores: Sequence[np.ndarray], gains: Sequence[np.ndarray]) -> float:
    """Mean reciprocal rank of the first relevant item (a list without one counts 0)."""
    return float(np.mean([1.0 / r if r else 0.0 for r in first_relevant(scores, gains)]))


def cost(rank: Ranker, data_dir: Path) -> float:
    """Median seconds of 3 calls (after one warm-up) over 20 German XQuAD paragraphs cut to 128
    Gemma-3-270M tokens, with the first question as the query."""
    from ragattn.proxy import MULTILINGUAL_PROXY, load_tokenizer

    tokenizer = load_tokenizer(MULTILINGUAL_PROXY)
    examples = ds.load_xquad_articles(data_dir / "xquad" / "xquad.de.json", 8)
    paragraphs = [p.text for ex in examples for p in ex.passages][:20]
    docs = []
    for text in paragraphs:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = enc["offset_mapping"]
        docs.append(Document(text=text[: offsets[min(len(offsets), 128) - 1][1]]))
    query = examples[0].question
    rank(query, docs)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        rank(query, docs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--set", action="append", dest="sets")
    parser.add_argument("--method", default=METHODS)
    parser.add_argument("--limit", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from ragattn.embed import shared_embedder

    # No vector is reused between calls: every timing pays MiniLM's forward, as a new call would.
    shared_embedder().cache_size = 0
    sets = args.sets or [*CHOICE, *HELD_OUT, *ENGLISH]
    names = [m.strip() for m in args.method.split(",") if m.strip()]
    data = {s: lists(s, args.data_dir, args.limit) for s in sets}
    report: dict[str, dict[str, object]] = {}
    for name in names:
        rank = ranker(name, args.threads)
        row: dict[str, object] = {}
        for s, items in data.items():
            start = time.perf_counter()
            scores = [rank(q, docs) for q, docs, _ in items]
            seconds = (time.perf_counter() - start) / len(items)
            gains = [g for _, _, g in items]
            ndcg = float(np.mean(list_ndcg_at_10(scores, gains)))
            row[s] = {
                "ndcg10": ndcg,
                "mrr": mrr(scores, gains),
                "s_per_q": seconds,
                "first_relevant": first_relevant(scores, gains),
            }
            print(
                f"{name} {s}: nDCG@10 {ndcg:.4f} MRR {row[s]['mrr']:.4f} {seconds:.3f} s/q",
                flush=True,
            )
        chosen = [row[s]["ndcg10"] for s in CHOICE if s in row]  # type: ignore[index]
        if chosen:
            row["choice_mean_ndcg10"] = float(np.mean(chosen))
            print(
                f"{name} mean nDCG@10 over the choice languages: {row['choice_mean_ndcg10']:.4f}",
                flush=True,
            )
        if args.cost:
            row["cost_20x128_s"] = cost(rank, args.data_dir)
            print(f"{name} 20x128: {row['cost_20x128_s']:.3f} s", flush=True)
        report[name] = row
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
