"""techdocs with the units of before issue 60: every text split into sentences, no Markdown units.

The "before issue 60" rows of BENCHMARKS.md's technical documentation table: the same set and
harness as ``ragattn eval context --dataset techdocs``, ``looks_like_markdown`` saying no, so
the read and the stuffing systems split and join every candidate by sentences as they did before.

    python studies/techdocs_sentence_units.py --dataset techdocs [--no-titles] \\
        --budget 0.2 --budget 256 --system rerank-stuff,lexical
"""

from __future__ import annotations

import sys

import ragattn.markdown_units as markdown_units
from ragattn.cli import app


def main() -> None:
    markdown_units.looks_like_markdown = lambda text: False  # every text split into sentences
    sys.argv = ["ragattn", "eval", "context", *sys.argv[1:]]
    app()


if __name__ == "__main__":
    main()
