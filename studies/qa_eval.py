"""End-to-end RAG on the shared HotpotQA distractor dev slice: answer EM/F1 per context order,
with and without compression, and supporting-fact recall of the context the generator sees.

Corpus: every paragraph of the shared distractor questions pooled into one index (52 questions x 10
paragraphs = 520, deduplicated by title), so each question retrieves among the gold and distractor
paragraphs of *all* questions, not only its own ten: a small open-retrieval setting. (The shared
fullwiki file holds the same questions with TF-IDF-retrieved paragraphs whose gold is often
missing, so the pooled distractor paragraphs are the cleaner corpus for a pipeline comparison.)

Per question the pipeline retrieves ``top_k`` (hybrid BM25 + MiniLM), reranks to ``top_n`` with the
default reranker, compresses to ``ratio`` with the default compressor, then the *local* generator
(the packaged SmolLM2-135M, greedy) answers six times: {whole passages, compressed} x {best_first,
best_last, edges}. Retrieval, reranking and compression run once per question and are shared by the
six generations, so the comparison isolates the context the generator sees.

Metrics: SQuAD-normalised exact match and token F1 against the gold answer (HotpotQA's rule: a
yes/no answer needs an exact match), "answer contained" (the normalised gold answer occurs in the
generated text as whole words: verbose answers of a tiny model still count); supporting-fact recall
= gold sentences whose title is among the ``top_n`` passages (whole) and of which at least half of
the characters are kept (compressed; ``ragattn.lab.evaluation.metrics.sentence_kept``).

    OMP_NUM_THREADS=1 nice -n 15 python studies/qa_eval.py --out docs/benchmarks/pipeline.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ragattn.generate import LocalGenerator
from ragattn.lab.evaluation.metrics import contains_answer, normalize_answer, sentence_kept
from ragattn.pipeline import ORDERS, PipelineOptions, PreparedContext, RAGPipeline
from ragattn.types import Document

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "hotpotqa"
    / "hotpot_dev_distractor_v1.shared.json"
)


def exact_match(prediction: str, gold: str) -> float:
    """SQuAD exact match after normalisation (lower case, no punctuation/articles)."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """SQuAD token F1 after normalisation; yes/no/noanswer gold needs an exact match (HotpotQA)."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if ref in {"yes", "no", "noanswer"} or pred in {"yes", "no", "noanswer"}:
        return float(pred == ref)
    common = Counter(pred.split()) & Counter(ref.split())
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred.split()), same / len(ref.split())
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True, slots=True)
class Paragraph:
    title: str
    text: str
    spans: tuple[tuple[int, int], ...]


def read_corpus(records: list[dict]) -> tuple[dict[str, Paragraph], int]:
    """Paragraphs by title with each sentence's character span; counts conflicting duplicates."""
    paragraphs: dict[str, Paragraph] = {}
    conflicts = 0
    for record in records:
        for title, sentences in record["context"]:
            spans, cursor = [], 0
            for s in sentences:
                spans.append((cursor, cursor + len(s)))
                cursor += len(s)
            para = Paragraph(title=title, text="".join(sentences), spans=tuple(spans))
            known = paragraphs.setdefault(title, para)
            conflicts += known.text != para.text
    return paragraphs, conflicts


