"""``ragattn eval``: rerank, compression and matched-budget context evaluations
(:mod:`ragattn.lab.evaluation`) printing one table each."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragattn.cli._help import DTYPE_HELP, listing_methods
from ragattn.languages import check_language

eval_app = typer.Typer(
    help="Evaluate reranking (nDCG@10), compression (supporting-fact recall) and the context "
    "that reaches the generator at matched budgets."
)


if TYPE_CHECKING:
    from ragattn.lab.evaluation.context import Order


def _proxy_of_set(questions: Sequence[Any]) -> str:
    """The proxy the default read gives most of a set's calls (one language a set)."""
    from collections import Counter

    from ragattn.call_language import ENGLISH, call_language
    from ragattn.proxy import DEFAULT_PROXY, MULTILINGUAL_PROXY

    counts = Counter(call_language(q.query, q.candidates) == ENGLISH for q in questions)
    return DEFAULT_PROXY if counts[True] >= counts[False] else MULTILINGUAL_PROXY


def _order(value: str) -> Order:
    """``--order`` as an :data:`~ragattn.lab.evaluation.context.Order`.

    Raises:
        InvalidInputError: another value.
    """
    from ragattn.errors import InvalidInputError
    from ragattn.lab.evaluation.context import ORDERS

    if value not in ORDERS:
        raise InvalidInputError(f"unknown order {value!r}; valid: {', '.join(ORDERS)}")
    return value  # type: ignore[return-value]


def _methods(value: str) -> list[str]:
    return [m.strip() for m in value.split(",") if m.strip()]


@eval_app.command("rerank", cls=listing_methods("rerank", lab=True))
def eval_rerank(
    candidates: Path | None = typer.Option(
        None, help="JSONL of queries with first-stage candidates (DL19 format)."
    ),
    qrels: Path | None = typer.Option(None, help="TREC qrels for --candidates."),
    beir: Path | None = typer.Option(
        None, help="BEIR folder (corpus/queries/qrels); BM25 first stage built inside."
    ),
    split: str = typer.Option("test", help="BEIR qrels split."),
    top_k: int = typer.Option(20, min=1, help="Rerank the first stage's top K."),
    limit: int | None = typer.Option(None, help="Evaluate only the first N queries."),
    method: str = typer.Option(
        "bm25,minilm,icr,icr-middle,icr-middle-reattn",
        help="Comma-separated systems: bm25 (first stage), minilm, rerank methods (above, runtime "
        "and lab), or "
        "compress:<method> (the one-pass ranking of rerank_and_compress under that compress "
        "method: the document probe read from the compressor's own forward, where the proxy "
        "ships one; else a document's best sentence's keep probability).",
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    threads: int | None = typer.Option(None, help="torch threads."),
    first_stage: bool = typer.Option(
        True,
        "--first-stage/--no-first-stage",
        help="Pass the first stage's order to the rerank methods (a retriever's setting), or "
        "not (the service's setting: query and documents only; candidates are then shuffled "
        "with a fixed seed, so input position carries nothing).",
    ),
    out: Path | None = typer.Option(None, help="Write the report as JSON."),
) -> None:
    """nDCG@10 (trec_eval semantics) of each system over the first stage's top K."""
    from ragattn.lab.evaluation import baselines, datasets, harness

    if (candidates is None) == (beir is None):
        raise typer.BadParameter("give either --candidates with --qrels, or --beir")
    if candidates is not None:
        if qrels is None:
            raise typer.BadParameter("--candidates needs --qrels")
        rset = datasets.load_candidates(candidates, qrels, top_k=top_k)
        queries, judged = rset.queries, rset.qrels
    else:
        assert beir is not None
        data = datasets.load_beir(beir, split=split)  # type: ignore[arg-type]
        wanted = {q: t for q, t in data.queries.items() if q in data.qrels}
        queries = datasets.bm25_candidates(data.corpus, wanted, k=top_k)
        judged = data.qrels
    if limit is not None:
        queries = queries[:limit]
    if any(name != "bm25" for name in _methods(method)):
        from ragattn.embed import shared_embedder

        # Hold every candidate in the embedding LRU, so systems that embed the same texts
        # (MiniLM, the fusions, across prompt variants) encode each one once.
        embedder = shared_embedder()
        texts = sum(len(q.candidates) + 1 for q in queries)
        embedder.cache_size = max(embedder.cache_size, 2 * texts)
    from ragattn.rerank.icr import AttentionMemo

    rankers = {}
    loaded = None
    memo = AttentionMemo()
    for name in _methods(method):
        if name == "bm25":
            rankers[name] = baselines.first_stage_order
        elif name == "minilm":
            rankers[name] = baselines.MiniLMRanker()
        elif name.startswith("compress:"):
            from ragattn.compress import Compressor
            from ragattn.lab.evaluation.systems import CompressorRankSystem
            from ragattn.lab.registry import compress_spec
            from ragattn.proxy import load_proxy

            loaded = loaded or load_proxy(proxy, threads=threads)
            spec = compress_spec(name.split(":", 1)[1])
            rankers[name] = CompressorRankSystem(Compressor(loaded, method=spec), seed=13)
        else:
            from ragattn.lab.evaluation.systems import RerankerSystem
            from ragattn.lab.registry import rerank_spec
            from ragattn.proxy import load_proxy
            from ragattn.rerank import Reranker

            loaded = loaded or load_proxy(proxy, threads=threads)
            rankers[name] = RerankerSystem(
                Reranker(loaded, method=rerank_spec(name), memo=memo), first_stage=first_stage
            )
    report = harness.evaluate_rerank(queries, judged, rankers)
    typer.echo(f"{len(queries)} queries, top {top_k}\n" + report.to_markdown())
    if out:
        out.write_text(json.dumps(report.to_dict(), indent=2))


DATASETS = ("2wiki", "hotpotqa", "squad", "scifact")


def _cascade_system(
    spec: str, proxy: Any, models_dir: Path | None, min_tokens: int, ratio: float
) -> dict[str, Any]:
    """``{name: system}`` for one ``--cascade KEEP:SCORER``: the default compressor behind it."""
    from ragattn.compress import Compressor
    from ragattn.compress.cascade import Cascade
    from ragattn.errors import InvalidInputError
    from ragattn.lab.evaluation.systems import CompressorSystem

    try:
        made = Cascade.parse(spec, min_tokens=min_tokens)
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc)) from exc
    compressor = Compressor(proxy, models_dir=models_dir, cascade=made)
    suffix = "+links" if made.links else ""
    return {
        f"cascade-{made.scorer}{suffix}-{made.keep:g}": CompressorSystem(compressor, ratio=ratio)
    }


