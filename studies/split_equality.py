"""Which candidates of the shared context sets split differently after issues 59 and 60.

The read's units are each candidate's sentences (``split_sentences``), or its Markdown structure
(``ragattn.markdown_units``) where the text is Markdown. Round six bounded a sentence at
``MAX_SENTENCE_BYTES`` (issue 59) and added the Markdown units (issue 60). A candidate whose units
are unchanged is read and kept exactly as before, so a set none of whose candidates changed has the
same context tables by construction. This counts, per set, the candidates read as Markdown and
those whose sentences the bound cut (no model runs: seconds).

    python studies/split_equality.py [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ragattn.sentences as sentences
from ragattn.lab.evaluation.context import load_context_set
from ragattn.markdown_units import markdown_units

SETS = {
    "hotpotqa": None,
    "hotpotqa-fullwiki": 100,
    "2wiki": 200,
    "scifact": None,
    "squad": None,
}
"""The sets of BENCHMARKS.md's context tables, with the slices they run on."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    bound = sentences.MAX_SENTENCE_BYTES
    print("| set | candidates | read as Markdown | sentences cut by the bound |")
    print("|---|---|---|---|")
    for name, limit in SETS.items():
        texts = sorted(
            {
                d.text
                for q in load_context_set(name, args.data_dir, limit=limit)
                for d in q.candidates
            }
        )
        markdown = sum(markdown_units(t) is not None for t in texts)
        cut = 0
        for text in texts:
            sentences.clear_split_cache()
            sentences.MAX_SENTENCE_BYTES = 1 << 62
            unbounded = sentences.split_sentences(text)
            sentences.clear_split_cache()
            sentences.MAX_SENTENCE_BYTES = bound
            cut += sentences.split_sentences(text) != unbounded
        print(f"| {name} | {len(texts)} | {markdown} | {cut} |")


if __name__ == "__main__":
    main()
