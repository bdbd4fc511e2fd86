"""Document probes over every head, chosen by how they transfer (issue 27, items 2-3).

A table holds, per ranking list, the z-scored per-head document features
(:func:`ragattn.lab.rerank_features.pool_documents`), the packaged MiniLM's cosine of each document
and its 0/1 (or graded) labels. Learners are fitted on some sources and scored on others:

- ``logreg``: L2 logistic regression on the within-list z-scores (pointwise);
- ``l1``: the same with an L1 penalty (few heads);
- ``residual``: attention as a correction on top of MiniLM: a pairwise logistic model whose
  margin is ``a * z(minilm) + w . z(attention)``, with ``a`` fitted on MiniLM alone first and held
  fixed, so the learner cannot trade MiniLM away for a signal that works only in-domain;
- ``lambdamart``: LightGBM's lambdarank on the attention columns, started from ``a * z(minilm)``
  (the same residual idea for trees).

Every feature is z-scored within its list and no feature reads the input position, so every model
is order-free. Models are chosen by leave-one-source-out nDCG@10 (each source scored by a model
fitted on the others), macro-averaged over sources, never by in-domain fit.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragattn.document_probe import zscore_columns
from ragattn.lab.cache_dirs import lab_cache_dir
from ragattn.lab.evaluation.metrics import list_ndcg_at_10
from ragattn.lab.rerank_features import ListFeatures, pool_documents


def minilm_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """``<cache_dir>/rerank-minilm`` (``cache_dir``: ``RAGATTN_CACHE_DIR``, default
    ``~/.cache/ragattn``)."""
    return lab_cache_dir(cache_dir, "rerank-minilm")


def minilm_scores(item: ListFeatures, cache_dir: str | Path | None = None) -> np.ndarray:
    """The ``minilm`` method's raw cosine of each document (``title + text``), cached on disk
    under :func:`minilm_cache_dir`."""
    from ragattn.rerank.features import dense_local

    r = item.ranking
    key = hashlib.sha256(
        "\x1f".join([r.query, *(f"{d.title or ''}\x1e{d.text}" for d in r.documents)]).encode()
    ).hexdigest()[:24]
    path = minilm_cache_dir(cache_dir) / f"{key}.npy"
    if path.is_file():
        return np.load(path)
    scores = np.asarray(dense_local(r.query, r.documents), dtype=np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
    np.save(tmp, scores)
    tmp.replace(path)
    return scores


@dataclass(frozen=True, slots=True, kw_only=True)
class RankList:
    """One list's model inputs: z-scored attention features ``[n, F]``, z(MiniLM) ``[n]``,
    MiniLM's raw cosine and the gains."""

    source: str
    qid: str
    att: np.ndarray
    minilm: np.ndarray
    minilm_raw: np.ndarray
    gains: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTable:
    names: tuple[str, ...]
    lists: tuple[RankList, ...]

    def sources(self) -> list[str]:
        return list(dict.fromkeys(r.source for r in self.lists))

    def select(self, columns: np.ndarray) -> ListTable:
        return ListTable(
            names=tuple(self.names[i] for i in columns),
            lists=tuple(
                RankList(
                    source=r.source,
                    qid=r.qid,
                    att=r.att[:, columns],
                    minilm=r.minilm,
                    minilm_raw=r.minilm_raw,
                    gains=r.gains,
                )
                for r in self.lists
            ),
        )


def build_table(items: Iterable[ListFeatures], *, cache_dir: str | Path | None = None) -> ListTable:
    """Pool, z-score and stack every list's features (float32 to keep 3,000 lists in memory);
    the MiniLM scores are cached under ``cache_dir`` (:func:`minilm_cache_dir`)."""
    lists: list[RankList] = []
    names: tuple[str, ...] = ()
    for item in items:
        pooled_names, pooled = pool_documents(item)
        names = names or pooled_names
        att = zscore_columns(pooled).astype(np.float32)
        raw = minilm_scores(item, cache_dir)
        lists.append(
            RankList(
                source=item.ranking.source,
                qid=item.ranking.qid,
                att=att,
                minilm=zscore_columns(raw[:, None])[:, 0],
                minilm_raw=raw,
                gains=np.asarray(item.ranking.labels, dtype=np.float64),
            )
        )
    return ListTable(names=names, lists=tuple(lists))


# ------------------------------------------------------------------------------------- learners