def sf_recall(
    prepared: PreparedContext, supporting: list[list], paragraphs: dict[str, Paragraph]
) -> tuple[float, float]:
    """Supporting-fact recall of the whole top-n passages and of the compressed ones."""
    by_title = {s.id: s for s in prepared.sources}
    whole = kept = 0
    for title, sent in supporting:
        para = paragraphs.get(title)
        if para is None or sent >= len(para.spans) or title not in by_title:
            continue
        whole += 1
        spans = [(k.start, k.end) for k in by_title[title].kept_spans]
        kept += sentence_kept(para.spans[sent], spans)
    total = len(supporting)
    return whole / total, kept / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--limit", type=int, default=15, help="first N questions (default 15, ~12 min; 0 = all 52)"
    )
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--top-n", type=int, default=5)
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown report here")
    ap.add_argument("--json", type=Path, default=None, help="write per-question results here")
    args = ap.parse_args(argv)

    from ragattn import Compressor, Reranker, load_proxy
    from ragattn.retrieve import Index

    all_records = json.loads(args.data.read_text(encoding="utf-8"))
    records = all_records[: args.limit] if args.limit else all_records
    paragraphs, conflicts = read_corpus(all_records)
    docs = [Document(text=p.text, id=t, title=t) for t, p in paragraphs.items()]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        index = Index.build(docs, Path(tmp) / "hotpot-index", chunk_words=None)
    build_s = time.perf_counter() - started
    proxy = load_proxy(threads=args.threads)
    generator = LocalGenerator(proxy, max_new_tokens=args.max_new_tokens)
    pipeline = RAGPipeline(
        index, generator=generator, reranker=Reranker(proxy), compressor=Compressor(proxy)
    )
    opts = PipelineOptions(top_k=args.top_k, top_n=args.top_n, ratio=args.ratio)
    variants = [(order, comp) for comp in (False, True) for order in ORDERS]
    scores: dict[tuple[str, bool], list[tuple[float, float, float]]] = {v: [] for v in variants}
    recall_whole, recall_kept, ratios, gen_s, rows = [], [], [], [], []
    for n, record in enumerate(records, start=1):
        prepared = pipeline.prepare(record["question"], opts)
        whole, kept = sf_recall(prepared, record["supporting_facts"], paragraphs)
        recall_whole.append(whole)
        recall_kept.append(kept)
        ratios.append(prepared.tokens_after / max(prepared.tokens_before, 1))
        row = {"id": record["_id"], "answer": record["answer"], "sf_whole": whole, "sf_kept": kept}
        for order, comp in variants:
            answer = generator.generate(
                record["question"], prepared.passages(order, compressed=comp)
            )
            gen_s.append(answer.seconds)
            em = exact_match(answer.text, record["answer"])
            f1 = f1_score(answer.text, record["answer"])
            hit = float(contains_answer(answer.text, [record["answer"]]))
            scores[(order, comp)].append((em, f1, hit))
            row[f"{order}/{'compressed' if comp else 'whole'}"] = answer.text
        rows.append(row)
        print(f"{n}/{len(records)} {time.perf_counter() - started:.0f}s", file=sys.stderr)

    total_s = time.perf_counter() - started
    table = [
        "| context | order | EM | F1 | answer contained |",
        "|---|---|---|---|---|",
    ]
    for order, comp in variants:
        em = statistics.mean(s[0] for s in scores[(order, comp)])
        f1 = statistics.mean(s[1] for s in scores[(order, comp)])
        contained = statistics.mean(s[2] for s in scores[(order, comp)])
        label = f"compressed (ratio {args.ratio})" if comp else f"whole top-{args.top_n}"
        table.append(f"| {label} | {order} | {em:.3f} | {f1:.3f} | {contained:.3f} |")
    best = max(variants, key=lambda v: statistics.mean(s[1] for s in scores[v]))
    summary = [
        f"questions: {len(records)}; corpus: {len(docs)} pooled paragraphs "
        f"({conflicts} conflicting duplicates); index build {build_s:.0f} s",
        f"supporting-fact recall: whole top-{args.top_n} {statistics.mean(recall_whole):.3f}, "
        f"compressed {statistics.mean(recall_kept):.3f} "
        f"(mean tokens kept {statistics.mean(ratios):.3f})",
        f"best F1: {best[0]} ({'compressed' if best[1] else 'whole'}); "
        f"mean generation {statistics.mean(gen_s):.2f} s; total {total_s / 60:.1f} min",
    ]
    command = "OMP_NUM_THREADS=1 nice -n 15 python studies/qa_eval.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:])
    )
    report = "\n".join([*table, "", *summary, "", f"command: `{command.strip()}`"])
    print(report)
    if args.out:
        args.out.write_text(report + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
