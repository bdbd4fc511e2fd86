"""Fitting the document probe of ``attention-probe`` and writing its model card
(``ragattn probe train --kind rerank``).

The recipe (pooled kinds, layers read, L2 strength) is :data:`RECIPE`, the outcome of the study in
``studies/rerank_probe_study.py`` (BENCHMARKS.md §2, "Document probes over every head"), chosen by
leave-one-source-out nDCG@10. This module re-extracts (or reads from the feature store) the
training lists, reports the recipe's and MiniLM's leave-one-source-out scores, fits the probe on
every list and writes ``rerank-probe.npz`` and a card section in ``README.md``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ragattn.assets import proxy_slug
from ragattn.document_probe import PROBE_FILE, DocumentProbe
from ragattn.lab import rerank_lists as rl
from ragattn.lab.feature_store import FeatureStore
from ragattn.lab.profile_writers import replace_card_section
from ragattn.lab.rerank_features import extract
from ragattn.lab.rerank_probe import (
    ListTable,
    build_table,
    fit_residual,
    layer_of,
    leave_one_source_out,
    minilm_learner,
    residual_learner,
    restrict,
)
from ragattn.proxy import Proxy
from ragattn.sentence_attention import attention_config

CARD_START = "<!-- rerank-probe:start -->"
CARD_END = "<!-- rerank-probe:end -->"

RECIPE: Mapping[str, Any] = MappingProxyType(
    {
        "kinds": ("mass:query", "best:query"),
        "layers": None,
        "only": None,
        "l2": 1.0,
        "max_doc_tokens": 128,
    }
)
"""Pooled kinds, leading layers read (None: all), the layers kept among them (None: all), L2
strength and the documents' token cut. SmolLM2's recipe, and the one for proxies not studied."""

RECIPES: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "smollm2-135m": RECIPE,
        # BENCHMARKS.md §2 "Gemma-3-270M beside SmolLM2": only the full-attention layers 5 and 11
        # carry the signal (its sliding-window layers see 512 tokens back), and the forward stops
        # after 12 of its 18 layers; chosen on lists 1-210, confirmed on lists 211-420 by a
        # declared rule.
        "gemma3-270m": MappingProxyType({**RECIPE, "only": (5, 11), "l2": 0.1}),
    }
)
"""The recipe of each studied proxy, by its slug (:func:`ragattn.assets.proxy_slug`)."""


def recipe_for(slug: str) -> Mapping[str, Any]:
    """The studied recipe of the proxy ``slug``, or :data:`RECIPE` for any other proxy."""
    return RECIPES.get(slug, RECIPE)


def forward_depth(recipe: Mapping[str, Any]) -> int | None:
    """The layers a recipe's forward must run (None: all): one past the deepest layer it reads.
    The training store is extracted at this depth, and the served forward stops there."""
    only = recipe.get("only")
    if only:
        return max(int(x) for x in only) + 1
    layers = recipe.get("layers")
    return None if layers is None else int(layers)


DEPTH_HELP = (
    "layers the stored forward runs: 'recipe' (the proxy's studied recipe: Gemma 12, others all), "
    "'all', or a number"
)
"""The help of the studies' ``--depth`` option (:func:`store_depth` reads it)."""


def store_depth(spec: str, proxy: Proxy) -> int | None:
    """A studies' ``--depth`` option: ``"recipe"`` (the proxy's :func:`forward_depth`), ``"all"``
    (None) or a number of layers."""
    if spec == "recipe":
        return forward_depth(recipe_for(proxy_slug(proxy)))
    return None if spec == "all" else int(spec)


