"""``ragattn probe``: train the sentence probes of the compress methods (:mod:`ragattn.lab`)."""

from __future__ import annotations

from pathlib import Path

import typer

probe_app = typer.Typer(
    help="Sentence probes for compression: train on the shared training material."
)


@probe_app.command("train")
def probe_train(
    data: Path = typer.Option(Path("../shared/data"), help="The shared data folder."),
    proxy: str = typer.Option("smollm2-135m", help="Proxy name or path."),
    per_source: int | None = typer.Option(
        None, min=1, help="Cap on training questions per source (default: the built-in quotas)."
    ),
    quota: list[str] = typer.Option(
        [],
        help="SOURCE=N: take at most N training questions from SOURCE instead of its built-in "
        "quota (repeatable; compress only), e.g. nq-train=1400 or musique-train=100.",
    ),
    limit: int | None = typer.Option(
        None,
        min=1,
        help="Use only the first N training questions (the list is interleaved across sources, so "
        "any prefix is balanced).",
    ),
    models_dir: Path | None = typer.Option(
        None,
        help="Where to write models/<proxy>/ (default: RAGATTN_MODELS_DIR or the packaged models).",
    ),
    features_cache: Path | None = typer.Option(
        None,
        help="Feature store folder: features are extracted once per question and reused "
        "(default: $RAGATTN_CACHE_DIR/features or ~/.cache/ragattn/features).",
    ),
    method: str = typer.Option("fused,sentinel,lexical", help="Comma-separated probe methods."),
    trees: bool = typer.Option(False, help="Also try boosted trees as the learner (CV)."),
    folds: int = typer.Option(5, min=2, help="Grouped CV folds."),
    threads: int | None = typer.Option(None, help="torch threads."),
    read_once: bool = typer.Option(
        False,
        help="Fit the compress probes on features of passages read once (cached document blocks, "
        "ragattn.blocks) instead of the full prompt.",
    ),
    document_score: str = typer.Option(
        "probe",
        help="selection only: the document input the selection reads, probe (the document "
        "probe's score: MiniLM cosine plus attention) or attention (its attention correction "
        "alone; selection then needs no MiniLM pass).",
    ),
    kind: str = typer.Option(
        "compress",
        help="compress: the sentence probes of the compress methods; rerank: the document probe "
        "of the attention-probe rerank method (ranking lists in the retrieval shape); selection: "
        "the document-aware selection of the sentinel compressor (reads both packaged probes).",
    ),
) -> None:
    """Extract features on training data (resumable) and fit the sentence or document probes."""
    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.cli._settings import cli_settings
    from ragattn.compress.selection import check_document_score
    from ragattn.errors import ConfigError
    from ragattn.lab.feature_store import FeatureStore, default_root
    from ragattn.lab.probe_card import LEARNERS, fit_all
    from ragattn.proxy import load_proxy

    if kind not in ("compress", "rerank", "selection"):
        raise typer.BadParameter(f"--kind must be compress, rerank or selection, got {kind!r}")
    quotas = _quotas(quota)
    if quotas and kind != "compress":
        raise typer.BadParameter("--quota applies to --kind compress only", param_hint="--quota")
    try:
        document_input = check_document_score(document_score)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--document-score") from exc
    if document_input != "probe" and kind != "selection":
        raise typer.BadParameter(
            "--document-score applies to --kind selection only", param_hint="--document-score"
        )
    cache_dir = cli_settings().cache_dir
    features_cache = features_cache or default_root(cache_dir)
    loaded = load_proxy(proxy, threads=threads)
    out_dir = (models_dir or default_models_dir()) / proxy_slug(loaded)
    if kind == "selection":
        from ragattn.lab.selection_training import fit_selection

        selection_store = FeatureStore(features_cache, loaded)
        typer.echo(f"feature store: {selection_store.folder}", err=True)
        card = fit_selection(
            loaded,
            data,
            out_dir,
            store=selection_store,
            models_dir=models_dir or default_models_dir(),
            limit=limit,
            document_score=document_input,
            command=_command("ragattn probe train --kind selection", proxy, limit)
            + (f" --document-score {document_score}" if document_score != "probe" else ""),
        )
        typer.echo(card)
        typer.echo(f"document-aware selection written to {out_dir}", err=True)
        return
    if kind == "rerank":
        from ragattn.lab.rerank_card import fit_document_probe, forward_depth, recipe_for
        from ragattn.lab.rerank_features import store_for

        depth = forward_depth(recipe_for(proxy_slug(loaded)))
        rerank_store = store_for(features_cache, loaded, layers=depth)
        typer.echo(f"feature store: {rerank_store.folder}", err=True)
        card = fit_document_probe(
            loaded,
            data,
            out_dir,
            store=rerank_store,
            limit=limit,
            command=_command("ragattn probe train --kind rerank", proxy, limit),
            cache_dir=cache_dir,
        )
        typer.echo(card)
        typer.echo(f"document probe written to {out_dir}", err=True)
        return
    store = FeatureStore(features_cache, loaded, read_once=read_once)
    typer.echo(f"feature store: {store.folder}", err=True)
    report = fit_all(
        loaded,
        data,
        out_dir,
        store=store,
        per_source=per_source,
        quotas=quotas,
        limit=limit,
        methods=[m.strip() for m in method.split(",") if m.strip()],
        learners=[*LEARNERS, ("trees", 0.0)] if trees else LEARNERS,
        folds=folds,
        command=_command("ragattn probe train", proxy, limit)
        + "".join(f" --quota {k}={v}" for k, v in quotas.items())
        + (" --trees" if trees else "")
        + (" --read-once" if read_once else ""),
    )
    typer.echo(report)
    typer.echo(f"probes written to {out_dir}", err=True)


def _quotas(given: list[str]) -> dict[str, int]:
    """``SOURCE=N`` options as a mapping; an unknown source or a bad count is a usage error."""
    from ragattn.lab.probe_training import SOURCES

    quotas: dict[str, int] = {}
    for item in given:
        source, sep, count = item.partition("=")
        if not sep or source not in SOURCES or not count.isdigit() or int(count) < 1:
            raise typer.BadParameter(
                f"{item!r}: expected SOURCE=N with N >= 1 and SOURCE one of {', '.join(SOURCES)}",
                param_hint="--quota",
            )
        quotas[source] = int(count)
    return quotas


def _command(base: str, proxy: str, limit: int | None) -> str:
    """The command line a model card cites: ``base`` plus the options that are not defaults."""
    return (
        base
        + (f" --proxy {proxy}" if proxy != "smollm2-135m" else "")
        + (f" --limit {limit}" if limit else "")
    )
