"""More inputs for the document-aware selection? Grouped CV on the training questions only.

Issue 28's 2Wiki target (recall at 20 % >= 0.75) is 2.0 points away with the title links. The
links say that another document's sentence names this document; they do not say whether that
other document matters. This study scores candidate inputs on the selection's own training table
(``ragattn probe train --kind selection``'s stored features; nothing is extracted when the store
is full), beside the shipped five inputs:

- ``namer_z``: the document-probe z of the most relevant *other* document whose sentences name
  this document's title (0 when none does);
- ``bridge2``: the title link read a second time, with the document-aware keep probabilities of a
  first combination (fitted on the same training folds) in place of the sentence probe's;
- ``log_width``: the log of the sentence's width in proxy tokens (the budget is in tokens).

The rule, declared before the first run (BENCHMARKS.md §3): an input set enters the packaged
``selection.json`` only if it raises the grouped-CV macro recall at 20 % by at least 1 point over
the five shipped inputs, and then no shared dev set may fall by more than 0.5 point.

    python studies/selection_inputs.py --threads 2 --out /tmp/selection_inputs.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ragattn.assets import packaged_models_dir, proxy_slug
from ragattn.compress.links import link_inputs, title_pattern
from ragattn.compress.model_files import probe_path
from ragattn.compress.probe import Probe
from ragattn.compress.selection import combination_inputs
from ragattn.document_probe import (
    DocumentProbe,
    document_probe_path,
    zscore_columns,
)
from ragattn.lab.feature_store import FeatureStore, default_root
from ragattn.lab.selection_training import recall_at_budget, scored_questions
from ragattn.lexical import sigmoid
from ragattn.proxy import load_proxy
from ragattn.sentence_attention import Unit, unit_widths
from ragattn.settings import Settings
from ragattn.types import Document

CACHE_DIR = Settings.from_env().cache_dir
"""RAGATTN_CACHE_DIR, read here at the edge: where the lab keeps its lists and features."""


@dataclass(frozen=True, slots=True)
class Row:
    """One question: the shipped five inputs, the candidates, labels and widths."""

    source: str
    base: np.ndarray  # [n, 5]: combination_inputs + link_inputs
    namer_z: np.ndarray  # [n]
    log_width: np.ndarray  # [n]
    probability: np.ndarray
    y: np.ndarray
    widths: np.ndarray
    question: str
    documents: tuple[Document, ...]
    units: tuple[Unit, ...]


def namer_z(documents: Sequence[Document], units: Sequence[Unit], doc_z: np.ndarray) -> np.ndarray:
    """Per unit: the highest document z among the other documents that name its document."""
    texts = [documents[u.doc].text[u.start : u.end] for u in units]
    out = np.zeros(len(documents))
    for d, doc in enumerate(documents):
        pattern = title_pattern(doc.title)
        if pattern is None:
            continue
        namers = {
            u.doc for u, t in zip(units, texts, strict=True) if u.doc != d and pattern.search(t)
        }
        if namers:
            out[d] = max(doc_z[n] for n in namers)
    return out[[u.doc for u in units]]


def build(threads: int, limit: int | None) -> list[Row]:
    proxy = load_proxy("smollm2-135m", threads=threads)
    store = FeatureStore(default_root(CACHE_DIR), proxy)
    folder = packaged_models_dir()
    slug = proxy_slug(proxy)
    sentence_probe = Probe.load(probe_path(folder, proxy.name, "sentinel"))
    document_probe = DocumentProbe.load(document_probe_path(folder, slug))
    rows = []
    for q in scored_questions(
        proxy, Path("../shared/data"), store, sentence_probe, document_probe, limit=limit
    ):
        ex, units, labels, p, raw = q.example, q.units, q.labels, q.probability, q.document_scores
        doc_of = [u.doc for u in units]
        base = np.concatenate(
            [combination_inputs(p, doc_of, raw), link_inputs(ex.question, ex.documents, units, p)],
            axis=1,
        )
        z = zscore_columns(np.asarray(raw, dtype=np.float64)[:, None])[:, 0]
        widths = unit_widths(proxy.tokenizer, ex.documents, units)
        rows.append(
            Row(
                ex.source,
                base,
                namer_z(ex.documents, units, z),
                np.log(np.maximum(widths, 1)),
                p,
                labels,
                widths,
                ex.question,
                tuple(ex.documents),
                tuple(units),
            )
        )
    return rows


def design(name: str) -> Callable[[Row, np.ndarray | None], np.ndarray]:
    """The x of a row under a candidate set (``first``: a first combination's probabilities)."""

    def x(row: Row, first: np.ndarray | None) -> np.ndarray:
        cols = [row.base]
        if "namer_z" in name:
            cols.append(row.namer_z[:, None])
        if "log_width" in name:
            cols.append(row.log_width[:, None])
        if "bridge2" in name:
            assert first is not None
            cols.append(link_inputs(row.question, row.documents, row.units, first)[:, 1:])
        return np.concatenate(cols, axis=1)

    return x


def fit(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=1.0, max_iter=3000).fit(np.concatenate(xs), np.concatenate(ys))
    return m.coef_[0], float(m.intercept_[0])


def cv(rows: Sequence[Row], name: str, folds: int = 5) -> dict[str, float]:
    from sklearn.model_selection import GroupKFold

    make = design(name)
    scores = np.zeros(len(rows))
    index = np.arange(len(rows))
    for tr, te in GroupKFold(n_splits=folds).split(index, groups=index):
        first: dict[int, np.ndarray] = {}
        if "bridge2" in name:
            w0, b0 = fit([rows[i].base for i in tr], [rows[i].y for i in tr])
            first = {i: sigmoid(rows[i].base @ w0 + b0) for i in index}
        w, b = fit([make(rows[i], first.get(i)) for i in tr], [rows[i].y for i in tr])
        for i in te:
            r = rows[i]
            scores[i] = recall_at_budget(sigmoid(make(r, first.get(i)) @ w + b), r.y, r.widths)
    sources = sorted({r.source for r in rows})
    per = {
        s: float(np.mean([v for v, r in zip(scores, rows, strict=True) if r.source == s]))
        for s in sources
    }
    per["macro"] = float(np.mean([per[s] for s in sources]))
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = build(args.threads, args.limit)
    names = [
        "shipped",
        "namer_z",
        "log_width",
        "bridge2",
        "namer_z+bridge2",
        "namer_z+bridge2+log_width",
    ]
    table = {n: cv(rows, n) for n in names}
    sources = sorted({r.source for r in rows})
    print(f"{len(rows)} questions, CPU {torch.backends.cpu.get_cpu_capability()}")
    print("| inputs | " + " | ".join(sources) + " | macro | Δ macro |")
    print("|---" * (len(sources) + 3) + "|")
    ref = table["shipped"]["macro"]
    for n, per in table.items():
        cells = " | ".join(f"{per[s]:.3f}" for s in sources)
        print(f"| {n} | {cells} | {per['macro']:.4f} | {100 * (per['macro'] - ref):+.1f} |")
    if args.out:
        args.out.write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
