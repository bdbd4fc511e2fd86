"""The first screen under both selections: which multi-document cases keep their answer sentences,
and what the demo screen scores (BENCHMARKS.md §3, "Document-aware selection", the first-screen
table and the demo-screen paragraph).

For each fresh case of ``tests/data/multidoc_cases.json`` and for the six demo passages, at the
demo's 30 % budget: whether every answer sentence is kept under ``selection="sentences"`` and under
``selection="documents"`` (the default). Then the demo screen as ``ragattn demo`` shows it (the
default reranker's top three, compressed to 30 %): every sentence's document-aware keep score and
its length in proxy tokens, and the budget in tokens.

    python studies/first_screen.py --dtype float32 --threads 2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ragattn import Compressor, Reranker, load_proxy
from ragattn.demo import DOCUMENTS, QUERY
from ragattn.types import CompressionResult, Document

CASES = Path(__file__).resolve().parents[1] / "tests" / "data" / "multidoc_cases.json"
RATIO = 0.3
COMPLETION = "completed on 31 March 1889"


def _sentence_scores(result: CompressionResult) -> dict[str, float]:
    """Every sentence's keep score in a compression result, by its text."""
    return {
        doc.document.text[start:end]: float(score)
        for doc in result.documents
        for (start, end), score in zip(doc.sentence_spans, doc.sentence_scores, strict=True)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    proxy = load_proxy("smollm2-135m", dtype=args.dtype, threads=args.threads)
    print(f"cpu capability {torch.backends.cpu.get_cpu_capability()}, dtype {proxy.dtype}")
    compressors = {s: Compressor(proxy, selection=s) for s in ("sentences", "documents")}
    cases = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    print(
        "| case | sentences | documents | documents: answer keep score | documents: distractor |"
        "\n|---|---|---|---|---|"
    )
    answered = dict.fromkeys(compressors, 0)
    for case in cases:
        docs = [Document(id=d["id"], title=d["title"], text=d["text"]) for d in case["documents"]]
        row = []
        for name, comp in compressors.items():
            out = comp.compress(case["query"], docs, ratio=RATIO)
            ok = all(s in out.compressed_text for s in case["keep"])
            answered[name] += ok
            row.append("yes" if ok else "no")
        scores = _sentence_scores(out)  # the last compressor: documents
        row.append(", ".join(f"{scores[s]:.3f}" for s in case["keep"]))
        row.append(f"{scores[case['distractor']]:.3f}")
        print(f"| {case['id']} | {' | '.join(row)} |")
    row = []
    for name, comp in compressors.items():
        ok = COMPLETION in comp.compress(QUERY, list(DOCUMENTS), ratio=RATIO).compressed_text
        answered[name] += ok
        row.append("yes" if ok else "no")
    print(f"| demo passages, all six | {' | '.join(row)} |")
    total = len(cases) + 1
    print("answered: " + ", ".join(f"{k} {v} of {total}" for k, v in answered.items()))

    ranked = [r.document for r in Reranker(proxy).rerank(QUERY, DOCUMENTS, top_n=3)]
    out = compressors["documents"].compress(QUERY, ranked, ratio=RATIO)
    print(
        f"\ndemo screen: {out.origin_tokens} tokens, budget {int(RATIO * out.origin_tokens)} "
        f"tokens, kept {out.compressed_tokens}; "
        f"completion date kept: {COMPLETION in out.compressed_text}"
    )
    for sentence, score in _sentence_scores(out).items():
        n = len(proxy.tokenizer(sentence, add_special_tokens=False).input_ids)
        print(f"  {score:.3f}  {n:3d} tokens  {sentence}")


if __name__ == "__main__":
    main()