@eval_app.command("compress")
def eval_compress(
    dataset: str = typer.Option(..., help=f"One of {', '.join(DATASETS)}."),
    path: Path = typer.Argument(..., help="The dataset file (or the SciFact folder)."),
    budget: list[float] = typer.Option(
        [0.2, 0.33], help="Fractions of context tokens kept (repeatable)."
    ),
    limit: int = typer.Option(200, min=1, help="Evaluate the first N questions."),
    offset: int = typer.Option(
        0,
        min=0,
        help="Skip this many questions first (2Wiki 200-299, --offset 200 --limit 100, is in "
        "neither the evaluation slice nor the training questions).",
    ),
    method: str = typer.Option(
        "random,position,bm25,minilm,attention-raw,focal,sentinel,lexical,fused",
        help="Comma-separated systems.",
    ),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    threads: int | None = typer.Option(None, help="torch threads."),
    out: Path | None = typer.Option(None, help="Write the report as JSON."),
    models_dir: Path | None = typer.Option(
        None, help="Probe folder (default: RAGATTN_MODELS_DIR or the packaged models)."
    ),
    features_cache: Path | None = typer.Option(
        None, help="Keep the extracted features in this feature store folder and reuse them."
    ),
    read_once: bool = typer.Option(
        False,
        help="Read passages as cached document blocks (ragattn.blocks) instead of one prompt.",
    ),
    cascade: list[str] = typer.Option(
        [],
        help="Also evaluate the default compressor behind a cascade, KEEP:SCORER[+links] (e.g. "
        "0.8:lexical, 0.8:lexical+links or 0.6:bm25; repeatable), cut for the first budget; the "
        "system is named cascade-SCORER[+links]-KEEP.",
    ),
    cascade_min_tokens: int = typer.Option(
        1024, help="The cascades cut contexts of at least this many proxy tokens."
    ),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
) -> None:
    """Supporting-fact recall at each budget, R-precision, answer retention, achieved ratio."""
    from ragattn.lab.evaluation import baselines, datasets, harness
    from ragattn.lab.evaluation.systems import (
        DocumentAwareSystem,
        FeatureCache,
        FocalSystem,
        ProbeSystem,
        RawAttentionSystem,
    )
    from ragattn.proxy import load_proxy

    end = offset + limit
    loaders = {
        "2wiki": lambda: datasets.load_2wiki(path, end),
        "hotpotqa": lambda: datasets.load_hotpot(path, end),
        "squad": lambda: datasets.load_squad(path, end),
        "scifact": lambda: datasets.load_scifact_rationales(path, "test", end),
    }
    if dataset not in loaders:
        raise typer.BadParameter(f"--dataset must be one of {', '.join(DATASETS)}")
    examples = list(loaders[dataset]())[offset:]
    if not examples:
        raise typer.BadParameter(f"--offset {offset} skips every question of {path}")
    loaded = load_proxy(proxy, threads=threads, dtype=dtype)
    store = None
    if features_cache is not None:
        from ragattn.lab.feature_store import FeatureStore

        store = FeatureStore(features_cache, loaded)
    blocks = None
    if read_once:
        from ragattn.blocks import BlockReader

        blocks = BlockReader(loaded)
    cache = FeatureCache(loaded, store, source=f"eval-{dataset}", blocks=blocks)
    factories: dict[str, Callable[[], baselines.SentenceScorer]] = {
        "random": lambda: baselines.RandomScorer(),
        "position": lambda: baselines.PositionScorer(),
        "bm25": lambda: baselines.BM25SentenceScorer(),
        "minilm": lambda: baselines.MiniLMSentenceScorer(),
        "attention-raw": lambda: RawAttentionSystem(cache),
        "focal": lambda: FocalSystem(loaded),
        "sentinel": lambda: ProbeSystem(cache, "sentinel", models_dir),
        "sentinel-documents": lambda: DocumentAwareSystem(cache, "sentinel", models_dir),
        "lexical": lambda: ProbeSystem(cache, "lexical", models_dir),
        "fused": lambda: ProbeSystem(cache, "fused", models_dir),
    }
    unknown = [m for m in _methods(method) if m not in factories]
    if unknown:
        raise typer.BadParameter(f"unknown systems {unknown}; valid: {', '.join(factories)}")
    scorers = {m: factories[m]() for m in _methods(method)}
    for spec in cascade:
        scorers.update(_cascade_system(spec, loaded, models_dir, cascade_min_tokens, budget[0]))
    report = harness.evaluate_selection(
        examples, scorers, budgets=tuple(budget), tokenizer=loaded.tokenizer
    )
    first = f", from question {offset}" if offset else ""
    typer.echo(f"{dataset}: {len(examples)} questions{first}\n" + report.to_markdown())
    if out:
        out.write_text(json.dumps(report.to_dict(), indent=2))


