"""``ragattn index build`` / ``ragattn index search``: persisted first-stage retrieval indexes.

Heavy imports (bm25s, faiss, sentence-transformers) happen inside the commands so that
``ragattn --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

index_app = typer.Typer(
    help="Build and search first-stage retrieval indexes (BM25 + dense + hybrid).",
    no_args_is_help=True,
)


def _one_line(text: str) -> str:
    """``text`` with every unprintable character (a newline in a file name) escaped, so one
    message stays one line whatever the corpus names hold."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {_one_line(str(exc))}", err=True)
    return typer.Exit(code=2)


@index_app.command("build")
def build(
    corpus: Annotated[
        Path,
        typer.Option(
            help="BEIR corpus.jsonl, JSONL with id/text per line, or a folder of .txt/.md"
        ),
    ],
    out: Annotated[Path, typer.Option(help="index directory (replaced atomically if it exists)")],
    bm25_backend: Annotated[str, typer.Option(help="bm25s (fast, default) or rank_bm25")] = "bm25s",
    chunk_words: Annotated[
        str,
        typer.Option(
            help="chunk size in words; 'auto' = 200 for folders, whole JSONL records; 0 = none"
        ),
    ] = "auto",
    chunk_overlap: Annotated[int, typer.Option(help="words shared by consecutive chunks")] = 40,
    dense: Annotated[
        bool, typer.Option("--dense/--no-dense", help="also build the MiniLM FAISS index")
    ] = True,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="show progress bars")
    ] = True,
    follow_symlinks: Annotated[
        bool,
        typer.Option(
            "--follow-symlinks",
            help="in a folder corpus, also read symbolic links leading outside the folder "
            "(skipped by default: they could expose any file you can read)",
        ),
    ] = False,
) -> None:
    """Read a corpus, chunk it, and write a BM25 + dense index with a manifest.

    A folder corpus is read as found, whatever its origin: FIFOs, sockets and devices are
    skipped, and so are symbolic links leading outside the folder unless --follow-symlinks is
    given; every skip is listed on stderr. A refusal is one 'error:' line and exit code 2.
    """
    from ragattn.errors import RagattnError
    from ragattn.retrieve.index import Index

    words: int | str | None
    if chunk_words == "auto":
        words = "auto"
    elif chunk_words.isdigit():
        words = int(chunk_words) or None
    else:
        raise _fail(
            ValueError(f"--chunk-words must be 'auto' or a whole number, got {chunk_words!r}")
        )
    try:
        index = Index.build(
            corpus,
            out,
            chunk_words=words,  # type: ignore[arg-type]
            chunk_overlap=chunk_overlap,
            bm25_backend=bm25_backend,  # type: ignore[arg-type]
            dense=dense,
            show_progress=progress,
            follow_symlinks=follow_symlinks,
        )
    except (RagattnError, OSError) as exc:  # OSError: the index could not be written
        raise _fail(exc) from exc
    m = index.manifest
    dense_desc = "none" if m.dense is None else f"{m.dense['index']} dim={m.dense['dim']}"
    typer.echo(
        f"wrote {out}: {m.documents} documents from {m.source_documents} "
        f"({m.source_format}), bm25={m.bm25['backend']}, "
        f"dense={dense_desc}, "
        f"content_hash={m.content_hash[:12]}, reused_vectors={m.reused_vectors}, "
        f"seconds={m.build_seconds}"
    )
    titled = sum(1 for d in index.documents if d.title)
    typer.echo(f"titled: {titled} of {m.documents} documents")
    if m.skipped:
        typer.echo(_one_line(f"skipped {len(m.skipped)}: " + "; ".join(m.skipped)), err=True)


@index_app.command("search")
def search(
    index_dir: Annotated[Path, typer.Argument(help="an index directory written by 'index build'")],
    query: Annotated[str, typer.Argument(help="the query text")],
    k: Annotated[int, typer.Option("-k", "--top-k", help="number of hits")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or dense")] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="print hits as JSON lines")] = False,
) -> None:
    """Search an index and print the top hits."""
    from ragattn.errors import RagattnError
    from ragattn.retrieve.index import Index

    try:
        hits = Index.load(index_dir).search(query, k, mode=mode)  # type: ignore[arg-type]
    except RagattnError as exc:
        raise _fail(exc) from exc
    for hit in hits:
        if as_json:
            typer.echo(json.dumps(hit.to_dict(), ensure_ascii=False))
        else:
            snippet = " ".join(hit.text.split())[:100]
            title = f"[{hit.title}]  " if hit.title else ""
            typer.echo(f"{hit.rank:>3}  {hit.score:8.4f}  {hit.doc_id}  {title}{snippet}")
