"""Hit rates of the cached document blocks (``ragattn.blocks``) on a replay of the shared sets.

Each question's retrieved passages are read in file order through an LRU bounded in bytes, as the
service's block store would see them; a passage is a hit when its block is still held. Passages are
counted in proxy tokens (plus the block's one separator token), and a block costs
``bytes_per_token`` per token (fp32 keys and values of every layer: the default depth). No forward
runs, so the replay is cheap and exact about what repeats.

    python studies/block_replay.py --data ../shared/data --budgets-mb 64,256,1024,4096
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import torch

from ragattn.block_store import bytes_per_token
from ragattn.lab.evaluation import datasets
from ragattn.proxy import load_proxy


def streams(data: Path) -> Iterator[tuple[str, list[list[str]]]]:
    """Per set: the passages each question reads, in file order."""
    yield (
        "HotpotQA dev (distractor, 10 per question)",
        [
            [p.text for p in ex.passages]
            for ex in datasets.load_hotpot(data / "hotpotqa/hotpot_dev_distractor_v1.shared.json")
        ],
    )
    yield (
        "2Wiki dev sample (10 per question)",
        [
            [p.text for p in ex.passages]
            for ex in datasets.load_2wiki(data / "2wikimultihopqa/2wiki_dev_sample500.json")
        ],
    )
    yield (
        "SQuAD v2 dev (its paragraph)",
        [
            [p.text for p in ex.passages]
            for ex in datasets.load_squad(data / "squad-v2/dev-v2.0.shared.json")
        ],
    )
    dl19 = datasets.load_dl19(data / "trec-dl-2019", top_k=100)
    yield (
        "TREC DL19 (BM25 top-100)",
        [[c.text for c in q.candidates] for q in dl19.queries],
    )
    yield (
        "TREC DL19 (BM25 top-20)",
        [[c.text for c in q.candidates[:20]] for q in dl19.queries],
    )


def replay(
    questions: list[list[str]], tokens: dict[str, int], per_token: int, budget: int
) -> dict[str, float]:
    lru: OrderedDict[str, int] = OrderedDict()
    held = hits = reads = 0
    hit_tokens = read_tokens = 0
    for passages in questions:
        for text in passages:
            size = (tokens[text] + 1) * per_token
            reads += 1
            read_tokens += tokens[text]
            if text in lru:
                lru.move_to_end(text)
                hits += 1
                hit_tokens += tokens[text]
                continue
            if size > budget:
                continue
            lru[text] = size
            held += size
            while held > budget:
                _, freed = lru.popitem(last=False)
                held -= freed
    return {
        "reads": reads,
        "hit_rate": hits / max(1, reads),
        "token_hit_rate": hit_tokens / max(1, read_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--proxy", default="smollm2-135m")
    parser.add_argument("--budgets-mb", default="64,256,1024,4096")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    proxy = load_proxy(args.proxy)
    per_token = bytes_per_token(proxy)
    budgets = [int(float(b) * 2**20) for b in args.budgets_mb.split(",")]
    print(
        f"bytes per token {per_token} ({proxy.num_layers} layers, dtype {proxy.dtype}); "
        f"10,000 passages of 150 tokens: {10_000 * 151 * per_token / 2**30:.1f} GiB; "
        f"cpu capability {torch.backends.cpu.get_cpu_capability()}"
    )
    header = " | ".join(f"{b // 2**20} MiB" for b in budgets)
    print(f"| set | questions | passages read | distinct | unbounded | {header} |")
    print("|---|---|---|---|---|" + "---|" * len(budgets))
    report = []
    for name, questions in streams(args.data):
        distinct = sorted({t for q in questions for t in q})
        ids = proxy.tokenizer(distinct, add_special_tokens=False)["input_ids"]
        tokens = {t: len(i) for t, i in zip(distinct, ids, strict=True)}
        reads = sum(len(q) for q in questions)
        unbounded = replay(questions, tokens, per_token, 1 << 62)
        rates = [replay(questions, tokens, per_token, b) for b in budgets]
        print(
            f"| {name} | {len(questions)} | {reads} | {len(distinct)} | "
            f"{unbounded['hit_rate']:.1%} | "
            + " | ".join(f"{r['hit_rate']:.1%}" for r in rates)
            + " |"
        )
        report.append(
            {
                "set": name,
                "questions": len(questions),
                "reads": reads,
                "distinct": len(distinct),
                "unbounded": unbounded,
                "budgets": dict(zip(args.budgets_mb.split(","), rates, strict=True)),
            }
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
