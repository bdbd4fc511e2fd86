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
    per_source: int = typer.Option(100, min=1, help="Training questions per source."),
    models_dir: Path | None = typer.Option(
        None,
        help="Where to write models/<proxy>/ (default: RAGATTN_MODELS_DIR or the packaged models).",
    ),
    features_cache: Path | None = typer.Option(
        None, help="Reuse/save extracted features here (.npz)."
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
) -> None:
    """Extract features on training data and fit the fused, sentinel and lexical probes."""
    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.compress.registry import PROBE_METHODS
    from ragattn.lab.probe_card import fit_all
    from ragattn.proxy import load_proxy

    loaded = load_proxy(proxy, threads=threads)
    out_dir = (models_dir or default_models_dir()) / proxy_slug(loaded)
    report = fit_all(
        loaded,
        data,
        out_dir,
        per_source=per_source,
        features_cache=features_cache,
        methods=PROBE_METHODS,
    )
    typer.echo(report)
