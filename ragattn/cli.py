"""The ``ragattn`` command line: builds settings at the edge and calls the library.

Sub-command groups live next to what they drive (``ragattn.retrieve.cli``, ``ragattn.evaluation.cli``
...) and are attached here; heavy imports happen inside commands so ``ragattn --help`` stays fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="ragattn",
    help="Attention-based reranking and compression of retrieved context for RAG.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# --- sub-command groups (one line each; keep this block sorted) ---


@app.command()
def version() -> None:
    """Print the ragattn version."""
    from ragattn import __version__

    typer.echo(__version__)


if __name__ == "__main__":
    app()
