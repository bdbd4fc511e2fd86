"""``ragattn heads``: learn the rerank head profiles of a proxy (:mod:`ragattn.lab`).

``select`` runs the QRHead recipe and fits the rank fusion (``rerank-profile.json``); ``detect``
finds retrieval heads with the copy-paste needle test (``retrieval-heads.json`` and its model-card
section); ``train`` trains LoRA on a layer band's query->document attention
(``attention-lora.safetensors`` and ``attention-lora.md``, :mod:`ragattn.lab.attention_training`),
with ``--pilot`` scoring DL19 before and after in one run. All write ``models/<proxy>/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

heads_app = typer.Typer(
    help="Rerank head profiles: select query-focused heads, fit the fusion, train the attention."
)


@heads_app.command("select")
def heads_select(
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder."),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    per_source: int = typer.Option(40, min=1, help="Training questions per source."),
    top_k: int = typer.Option(16, min=1, help="Heads to keep."),
    models_dir: Path | None = typer.Option(
        None,
        help="Where to write models/<proxy>/ (default: RAGATTN_MODELS_DIR or the packaged models).",
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
    scifact: bool = typer.Option(
        False, help="Add SciFact train claims (BM25 top-20 over the corpus) as a fourth source."
    ),
    lexical_only: bool = typer.Option(
        False,
        "--lexical-only",
        help="Refit only the fusions without attention (BM25 + MiniLM, with and without the rank "
        "prior) of the existing profile: no proxy forward.",
    ),
) -> None:
    """QRHead selection and rank fusion on training questions; writes \
models/<proxy>/rerank-profile.json."""
    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.lab.profile_writers import write_rerank_profile
    from ragattn.lab.qrhead import fit_rerank_profile, refit_lexical_fusions
    from ragattn.proxy import load_proxy

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    target = (models_dir or default_models_dir()) / proxy_slug(proxy)
    if lexical_only:
        from ragattn.assets import packaged_models_dir
        from ragattn.rerank.profiles import PROFILE_FILENAME

        sources = [
            target / PROFILE_FILENAME,
            packaged_models_dir() / proxy_slug(proxy) / PROFILE_FILENAME,
        ]
        found = next((f for f in sources if f.is_file()), None)
        if found is None:
            raise typer.BadParameter(
                f"no rerank profile for {proxy!r} to refit; run 'ragattn heads select' first"
            )
        current = json.loads(found.read_text())
        payload = refit_lexical_fusions(current, data, per_source=per_source, scifact=scifact)
    else:
        loaded = load_proxy(proxy, threads=threads)
        payload = fit_rerank_profile(
            loaded, data, per_source=per_source, top_k=top_k, scifact=scifact
        )
    path = write_rerank_profile(target, payload)
    typer.echo(json.dumps({"fusion": payload["fusion"]}, indent=1))
    typer.echo(f"wrote {path}")


@heads_app.command("detect")
def heads_detect(
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder (haystack)."),
    trials: int = typer.Option(40, min=1, help="Needle trials (cycling lengths, depths, needles)."),
    top: int | None = typer.Option(
        None, "--top", min=1, help="Keep the K best heads (default 16)."
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="Keep every head scoring above T instead (Wu et al.: 0.1)."
    ),
    decoding: str = typer.Option(
        "greedy", help="greedy, or teacher-forced for proxies that do not copy."
    ),
    out: Path | None = typer.Option(
        None,
        help="Output folder (default: models/<proxy>/ in RAGATTN_MODELS_DIR or the packaged ones).",
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
) -> None:
    """Detect retrieval heads (Wu et al. 2024); writes retrieval-heads.json and the model card."""
    import datetime as dt

    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.lab import profile_writers as pw
    from ragattn.lab import retrieval_heads as rh
    from ragattn.proxy import load_proxy
    from ragattn.rerank.profiles import RETRIEVAL_FILENAME

    if top is not None and threshold is not None:
        raise typer.BadParameter("give --top or --threshold, not both")
    if decoding not in ("greedy", "teacher-forced"):
        raise typer.BadParameter("--decoding must be greedy or teacher-forced")
    if top is None and threshold is None:
        top = 16
    loaded = load_proxy(proxy, threads=threads)
    detection = rh.detect(
        loaded,
        rh.load_haystack(data),
        trials=trials,
        decoding="greedy" if decoding == "greedy" else "teacher-forced",
    )
    heads = detection.select(top=top, threshold=threshold)
    selection: dict[str, float | int] = {"top": top} if top is not None else {}
    if threshold is not None:
        selection = {"threshold": threshold}
    choice = f"--top {top}" if top is not None else f"--threshold {threshold}"
    payload = pw.retrieval_profile_payload(
        detection,
        heads,
        proxy=proxy,
        selection=selection,
        command=f"ragattn heads detect --proxy {proxy} --trials {trials} {choice}"
        + (f" --decoding {decoding}" if decoding != "greedy" else ""),
        date=dt.date.today().isoformat(),
    )
    folder = out or default_models_dir() / proxy_slug(loaded)
    pw.write_retrieval_profile(folder / RETRIEVAL_FILENAME, payload)
    pw.write_card_section(folder / "README.md", pw.card_section(payload))
    typer.echo(pw.card_section(payload))


ICR_DL19_TOP20 = 0.502
"""Calibrated untrained ICR (all heads) on DL19 top-20, BENCHMARKS.md §2: the pilot's gate."""
PILOT_GATE_POINTS = 3.0
"""Issue 19: the pilot must gain at least this many nDCG@10 points, or the full run stops."""


