"""``ragattn heads detect``: find retrieval heads with the copy-paste needle test and store them."""

from __future__ import annotations

from pathlib import Path

import typer


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
        None, help="Output folder (default: models/<proxy>/ of the repository)."
    ),
    threads: int | None = typer.Option(None, help="torch threads."),
) -> None:
    """Detect retrieval heads (Wu et al. 2024); writes retrieval-heads.json and the model card."""
    import datetime as dt

    from ragattn.assets import default_models_dir, proxy_slug
    from ragattn.proxy import load_proxy
    from ragattn.rerank import retrieval_heads as rh
    from ragattn.rerank import retrieval_profile as rp

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
    payload = rp.profile_payload(
        detection,
        heads,
        proxy=proxy,
        selection=selection,
        command=f"ragattn heads detect --proxy {proxy} --trials {trials} {choice}"
        + (f" --decoding {decoding}" if decoding != "greedy" else ""),
        date=dt.date.today().isoformat(),
    )
    folder = out or default_models_dir() / proxy_slug(loaded)
    rp.write_profile(folder / rp.FILENAME, payload)
    rp.write_card_section(folder / "README.md", rp.card_section(payload))
    typer.echo(rp.card_section(payload))
