"""The lexical cascade's curve on training questions (BENCHMARKS.md §3, "A lexical cascade").

Before the proxy reads a long context, a cheap scorer ranks its sentences and only the best ones,
``keep`` of the context's proxy tokens, are read by attention. A gold sentence the cascade drops can
never be kept, so the share of gold sentences dropped bounds the recall the cascade can cost at any
budget (a dropped non-gold sentence only frees room). This script measures that bound on the
training questions of ``ragattn probe train`` (never on an evaluation question), for two cheap
scorers:

- ``lexical``: the packaged ``lexical`` probe (BM25, MiniLM cosine, position, length; its weights
  were fitted on the same training questions, so its ranking here is in-sample);
- ``bm25``: BM25 over the context's sentences alone (no model at all);
- ``documents``: each sentence scored by its document's MiniLM cosine to the query (whole
  documents are kept, best first; the cosine the document-aware selection reads anyway);
- any of them with ``+links`` (``lexical+links``): the sentences of the documents that the query
  or a kept sentence names by title are kept first (:func:`ragattn.compress.cascade.keep_linked`).

For every ``keep`` share of tokens it prints the mean per-question share of gold sentences dropped
(the recall bound, in points of recall), the share of questions that lose any gold sentence, and
the mean share of tokens attention still reads; only questions whose context has at least
``--min-tokens`` proxy tokens count (the cascade applies to long contexts only).

With ``--attention``, the bound is replaced by the measurement: the default compressor
(``sentinel``, document-aware) compresses each long question to 20 % once on the whole context
and once behind each cascade, and the table gives its supporting-sentence recall (gold sentences
kept, pooled per question, then averaged) and the change against the whole context. This runs the
proxy: about 5 s per question and cascade on 2 AVX2 cores in fp32.

    python studies/cascade_curve.py --min-tokens 1024
    python studies/cascade_curve.py --min-tokens 1024 --limit 400 --attention --keeps 0.5,0.7,0.9
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from ragattn.assets import default_models_dir
from ragattn.compress import Compressor
from ragattn.compress.cascade import Cascade, keep_by_tokens, keep_linked, unit_cosines
from ragattn.compress.model_files import probe_path
from ragattn.compress.probe import Probe
from ragattn.compress.registry import PROBE_METHODS
from ragattn.compress.scorers import ProbeScorer
from ragattn.embed import document_cosines
from ragattn.lab.evaluation.metrics import supporting_fact_recall
from ragattn.lab.probe_training import LabelledExample, load_training, units_and_labels
from ragattn.lexical import bm25_scores
from ragattn.proxy import DEFAULT_PROXY, load_tokenizer

KEEPS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
BUDGET = 0.2


def measured_recall(compressor: Compressor, ex: LabelledExample) -> tuple[float, bool]:
    """Supporting-sentence recall of one compression to 20 % and whether the cascade cut it."""
    result = compressor.compress(ex.question, list(ex.documents), ratio=BUDGET)
    kept = [[(k.start, k.end) for k in doc.kept_spans] for doc in result.documents]
    recall = supporting_fact_recall(kept, ex.gold)
    assert recall is not None
    return recall, any(w.startswith("the cascade") for w in result.warnings)


def print_measured(measured: dict[str, list[tuple[float, bool]]]) -> None:
    """The measured table: recall at 20 % on the whole context and behind each cascade."""
    whole = np.array([r for r, _ in measured["whole"]])
    print("| context read | recall @20 % | change, pts | questions cut | questions changed |")
    print("|---|---|---|---|---|")
    print(f"| whole | {whole.mean():.4f} | - | - | - |")
    for key, vals in measured.items():
        if key == "whole":
            continue
        rec = np.array([r for r, _ in vals])
        cut = np.mean([c for _, c in vals])
        changed = np.mean(np.abs(rec - whole) > 1e-9)
        print(
            f"| cascade {key} | {rec.mean():.4f} | {100 * (rec.mean() - whole.mean()):+.2f} "
            f"| {100 * cut:.0f} % | {100 * changed:.0f} % |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--min-tokens", type=int, default=1024)
    parser.add_argument("--limit", type=int, default=None, help="first N training questions")
    parser.add_argument("--attention", action="store_true", help="measure recall with the proxy")
    parser.add_argument("--keeps", default=",".join(map(str, KEEPS)))
    parser.add_argument("--scorers", default="lexical,bm25,documents")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON lines of measured recalls (resumed)"
    )
    args = parser.parse_args()
    keeps = [float(k) for k in args.keeps.split(",")]
    scorer_names = args.scorers.split(",")
    tokenizer = load_tokenizer(DEFAULT_PROXY)
    probe = Probe.load(probe_path(default_models_dir(), DEFAULT_PROXY, "lexical"))
    lexical = ProbeScorer(None, probe, PROBE_METHODS["lexical"], max_chunk_tokens=2048)
    examples = load_training(args.data)[: args.limit]
    compressors: dict[str, Compressor] = {}
    if args.attention:
        compressors["whole"] = Compressor(threads=args.threads, cascade=None)
        proxy = compressors["whole"].proxy
        print(f"capability {torch.backends.cpu.get_cpu_capability()}, dtype {proxy.dtype}")
        for name in scorer_names:
            for keep in keeps:
                cascade = Cascade.parse(f"{keep}:{name}", min_tokens=args.min_tokens)
                compressors[f"{name}:{keep}"] = Compressor(proxy, cascade=cascade)
    measured: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    done: dict[str, dict[str, tuple[float, bool]]] = {}
    if args.attention and args.out is not None and args.out.is_file():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            done.setdefault(row["question"], {}).update(
                {k: (float(v[0]), bool(v[1])) for k, v in row["recall"].items()}
            )
    # rows[scorer][keep] -> list of (dropped gold share, any gold dropped, read token share, source)
    rows: dict[str, dict[float, list[tuple[float, float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    sources: dict[str, int] = defaultdict(int)
    long_questions = 0
    for ex in tqdm(examples, desc="training questions", unit="q"):
        units, labels = units_and_labels(ex)
        if labels.sum() == 0:
            continue
        texts = [ex.documents[u.doc].text[u.start : u.end] for u in units]
        costs = np.array([len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts])
        if costs.sum() < args.min_tokens:
            continue
        long_questions += 1
        sources[ex.source] += 1
        if args.attention:
            row = done.setdefault(f"{ex.source}:{ex.question}", {})
            fresh = {k: measured_recall(c, ex) for k, c in compressors.items() if k not in row}
            row.update(fresh)
            if fresh and args.out is not None:
                with args.out.open("a") as fh:
                    line = {"question": f"{ex.source}:{ex.question}", "recall": fresh}
                    fh.write(json.dumps(line) + "\n")
            for k in compressors:
                measured[k].append(row[k])
            continue
        gold = labels.astype(bool)
        for name in scorer_names:
            first, _, links = name.partition("+")
            if first == "lexical":
                score = lexical.score(ex.question, list(ex.documents), units)[0]
            elif first == "bm25":
                score = bm25_scores(ex.question, texts)
            else:
                score = unit_cosines(units, document_cosines(ex.question, list(ex.documents)))
            for keep in keeps:
                kept = np.zeros(len(units), dtype=bool)
                if links:
                    docs = list(ex.documents)
                    kept[keep_linked(ex.question, docs, units, score, costs, keep)] = True
                else:
                    kept[keep_by_tokens(score, costs, keep)] = True
                lost = float((gold & ~kept).sum() / gold.sum())
                read = float(costs[kept].sum() / costs.sum())
                rows[name][keep].append((lost, float(lost > 0), read))
    print(
        f"{long_questions} training questions with >= {args.min_tokens} proxy tokens and a gold "
        f"sentence ({dict(sources)})\n"
    )
    if args.attention:
        print_measured(measured)
        return
    print(
        "| scorer | keep (token share) | gold dropped, mean pts | questions losing gold | "
        "tokens read |"
    )
    print("|---|---|---|---|---|")
    for name, per_keep in rows.items():
        for keep, vals in sorted(per_keep.items()):
            arr = np.array(vals)
            print(
                f"| {name} | {keep:.1f} | {100 * arr[:, 0].mean():.2f} | "
                f"{100 * arr[:, 1].mean():.1f} % | {100 * arr[:, 2].mean():.1f} % |"
            )


if __name__ == "__main__":
    main()
