"""Which proxy the default one read gives each question of the context sets.

The rule of issue 61 (docs/research/languages.md): a call is read by the English proxy only when
its documents, and then its query, are English (:func:`ragattn.call_language.call_language`).
This counts, per set, the questions each language took: every English set must route every
question to English (nothing may move an English call), every XQuAD set to its own language.
No model runs; titles and plain strings route alike (titles are not read by the detector).

    python studies/language_routing.py --data-dir DATA [--set hotpotqa ...]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from ragattn.call_language import call_language
from ragattn.lab.evaluation.context import SETS, load_context_set

ENGLISH_SETS = ("hotpotqa", "hotpotqa-fullwiki", "2wiki", "scifact", "squad", "techdocs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--set", action="append", dest="sets")
    args = parser.parse_args()
    names = args.sets or [*ENGLISH_SETS, *(n for n in SETS if n.startswith("xquad-"))]
    out: dict[str, dict[str, int]] = {}
    for name in names:
        if name not in SETS:
            print(f"{name}: not a set, skipped")
            continue
        questions = load_context_set(name, args.data_dir, titles=False)
        started = time.perf_counter()
        counts = Counter(call_language(q.query, q.candidates) for q in questions)
        per_call = (time.perf_counter() - started) / max(len(questions), 1) * 1000
        out[name] = dict(counts.most_common())
        print(f"{name}: {len(questions)} questions -> {out[name]} ({per_call:.2f} ms a call)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
