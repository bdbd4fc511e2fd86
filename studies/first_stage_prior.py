"""The curve of the one read's first-stage prior: evidence recall per weight, one forward each.

The prior (``Compressor(first_stage_prior=w)``, :func:`ragattn.compress.selection.with_rank_prior`)
changes only the read's ``selection`` stage, so every weight of one question and budget reads the
same forward: the compressor's scorer is memoised (:class:`ForwardMemo`) and each weight replays
it. Each cell's outcomes go to ``OUT/<cell>.jsonl`` as computed (an interrupted run resumes), and
the table (evidence recall per cell, budget and weight, beside the first stage's own order given
the tokens of weight 0) is printed and written to ``OUT/curve.json``.

The rule it serves is written before the run, in docs/research/context.md ("A first-stage prior").

    python studies/first_stage_prior.py --cell scifact-train --cell 2wiki@200:bm25:plain/50 \\
        --weight 0 --weight 0.5 --weight 1 --weight 2 --out /tmp/prior
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ragattn.lab.evaluation.context import (
    ContextQuestion,
    load_context_set,
    parse_budget,
)
from ragattn.lab.evaluation.context_systems import ContextSystems
from ragattn.proxy import load_proxy


def parse_cell(text: str, data_dir: Path) -> tuple[str, tuple[ContextQuestion, ...]]:
    """``SET[@OFFSET][:bm25][:plain|:titled][/LIMIT]`` as its label and questions."""
    body, _, limit = text.partition("/")
    name, *flags = body.split(":")
    name, _, offset = name.partition("@")
    questions = load_context_set(
        name,
        data_dir,
        offset=int(offset or 0),
        limit=int(limit) if limit else None,
        titles="plain" not in flags,
        order="bm25" if "bm25" in flags else "given",
    )
    return text.replace("/", "-n"), questions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cell", action="append", required=True)
    ap.add_argument("--weight", action="append", type=float, required=True)
    ap.add_argument("--budget", action="append", default=None)
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    budgets = [parse_budget(b) for b in (args.budget or ["0.2", "256"])]
    args.out.mkdir(parents=True, exist_ok=True)
    proxy = load_proxy("smollm2-135m", threads=args.threads)
    print(f"cpu capability {torch.backends.cpu.get_cpu_capability()}, threads {args.threads}")
    systems = ContextSystems.from_proxy(proxy)
    # no system here is timed: MiniLM's vectors stay cached across the weights, so each weight
    # replays the cut's and the documents' encodings as it replays the forward
    systems._cold = lambda: None  # type: ignore[method-assign]
    table: dict[str, dict[str, dict[str, float]]] = {}
    for cell in args.cell:
        label, questions = parse_cell(cell, args.data_dir)
        path = args.out / f"{label.replace(':', '_').replace('@', '_')}.jsonl"
        done = {}
        if path.is_file():
            for line in path.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                done[(r["qid"], r["budget"], r["system"])] = r
        with path.open("a") as fh:
            for q in questions:
                for budget in budgets:
                    tokens = 0
                    for w in args.weight:
                        name = f"w={w:g}"
                        key = (q.qid, str(budget.value), name)
                        if key not in done:
                            systems.compressor.first_stage_prior = w
                            o = systems.run("one-read", q, budget)
                            done[key] = {
                                "qid": q.qid,
                                "budget": str(budget.value),
                                "system": name,
                                "kept": o.gold_kept,
                                "present": o.gold_present,
                                "tokens": o.tokens,
                            }
                            fh.write(json.dumps(done[key]) + "\n")
                            fh.flush()
                        if w == 0:
                            tokens = done[key]["tokens"]
                    key = (q.qid, str(budget.value), "first-stage")
                    if key not in done:
                        o = systems.run("first-stage", q, budget, tokens)
                        done[key] = {
                            "qid": q.qid,
                            "budget": str(budget.value),
                            "system": "first-stage",
                            "kept": o.gold_kept,
                            "present": o.gold_present,
                            "tokens": o.tokens,
                        }
                        fh.write(json.dumps(done[key]) + "\n")
                        fh.flush()
        wanted = {q.qid for q in questions}
        rows: dict[str, dict[str, list[float]]] = {}
        for (qid, b, system), r in done.items():
            if qid in wanted and r["present"]:
                rows.setdefault(b, {}).setdefault(system, []).append(r["kept"] / r["present"])
        table[label] = {
            b: {name: round(sum(v) / len(v), 4) for name, v in by_system.items()}
            for b, by_system in rows.items()
        }
        print(label, json.dumps(table[label]), flush=True)
    (args.out / "curve.json").write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
