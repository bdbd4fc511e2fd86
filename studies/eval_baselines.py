"""Reproduce the baseline tables of docs/benchmarks/baselines.md.

    python studies/eval_baselines.py                       # all sections, markdown on stdout
    python studies/eval_baselines.py --section rerank      # only DL19
    python studies/eval_baselines.py --json-out /tmp/baselines.json

Tokens are counted with the proxy's tokenizer (SmolLM2-135M-Instruct, from the ragattn model
cache) unless --tokenizer points elsewhere.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from ragattn.lab.evaluation import (
    SENTENCE_BASELINES,
    MiniLMRanker,
    SentenceScorer,
    evaluate_rerank,
    evaluate_selection,
    first_stage_order,
    load_2wiki,
    load_dl19,
    load_hotpot,
    load_scifact_rationales,
    load_squad,
    split_for_training,
)

app = typer.Typer(add_completion=False)

WIKI_HOLDOUT = 0.4
"""Fraction of the 2Wiki sample reserved for training (split_for_training, seed 0)."""


def _default_tokenizer() -> Path:
    found = sorted((Path.home() / ".cache" / "ragattn").glob("SmolLM2-135M-Instruct.Q4_1-*"))
    if not found:
        raise typer.BadParameter("no proxy tokenizer in ~/.cache/ragattn; pass --tokenizer")
    return found[0]


def _scorers() -> dict[str, SentenceScorer]:
    return {name: factory() for name, factory in SENTENCE_BASELINES.items()}


def _rerank(data: Path, out: dict[str, Any]) -> None:
    minilm = MiniLMRanker()
    for depth in (20, 100):
        dl19 = load_dl19(data / "trec-dl-2019", top_k=depth)
        report = evaluate_rerank(
            dl19.queries, dl19.qrels, {"BM25 order": first_stage_order, "MiniLM cosine": minilm}
        )
        print(f"\n### TREC DL19, rerank BM25 top-{depth}\n\n{report.to_markdown()}", flush=True)
        out[f"dl19_top{depth}"] = report.to_dict()


def _select(
    title: str,
    key: str,
    examples: tuple[Any, ...],
    budgets: tuple[float, ...],
    tokenizer: Any,
    scorers: Mapping[str, SentenceScorer],
    out: dict[str, Any],
) -> None:
    report = evaluate_selection(examples, scorers, budgets, tokenizer=tokenizer)
    print(
        f"\n### {title}\n\n{report.num_with_gold} with gold sentences, "
        f"{report.num_with_answer} with an extractive answer in the context\n\n"
        f"{report.to_markdown()}",
        flush=True,
    )
    out[key] = report.to_dict()


def _compress(data: Path, n: int, tokenizer: Any, wiki_split: bool, out: dict[str, Any]) -> None:
    scorers = _scorers()
    budgets = (0.2, 0.33)
    wiki = load_2wiki(data / "2wikimultihopqa" / "2wiki_dev_sample500.json")
    if wiki_split:
        wiki = split_for_training(wiki, WIKI_HOLDOUT, seed=0).evaluation
        label = f"evaluation part of split_for_training({WIKI_HOLDOUT}, seed=0), first {n}"
    else:
        label = f"first {n} of the file"
    _select(f"2WikiMultihopQA dev — {label}", "2wiki", wiki[:n], budgets, tokenizer, scorers, out)
    hotpot = load_hotpot(data / "hotpotqa" / "hotpot_dev_distractor_v1.shared.json", limit=n)
    _select(
        f"HotpotQA distractor dev — {len(hotpot)} questions (all the shared file holds)",
        "hotpot",
        hotpot,
        budgets,
        tokenizer,
        scorers,
        out,
    )
    squad = load_squad(data / "squad-v2" / "dev-v2.0.shared.json", limit=n, answerable_only=True)
    _select(
        f"SQuAD v2 dev, answerable — first {len(squad)} questions",
        "squad",
        squad,
        (0.33,),
        tokenizer,
        scorers,
        out,
    )
    scifact = load_scifact_rationales(data / "scifact", "test")
    _select(
        f"SciFact test rationales — {len(scifact)} claims with evidence (cited abstracts)",
        "scifact",
        scifact,
        budgets,
        tokenizer,
        scorers,
        out,
    )


@app.command()
def main(
    data: Annotated[Path, typer.Option(help="shared data folder")] = Path(__file__)
    .resolve()
    .parents[1]
    .parent
    / "shared"
    / "data",
    tokenizer: Annotated[
        Path | None, typer.Option(help="HF tokenizer dir (default: the proxy's)")
    ] = None,
    n: Annotated[int, typer.Option(help="questions per QA dataset")] = 200,
    section: Annotated[str, typer.Option(help="all | rerank | compress")] = "all",
    wiki_split: Annotated[
        bool, typer.Option(help="evaluate 2Wiki on its evaluation split only")
    ] = True,
    json_out: Annotated[Path | None, typer.Option(help="also write every report as JSON")] = None,
) -> None:
    """Run the reranking and sentence-selection baselines and print markdown tables."""
    from transformers import AutoTokenizer

    logging.basicConfig(level=logging.WARNING)
    tok_dir = tokenizer or _default_tokenizer()
    print(f"# ragattn baselines — {dt.datetime.now().isoformat(timespec='minutes')}")
    print(f"command: {' '.join(sys.argv)}; python {platform.python_version()}; tokenizer {tok_dir}")
    out: dict[str, Any] = {}
    if section in ("all", "rerank"):
        _rerank(data, out)
    if section in ("all", "compress"):
        _compress(data, n, AutoTokenizer.from_pretrained(str(tok_dir)), wiki_split, out)
    if json_out is not None:
        json_out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    app()