def fit_document_probe(
    proxy: Proxy,
    data_dir: Path,
    out_dir: Path,
    *,
    store: FeatureStore,
    limit: int | None = None,
    recipe: Mapping[str, Any] | None = None,
    command: str = "ragattn probe train --kind rerank",
    progress: bool = True,
    cache_dir: str | Path | None = None,
) -> str:
    """Extract the first ``limit`` training lists (resumable), fit, save, write the card;
    returns the card text. ``recipe`` defaults to the proxy's studied one (:func:`recipe_for`);
    the lists and MiniLM scores are cached under ``cache_dir`` (``RAGATTN_CACHE_DIR``)."""
    recipe = recipe_for(proxy_slug(proxy)) if recipe is None else recipe
    max_tokens = int(recipe["max_doc_tokens"])
    lists = rl.cached_lists(
        f"train-{max_tokens}",
        lambda: rl.round_robin(data_dir, proxy.tokenizer, max_tokens=max_tokens),
        tokenizer=proxy.name,
        cache_dir=cache_dir,
    )[:limit]
    full = build_table(extract(store, lists, progress=progress), cache_dir=cache_dir)
    only = recipe.get("only")
    table = restrict(full, kinds=tuple(recipe["kinds"]), layers=recipe["layers"], only=only)
    l2 = float(recipe["l2"])
    loso = leave_one_source_out(table, residual_learner(l2))
    base = leave_one_source_out(table, minilm_learner())
    a, w = fit_residual(table, l2)
    depth = max(layer_of(n) for n in table.names) + 1
    kinds = {n.split(":")[1] for n in table.names}
    rows = kinds.pop() if len(kinds) == 1 else "both"
    config = {
        **attention_config(proxy, rows=rows, layers=depth),  # type: ignore[arg-type]
        "max_doc_tokens": max_tokens,
        "kinds": list(recipe["kinds"]),
        "only_layers": None if only is None else list(only),
        "proxy_layers": proxy.num_layers,
        "l2": l2,
        "lists": len(table.lists),
        "loso_ndcg10": loso,
        "minilm_loso_ndcg10": base,
    }
    probe = DocumentProbe(columns=table.names, weights=w, minilm_weight=a, config=config)
    out_dir.mkdir(parents=True, exist_ok=True)
    probe.save(out_dir / PROBE_FILE)
    card = _card(proxy, table, loso, base, probe, command)
    replace_card_section(
        out_dir / "README.md", f"{CARD_START}\n{card}{CARD_END}", CARD_START, CARD_END
    )
    return card


def _layers_read(probe: DocumentProbe) -> str:
    only = probe.config.get("only_layers")
    if only:
        return "layers " + ", ".join(str(x) for x in only)
    return f"layers 0-{probe.layers - 1}"


def _card(
    proxy: Proxy,
    table: ListTable,
    loso: Mapping[str, float],
    base: Mapping[str, float],
    probe: DocumentProbe,
    command: str,
) -> str:
    counts = Counter(r.source for r in table.lists)
    docs: Counter[str] = Counter()
    gold: Counter[str] = Counter()
    for r in table.lists:
        docs[r.source] += len(r.gains)
        gold[r.source] += int((r.gains > 0).sum())
    macro, macro_base = float(np.mean(list(loso.values()))), float(np.mean(list(base.values())))
    lines = [
        f"# Document probe for `{proxy.name}` (`{PROBE_FILE}`, method `attention-probe`)",
        "",
        f"Written by `{command}` on {dt.date.today().isoformat()}.",
        "Ranking lists in the retrieval shape: each is BM25's top 20 over a pooled training "
        "corpus, documents cut to "
        f"{probe.config['max_doc_tokens']} proxy tokens, order shuffled, gold kept where BM25 "
        "found it (`ragattn/lab/rerank_lists.py`; no evaluation slice is read).",
        "Score: `a * z(MiniLM) + w . z(attention)`, z-scored within the list; `a` is fitted on "
        "MiniLM alone and held fixed, `w` by an L2 pairwise logistic loss "
        f"(l2 = {probe.config['l2']}) over the pooled kinds {probe.config['kinds']} of "
        f"{_layers_read(probe)} ({len(probe.columns)} columns); a = {probe.minilm_weight:.3f}. "
        f"The forward runs {probe.layers} of the proxy's {probe.config.get('proxy_layers', '?')} "
        "layers and stops.",
        "The recipe was chosen by leave-one-source-out nDCG@10 (each source scored by a model "
        "fitted on the others), never by in-domain fit (`studies/rerank_probe_study.py`, "
        "BENCHMARKS.md §2).",
        "",
        "| source | lists | documents | gold | LOSO nDCG@10, probe | LOSO nDCG@10, MiniLM |",
        "|---|---|---|---|---|---|",
        *[
            f"| {s} | {counts[s]} | {docs[s]} | {gold[s]} | {loso[s]:.4f} | {base[s]:.4f} |"
            for s in sorted(counts)
        ],
        f"| **macro** | **{len(table.lists)}** | | | **{macro:.4f}** | **{macro_base:.4f}** |",
        "",
        "**How the rerank default is chosen** (declared before measuring; `ragattn.rerank."
        "DEFAULT_METHOD`): the best mean nDCG@10 over DL19 top-100 and SciFact top-100 "
        "(candidates shuffled, order-free) among methods that rerank 20 passages of 128 tokens "
        "in at most 1.0 s on 2 CPU cores, generation included; a tie (within 0.5 point) goes to "
        "the cheaper method. The obvious cases are a floor, measured on the held-back half and on "
        "cases written after the choice (`tests/data/README.md`). The measured candidates are in "
        "BENCHMARKS.md §2.",
        "",
    ]
    return "\n".join(lines)


__all__: Sequence[str] = ("RECIPE", "RECIPES", "fit_document_probe", "recipe_for")