CONTEXT_SETS = (
    "hotpotqa",
    "hotpotqa-fullwiki",
    "2wiki",
    "scifact",
    "scifact-train",
    "squad",
    "techdocs",
    "techdocs-test",
    *(
        f"xquad-{lang}"
        for lang in ("ar", "de", "el", "en", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")
    ),
    "xquad-en-de",
    "xquad-de-en",
    "xquad-en-zh",
    "xquad-zh-en",
    "drcd",
)
"""The sets of ``eval context`` (:data:`ragattn.lab.evaluation.context.SETS`), named here so that
``--help`` loads no model code."""
_RERANKING_SYSTEMS = ("rerank-stuff", "rerank3-compress", "rerank5-compress")
CONTEXT_SYSTEMS = ("compress", *_RERANKING_SYSTEMS, "lexical", "first-stage")
"""The systems compared with ``one-read`` (:data:`ragattn.lab.evaluation.context.SYSTEMS`, in its
order; a test holds the two equal), named here so that ``--help`` loads no model code."""


@eval_app.command("context")
def eval_context(
    dataset: str = typer.Option(
        ...,
        help=f"One of {', '.join(CONTEXT_SETS)} (HotpotQA dev distractor / fullwiki, 2Wiki-200, "
        "XQuAD per language (its files in DATA/xquad/), "
        "SciFact test claims over BM25 top-20 abstracts (scifact-train: its train claims, 40 "
        "by default, for choosing defaults), SQuAD's first 1,000 answerable "
        "questions over their article's paragraphs, techdocs: questions answered in the code, "
        "tables and prose of installed packages' READMEs over 20 section chunks each, in BM25's "
        "order (techdocs-test: its held-out projects; no data folder needed)).",
    ),
    data_dir: Path = typer.Option(
        Path("../shared/data"), envvar="RAGATTN_DATA_DIR", help="The shared data folder."
    ),
    budget: list[str] = typer.Option(
        ["0.1", "0.2", "256", "512"],
        help="A ratio of the candidates' tokens in (0, 1] (0.2) or a number of proxy tokens, an "
        "integer > 1 (256); repeatable.",
    ),
    system: list[str] = typer.Option(
        [],
        help=f"Systems beside one-read (always run: it sets the tokens), comma-separated or "
        f"repeated, of {', '.join(CONTEXT_SYSTEMS)}; default all but compress (the same "
        "read and context as one-read).",
    ),
    limit: int | None = typer.Option(
        None,
        min=1,
        help="Evaluate N questions (default: the set's evaluation slice: 2Wiki 200, SQuAD 1,000, "
        "every question of the others).",
    ),
    offset: int = typer.Option(
        0,
        min=0,
        help="Skip this many questions first (2Wiki and SQuAD never read past 300 / 1,000).",
    ),
    proxy: str = typer.Option(
        "auto",
        help="Proxy name or path; auto: the one the default read gives the set's calls "
        "(ragattn.call_language: smollm2-135m for English, gemma3-270m for any other language).",
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
    dtype: str = typer.Option("auto", help=DTYPE_HELP),
    cache_dir: Path | None = typer.Option(
        None,
        help="Append each question's outcomes to a JSONL file here and reuse them (keyed by set, "
        "question, system, budget and the systems' fingerprint): an interrupted run resumes.",
    ),
    out: Path | None = typer.Option(None, help="Write the report as JSON."),
    cascade: str | None = typer.Option(
        None,
        help="The default compressor's read behind a cascade KEEP:SCORER[+links][@CAP] (e.g. "
        "0.8:lexical+links@768; 'none' reads every candidate whole; default: the compressor's "
        "default), for one-read and the rerankK-compress systems.",
    ),
    min_room: float = typer.Option(
        2.0, help="With --cascade: attention reads at least this many times the budget's tokens."
    ),
    pool: int | None = typer.Option(
        None,
        min=2,
        help="Pad each question's candidates to N with the paragraphs of the questions after it "
        "(distractors, no gold), shuffled in a fixed order: the production shape of 50-100 "
        "candidates.",
    ),
    titles: bool = typer.Option(
        True,
        help="Give the candidates with their titles (--titles) or as plain strings "
        "(--no-titles: what Cohere-style string documents and most adapters send).",
    ),
    language: str = typer.Option(
        "auto",
        metavar="CODE",
        help="The language every sentence is split by (each system's, and the gold of the sets "
        "that split their own text: SQuAD, XQuAD): an ISO 639-1 code (de, fr, zh, ...; an "
        "unknown one lists them) or auto, by each text's script. Named in the report; part of "
        "the systems' fingerprint (the cache key) when not auto.",
    ),
    embed_dtype: str = typer.Option(
        "float32",
        help="MiniLM's weights for every system (float32, auto: bf16 where native, bfloat16; "
        "RAGATTN_EMBED_DTYPE of the service). Part of the fingerprint when not float32.",
    ),
    order: str = typer.Option(
        "given",
        help="The candidates' order: given (the set's own; SciFact's is BM25's over the corpus, "
        "passed to the one read as its first_stage_order) or bm25 (ranked by BM25 over each "
        "question's candidates, and passed so: a first stage for the sets that have none).",
    ),
    first_stage_prior: float | None = typer.Option(
        None,
        min=0.0,
        help="The one read's weight of a ranked set's first-stage order "
        "(Compressor(first_stage_prior=...); default: the compressor's); part of the "
        "fingerprint when above 0.",
    ),
    first_pass: str = typer.Option(
        "default",
        help="The one read's candidates stage: minilm, bm25, or default (the compressor's: "
        "minilm for the English proxy, the multilingual compressor's own for gemma3-270m).",
    ),
) -> None:
    """Evidence recall, answer kept, passages touched, tokens and seconds per question of the
    one-read default and of pipelines given exactly its tokens (docs/context-eval.md)."""
    from ragattn.compress.compressor import MULTILINGUAL_FIRST_PASS
    from ragattn.embed import use_embed_dtype
    from ragattn.errors import ConfigError, InvalidInputError
    from ragattn.lab.evaluation import context as ctx
    from ragattn.lab.evaluation.context_report import OutcomeCache, evaluate_context
    from ragattn.lab.evaluation.context_systems import ContextSystems
    from ragattn.proxy import MULTILINGUAL_PROXY, load_proxy

    names = [s for value in system for s in _methods(value)] or [
        s for s in ctx.SYSTEMS if s != "compress"
    ]
    if unknown := [n for n in names if n not in ctx.SYSTEMS]:
        raise typer.BadParameter(f"unknown systems {unknown}; valid: {', '.join(ctx.SYSTEMS)}")
    try:
        use_embed_dtype(embed_dtype)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        check_language(language)
        budgets = [ctx.parse_budget(b) for b in budget]
        questions = ctx.load_context_set(
            dataset,
            data_dir,
            offset=offset,
            limit=limit,
            titles=titles,
            pool=pool,
            language=language,
            order=_order(order),
        )
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if not questions:
        raise typer.BadParameter(f"--offset {offset} skips every question of {dataset}")
    from ragattn.compress.cascade import DEFAULT_CASCADE, Cascade

    read: Cascade | None = DEFAULT_CASCADE
    if cascade is not None:
        try:
            read = None if cascade == "none" else Cascade.parse(cascade, min_room=min_room)
        except InvalidInputError as exc:
            raise typer.BadParameter(str(exc)) from exc
    if proxy == "auto":
        proxy = _proxy_of_set(questions)
        typer.echo(f"proxy: {proxy} (the default read's for this set)", err=True)
    loaded = load_proxy(proxy, threads=threads, dtype=dtype)
    prior: dict[str, Any] = (
        {} if first_stage_prior is None else {"first_stage_prior": first_stage_prior}
    )
    if first_pass not in ("default", "minilm", "bm25"):
        raise typer.BadParameter(f"--first-pass {first_pass!r}: valid: default, minilm, bm25")
    if first_pass != "default":
        prior["first_pass"] = first_pass
    elif proxy == MULTILINGUAL_PROXY:
        prior["first_pass"] = MULTILINGUAL_FIRST_PASS
    systems = ContextSystems.from_proxy(loaded, cascade=read, language=language, **prior)
    # plain strings, pools and orders are other sets: named apart in the report and the cache
    label = (
        dataset
        + ("" if titles else ":plain")
        + (f":pool{pool}" if pool else "")
        + (f":{order}" if order != "given" else "")
    )
    cache = None
    if cache_dir is not None:
        cache = OutcomeCache(cache_dir, label, systems.fingerprint())
    report = evaluate_context(label, questions, systems, budgets, names, cache=cache)
    first = f", from question {offset}" if offset else ""
    given = (
        ("" if titles else ", candidates as plain strings (no titles)")
        + (f", pooled to {pool} candidates" if pool else "")
        + (", ranked by BM25 over them" if order == "bm25" else "")
    )
    typer.echo(f"{dataset}{first}{given}\n" + report.to_markdown())
    if out:
        out.write_text(json.dumps(report.to_dict(), indent=2))
