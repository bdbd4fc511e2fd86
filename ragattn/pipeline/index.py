"""The retrieval index the pipeline searches: what it must offer, how one is loaded, and what to
say when there is none (the shipped demo corpus is one command away)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ragattn.errors import InvalidInputError
from ragattn.pipeline.options import Mode
from ragattn.retrieve.corpus import Hit

NO_INDEX_HELP = (
    "build an index first, e.g. over the shipped demo corpus: "
    "ragattn index build --corpus {demo} --out .ragattn/demo-index "
    "(or any folder of .txt/.md files or a JSONL corpus), then pass --index .ragattn/demo-index"
)


class SearchIndex(Protocol):
    """What the pipeline needs from an index (:class:`ragattn.retrieve.Index` is one)."""

    def search(self, query: str, k: int = 10, *, mode: Mode = "hybrid") -> list[Hit]: ...


def demo_corpus_dir() -> Path:
    """The shipped demo corpus: a dozen short Markdown passages (package data)."""
    return Path(__file__).parent.parent / "data" / "demo_corpus"


def no_index_help() -> str:
    """How to build an index, naming the shipped demo corpus."""
    return NO_INDEX_HELP.format(demo=demo_corpus_dir())


def load_index(directory: str | Path | None) -> Any:
    """Load a :class:`ragattn.retrieve.Index`, or explain how to build one.

    Raises:
        InvalidInputError: no directory given, it does not exist, or it is not a readable index.
    """
    from ragattn.retrieve import Index

    if directory is None:
        raise InvalidInputError("no retrieval index given; " + no_index_help())
    path = Path(directory)
    if not path.is_dir():
        raise InvalidInputError(f"no index at {path}; " + no_index_help())
    return Index.load(path)


__all__ = ["NO_INDEX_HELP", "SearchIndex", "demo_corpus_dir", "load_index", "no_index_help"]
