"""Dump the one read's outputs (results without their seconds, rankings) for fixed inputs, so that
two code states can be compared byte for byte: the check that the read's ``candidates`` stage
(issue 50) changed no answer.

Inputs: 100 and 20 fullwiki paragraphs and 20 SciFact abstracts (titled), the 20 paragraphs as plain
strings; the default read at ratio 0.2, ratio 0.2 with at most 1,024 tokens and 256 tokens, the
``dense=pooled`` cascade and ``selection="sentences"`` at ratio 0.2; MiniLM's LRU on and off.

    PYTHONPATH=<old checkout> python studies/read_equality.py /tmp/old.json
    python studies/read_equality.py /tmp/new.json && cmp /tmp/old.json /tmp/new.json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragattn.compress import Compressor
from ragattn.compress.cascade import DEFAULT_CASCADE
from ragattn.embed import shared_embedder
from ragattn.lab.evaluation.datasets import fullwiki_paragraph_sets, load_scifact_retrieved
from ragattn.proxy import load_proxy
from ragattn.types import Budget, Document

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BUDGETS = (
    Budget(kind="ratio", value=0.2),
    Budget(kind="ratio", value=0.2, max_tokens=1024),
    Budget(kind="tokens", value=256),
)


def inputs_of(data: Path) -> list[tuple[str, list[Document]]]:
    """100 and 20 fullwiki paragraphs, 20 SciFact abstracts, and the 20 paragraphs untitled."""
    fullwiki = data / "hotpotqa" / "hotpot_dev_fullwiki_v1.shared.json"
    inputs = fullwiki_paragraph_sets(fullwiki, 100, 1, skip=100)
    inputs += fullwiki_paragraph_sets(fullwiki, 20, 1, skip=250)
    for ex in load_scifact_retrieved(data / "scifact", "test", 20, 1):
        docs = [Document(text=p.text, title=p.title or None) for p in ex.passages]
        inputs.append((ex.question, docs))
    query, docs = inputs[1]
    inputs.append((query, [Document(text=d.text) for d in docs]))
    return inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the JSON dump goes")
    parser.add_argument("--data-dir", type=Path, default=DATA)
    args = parser.parse_args()
    proxy = load_proxy("smollm2-135m", threads=2)
    inputs = inputs_of(args.data_dir)
    compressors = {
        "default": Compressor(proxy),
        "pooled": Compressor(proxy, cascade=replace(DEFAULT_CASCADE, dense="pooled")),
        "sentences": Compressor(proxy, selection="sentences"),
    }
    out: list[dict[str, Any]] = []
    for lru in (True, False):
        shared_embedder().cache_size = 8192 if lru else 0
        for name, compressor in compressors.items():
            full = name == "default" and lru  # every input and budget; the others a sample
            for query, docs in inputs if full else inputs[:2]:
                for budget in BUDGETS if full else BUDGETS[:1]:
                    ranked, result = compressor.rerank_and_compress(query, docs, budget=budget)
                    kept = result.to_dict()
                    kept.pop("stage_seconds", None)
                    scores = [(r.index, r.raw_score, r.relevance_score) for r in ranked]
                    out.append({"name": name, "lru": lru, "ranked": scores, "result": kept})
                    alone = compressor.compress(query, docs, budget=budget).to_dict()
                    alone.pop("stage_seconds", None)
                    out.append({"name": name, "lru": lru, "compress": alone})
    args.out.write_text(json.dumps(out, default=str))
    print(f"{len(out)} results in {args.out}")


if __name__ == "__main__":
    main()