Scorer = Callable[[RankList], np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class Learner:
    """A named recipe: ``fit(table) -> scorer``."""

    name: str
    fit: Callable[[ListTable], Scorer]
    params: dict[str, Any] = field(default_factory=dict)


def _stack(table: ListTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.concatenate([r.att for r in table.lists]).astype(np.float64)
    y = np.concatenate([(r.gains > 0).astype(np.float64) for r in table.lists])
    m = np.concatenate([r.minilm for r in table.lists])
    return x, y, m


def _pairs(table: ListTable) -> tuple[np.ndarray, np.ndarray]:
    """Within-list (positive - negative) differences of attention and of z(MiniLM)."""
    dx: list[np.ndarray] = []
    dm: list[np.ndarray] = []
    for r in table.lists:
        pos = np.flatnonzero(r.gains > 0)
        neg = np.flatnonzero(r.gains <= 0)
        if not len(pos) or not len(neg):
            continue
        p, n = np.meshgrid(pos, neg, indexing="ij")
        dx.append((r.att[p.ravel()] - r.att[n.ravel()]).astype(np.float64))
        dm.append(r.minilm[p.ravel()] - r.minilm[n.ravel()])
    return np.concatenate(dx), np.concatenate(dm)


def minilm_slope(table: ListTable) -> float:
    """The pairwise-logistic slope of z(MiniLM) alone (the residual models' fixed base)."""
    from scipy.optimize import minimize_scalar

    _, dm = _pairs(table)
    res = minimize_scalar(lambda a: float(np.logaddexp(0.0, -a * dm).mean()), bounds=(0, 20))
    return float(res.x)


def minilm_learner() -> Learner:
    return Learner(name="minilm", fit=lambda table: lambda r: r.minilm_raw)


def logreg_learner(c: float, *, penalty: str = "l2", with_minilm: bool = False) -> Learner:
    """Pointwise logistic regression on z(attention) (and z(MiniLM) as a feature if asked)."""
    from sklearn.linear_model import LogisticRegression

    def fit(table: ListTable) -> Scorer:
        x, y, m = _stack(table)
        if with_minilm:
            x = np.concatenate([x, m[:, None]], axis=1)
        model = (
            LogisticRegression(C=c, l1_ratio=1.0, solver="saga", max_iter=2000)
            if penalty == "l1"
            else LogisticRegression(C=c, max_iter=2000)
        )
        model.fit(x, y)
        w = model.coef_[0]

        def score(r: RankList) -> np.ndarray:
            z = r.att.astype(np.float64)
            if with_minilm:
                z = np.concatenate([z, r.minilm[:, None]], axis=1)
            return z @ w

        return score

    tag = ("l1" if penalty == "l1" else "logreg") + ("+minilm" if with_minilm else "")
    return Learner(name=f"{tag}(C={c:g})", fit=fit, params={"C": c, "penalty": penalty})


def fit_residual(table: ListTable, l2: float) -> tuple[float, np.ndarray]:
    """``(a, w)`` of the pairwise logistic model ``a * dz(minilm) + w . dz(attention)``: ``a`` is
    fitted on MiniLM alone and held fixed as the offset; ``w`` under an L2 penalty ``l2``."""
    from scipy.optimize import minimize

    a = minilm_slope(table)
    dx, dm = _pairs(table)
    off = a * dm
    n = len(dm)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        margin = off + dx @ w
        value = np.logaddexp(0.0, -margin).mean() + 0.5 * l2 * float(w @ w)
        sig = np.exp(-np.logaddexp(0.0, margin))  # sigmoid(-margin)
        grad = -(dx.T @ sig) / n + l2 * w
        return float(value), grad

    res = minimize(loss, np.zeros(dx.shape[1]), jac=True, method="L-BFGS-B")
    return a, np.asarray(res.x)


def residual_learner(l2: float) -> Learner:
    """Attention as a correction on top of MiniLM (:func:`fit_residual`)."""

    def fit(table: ListTable) -> Scorer:
        a, w = fit_residual(table, l2)
        return lambda r: a * r.minilm + r.att.astype(np.float64) @ w

    return Learner(name=f"residual(l2={l2:g})", fit=fit, params={"l2": l2})


def layer_of(name: str) -> int:
    """The layer of a pooled column name (``mass:query:L12H3`` -> 12)."""
    return int(name.rsplit(":L", 1)[1].split("H", 1)[0])


def restrict(
    table: ListTable,
    *,
    kinds: Sequence[str] = (),
    layers: int | None = None,
    only: Sequence[int] | None = None,
) -> ListTable:
    """The columns of the given pooled kinds (``mass:query``, ``best:last``, ...; all when empty)
    in layers ``< layers`` (all when None), and only in the layers ``only`` when given (Gemma 3's
    full-attention layers: its sliding-window layers see 512 tokens back, not a whole list)."""
    keep = [
        i
        for i, n in enumerate(table.names)
        if (not kinds or any(n.startswith(k + ":") for k in kinds))
        and (layers is None or layer_of(n) < layers)
        and (only is None or layer_of(n) in only)
    ]
    return table.select(np.asarray(keep, dtype=int))


def lambdamart_learner(*, leaves: int = 7, trees: int = 200, lr: float = 0.05) -> Learner:
    """LightGBM lambdarank on z(attention), boosting from ``a * z(minilm)``."""

    def fit(table: ListTable) -> Scorer:
        import lightgbm as lgb

        a = minilm_slope(table)
        x = np.concatenate([r.att for r in table.lists]).astype(np.float32)
        y = np.concatenate([(r.gains > 0).astype(int) for r in table.lists])
        init = np.concatenate([a * r.minilm for r in table.lists])
        group = [len(r.gains) for r in table.lists]
        model = lgb.LGBMRanker(
            n_estimators=trees,
            learning_rate=lr,
            num_leaves=leaves,
            min_child_samples=50,
            subsample=0.8,
            subsample_freq=1,
            colsample_bytree=0.3,
            reg_lambda=10.0,
            n_jobs=2,
            verbose=-1,
        )
        model.fit(x, y, group=group, init_score=init)
        return lambda r: a * r.minilm + model.predict(r.att.astype(np.float32))

    return Learner(
        name=f"lambdamart(leaves={leaves},trees={trees})",
        fit=fit,
        params={"leaves": leaves, "trees": trees, "lr": lr},
    )


# ---------------------------------------------------------------------------------- evaluation


def ndcg(scorer: Scorer, lists: Sequence[RankList]) -> float:
    """Mean nDCG@10 of ``scorer`` over ``lists`` (gains as labelled)."""
    if not lists:
        return float("nan")
    values = list_ndcg_at_10([scorer(r) for r in lists], [r.gains for r in lists])
    return float(values.mean())


def leave_one_source_out(table: ListTable, learner: Learner) -> dict[str, float]:
    """nDCG@10 of each source, scored by the learner fitted on every other source."""
    out: dict[str, float] = {}
    for source in table.sources():
        train = ListTable(
            names=table.names, lists=tuple(r for r in table.lists if r.source != source)
        )
        test = [r for r in table.lists if r.source == source]
        out[source] = ndcg(learner.fit(train), test)
    return out