@heads_app.command("train")
def heads_train(
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder."),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    lists: int = typer.Option(300, min=1, help="Training lists (round-robin over the sources)."),
    band: str = typer.Option("10-17", help="Layer band FIRST-LAST (0-based, inclusive)."),
    rank: int = typer.Option(8, min=1, help="LoRA rank."),
    alpha: int | None = typer.Option(None, min=1, help="LoRA alpha (default: the rank)."),
    lr: float = typer.Option(3e-3, help="Adam's peak learning rate."),
    warmup: float = typer.Option(0.1, help="Fraction of the steps of linear warm-up."),
    decay: str = typer.Option("none", help="After the warm-up: none (constant) or cosine."),
    clip: float = typer.Option(1.0, help="Gradient-norm clipping."),
    epochs: int = typer.Option(1, min=1, help="Passes over the lists."),
    calibrate: bool = typer.Option(
        True, "--calibrate/--no-calibrate", help="Score minus the N/A twin (ICR's calibration)."
    ),
    doc_tokens: int = typer.Option(80, min=1, help="Training documents cut to N proxy tokens."),
    min_docs: int = typer.Option(5, min=2, help="Shortest list."),
    max_docs: int = typer.Option(30, min=2, help="Longest list."),
    val_lists: int = typer.Option(
        0, min=0, help="Extra lists held out for a list nDCG@10 before/after (0: none)."
    ),
    seed: int = typer.Option(0, help="Seed of the lists, the LoRA init and the epoch shuffles."),
    models_dir: Path | None = typer.Option(
        None,
        help="Where to write models/<proxy>/ (default: RAGATTN_MODELS_DIR or the packaged models).",
    ),
    eval_dl19: Path | None = typer.Option(
        None, help="The trec-dl-2019 folder: score DL19 top-K nDCG@10 after training."
    ),
    pilot: bool = typer.Option(
        False,
        "--pilot",
        help="Also score DL19 before training, in the same run and with the same scoring (default "
        "folder: DATA/trec-dl-2019), and print the gate of issue 19.",
    ),
    eval_top_k: int = typer.Option(20, min=1, max=100, help="DL19 candidates per query."),
    eval_doc_tokens: int = typer.Option(
        400, min=1, help="DL19 passages cut to N proxy tokens (ICR's default)."
    ),
    eval_limit: int | None = typer.Option(None, min=1, help="Score only the first N DL19 queries."),
    threads: int | None = typer.Option(None, help="torch threads."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars."),
) -> None:
    """Train LoRA on the band's query->document attention (listwise loss); writes \
models/<proxy>/attention-lora.safetensors and its model card."""
    import shlex
    import sys

    import torch

    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.errors import InvalidInputError
    from ragattn.lab import attention_training as at
    from ragattn.lab.evaluation.datasets import load_dl19
    from ragattn.proxy import load_proxy

    if min_docs > max_docs:
        raise typer.BadParameter("--min-docs must not exceed --max-docs")
    try:
        settings = at.TrainSettings(
            band=at.Band.parse(band),
            rank=rank,
            alpha=alpha,
            lr=lr,
            warmup=warmup,
            decay=decay,
            clip=clip,
            epochs=epochs,
            calibrate=calibrate,
            max_doc_tokens=doc_tokens,
            seed=seed,
        )
    except InvalidInputError as exc:
        raise typer.BadParameter(str(exc)) from exc
    dl19_dir = eval_dl19 or (data / "trec-dl-2019" if pilot else None)
    loaded = load_proxy(proxy, threads=threads)
    settings.band.check(loaded)
    typer.echo(
        f"torch {torch.__version__}, CPU capability {at.cpu_capability()}, "
        f"{torch.get_num_threads()} threads"
    )
    every = at.build_lists(data, lists + val_lists, seed, min_docs=min_docs, max_docs=max_docs)
    train, held_out = every[:lists], every[lists:]
    counts: dict[str, int] = {}
    for item in train:
        counts[item.source] = counts.get(item.source, 0) + 1
    typer.echo(f"{len(train)} training lists: {json.dumps(counts)}")
    rset = None
    if dl19_dir is not None:
        rset = load_dl19(dl19_dir, top_k=eval_top_k)
    queries = () if rset is None else rset.queries[:eval_limit]

    def dl19(desc: str) -> at.RerankScore:
        assert rset is not None
        return at.evaluate_rerank(
            loaded,
            queries,
            rset.qrels,
            band=settings.band,
            calibrate=calibrate,
            max_doc_tokens=eval_doc_tokens,
            progress=progress,
            desc=desc,
        )

    def held() -> float:
        return at.list_ndcg(
            loaded, held_out, band=settings.band, calibrate=calibrate, max_doc_tokens=doc_tokens
        )

    evaluation: dict[str, float] = {}
    label = f"DL19 top-{eval_top_k} nDCG@10" + (
        f" (first {len(queries)} queries)" if eval_limit else ""
    )
    before = dl19("DL19 before") if pilot and rset is not None else None
    if before is not None:
        evaluation[f"{label}, untrained band score"] = before.ndcg_at_10
        typer.echo(f"{label} before training: {before.ndcg_at_10:.4f} ({before.seconds:.0f} s)")
    if held_out:
        evaluation[f"held-out lists ({len(held_out)}) nDCG@10, untrained"] = held()
    result = at.train_adapter(loaded, train, settings, progress=progress)
    at.merge_into(loaded, result.adapter)
    after = dl19("DL19 after") if rset is not None else None
    if after is not None:
        evaluation[f"{label}, trained band score"] = after.ndcg_at_10
    if held_out:
        evaluation[f"held-out lists ({len(held_out)}) nDCG@10, trained"] = held()
    command = "ragattn heads " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    target = (models_dir or default_models_dir()) / proxy_slug(proxy)
    path, card = at.write_adapter(result, target, command=command, evaluation=evaluation)
    typer.echo("loss curve (mean per block of steps, nats):")
    for point in result.curve:
        typer.echo(f"  steps {point.first:>5}-{point.last:<5} {point.loss:.4f}")
    typer.echo(
        f"{result.steps} steps in {result.seconds:.0f} s: {result.seconds_per_list:.2f} s per list "
        f"(CPU capability {at.cpu_capability()}, {torch.get_num_threads()} threads)"
    )
    for name, value in evaluation.items():
        typer.echo(f"{name}: {value:.4f}")
    if before is not None and after is not None:
        gain = 100 * (after.ndcg_at_10 - before.ndcg_at_10)
        typer.echo(
            f"gain over the untrained band score (same run, same scoring): {gain:+.1f} points"
        )
        if eval_top_k == 20 and eval_limit is None:
            over_icr = 100 * after.ndcg_at_10 - 100 * ICR_DL19_TOP20
            verdict = "passed" if over_icr >= PILOT_GATE_POINTS else "not passed"
            typer.echo(
                f"over calibrated untrained ICR ({ICR_DL19_TOP20:.3f}, BENCHMARKS.md §2, not "
                f"re-measured here): {over_icr:+.1f} points; gate (>= {PILOT_GATE_POINTS:.0f} "
                f"points): {verdict}"
            )
        typer.echo(
            "re-measure the ICR reference with: ragattn eval rerank --candidates "
            f"{dl19_dir}/candidates_bm25_top100.jsonl --qrels {dl19_dir}/qrels.trec.txt "
            f"--top-k {eval_top_k} --method icr --threads {threads or 1}"
        )
    typer.echo(f"wrote {path} ({path.stat().st_size:,} bytes) and {card}")


__all__ = ["heads_app"]
