"""``ragattn heads``: learn the rerank head profiles of a proxy (:mod:`ragattn.lab`).

``select`` runs the QRHead recipe and fits the rank fusion (``rerank-profile.json``); ``detect``
finds retrieval heads with the copy-paste needle test (``retrieval-heads.json`` and its model-card
section). Both write ``models/<proxy>/``. The attention-LoRA pilot (``heads train``) failed its
gate and was removed; BENCHMARKS.md §2 "Learned attention" says how to get it back.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

heads_app = typer.Typer(
    help="Rerank head profiles: select query-focused heads, fit the fusion, detect retrieval heads."
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


__all__ = ["heads_app"]
