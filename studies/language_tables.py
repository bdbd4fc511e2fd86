"""The languages tables of BENCHMARKS.md from ``ragattn eval context --out`` JSON files.

Each file is one set read by one proxy; this prints, per file, evidence recall at 20 % and at 256
tokens for the one read, BM25's order (``first-stage``), the no-attention ``lexical``
compressor and ``rerank-stuff``, the margin over the better baseline, the one read's seconds a
question, and any result over its budget.

    python studies/language_tables.py results/languages/*.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BUDGETS = ("ratio 0.2", "256 tokens")


def rows_of(path: Path) -> dict[tuple[str, str], dict[str, float]]:
    report = json.loads(path.read_text())
    return {(r["budget"], r["system"]): r for r in report["rows"]}


def main() -> None:
    print(
        "| file | proxy | one read @0.2 / @256 | BM25 order | lexical | rerank-stuff "
        "| one read - better baseline | s / question | over |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in sys.argv[1:]:
        path = Path(name)
        report = json.loads(path.read_text())
        rows = rows_of(path)

        def cell(system: str, rows: dict = rows) -> str:
            values = [rows.get((b, system), {}).get("evidence_recall") for b in BUDGETS]
            return " / ".join("–" if v is None else f"{v:.3f}" for v in values)

        margins = []
        for b in BUDGETS:
            one = rows.get((b, "one-read"), {}).get("evidence_recall")
            base = [
                rows[(b, s)]["evidence_recall"]
                for s in ("first-stage", "lexical")
                if (b, s) in rows
            ]
            margins.append("–" if one is None or not base else f"{100 * (one - max(base)):+.1f}")
        seconds = rows.get((BUDGETS[0], "one-read"), {}).get("seconds")
        over = sum(len(r.get("over_ids", [])) for r in rows.values())
        proxy = report["fingerprint"].split("@")[0]
        print(
            f"| {report['dataset']} | {proxy} | {cell('one-read')} | {cell('first-stage')} "
            f"| {cell('lexical')} | {cell('rerank-stuff')} | {' / '.join(margins)} "
            f"| {'–' if seconds is None else f'{seconds:.2f}'} | {over} |"
        )


if __name__ == "__main__":
    main()
