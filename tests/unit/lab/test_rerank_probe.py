"""The rerank-probe training helpers (:mod:`ragattn.lab.rerank_probe`, `rerank_card`):
column restriction by kind, depth and layer set; the per-proxy recipe; and leave-one-source-out
scoring that never lets a source see itself."""

from __future__ import annotations

import numpy as np

from ragattn.lab.rerank_card import RECIPE, forward_depth, recipe_for
from ragattn.lab.rerank_probe import (
    Learner,
    ListTable,
    RankList,
    Scorer,
    layer_of,
    leave_one_source_out,
    restrict,
)

NAMES = tuple(
    f"{kind}:{rows}:L{layer}H{head}"
    for kind in ("mass", "best")
    for rows in ("query", "last")
    for layer in range(14)
    for head in range(2)
)


def _table(sources: tuple[str, ...] = ("a", "b", "c")) -> ListTable:
    rng = np.random.default_rng(0)
    lists = tuple(
        RankList(
            source=s,
            qid=f"{s}{i}",
            att=rng.normal(size=(5, len(NAMES))).astype(np.float32),
            minilm=rng.normal(size=5),
            minilm_raw=rng.normal(size=5),
            gains=np.array([1.0, 0, 0, 0, 0]),
        )
        for s in sources
        for i in range(3)
    )
    return ListTable(names=NAMES, lists=lists)


def test_restrict_keeps_the_kinds_the_depth_and_the_layer_set() -> None:
    table = _table()
    kept = restrict(table, kinds=("mass:query", "best:query"), only=(5, 11))
    assert {layer_of(n) for n in kept.names} == {5, 11}
    assert all(n.split(":")[1] == "query" for n in kept.names)
    assert len(kept.names) == 2 * 2 * 2  # kinds x layers x heads
    shallow = restrict(table, kinds=("mass:query",), layers=6, only=(5, 11))
    assert shallow.names == ("mass:query:L5H0", "mass:query:L5H1")
    # the rows follow the columns
    i = NAMES.index("mass:query:L5H1")
    np.testing.assert_array_equal(shallow.lists[0].att[:, 1], table.lists[0].att[:, i])


def test_each_studied_proxy_has_its_recipe_and_others_get_the_default() -> None:
    gemma = recipe_for("gemma3-270m")
    assert tuple(gemma["only"]) == (5, 11) and gemma["l2"] == 0.1
    assert recipe_for("smollm2-135m") is RECIPE
    assert recipe_for("some-local-model") is RECIPE
    assert RECIPE["only"] is None and RECIPE["layers"] is None


def test_a_recipe_forward_stops_after_its_deepest_layer() -> None:
    """The training store and the served forward run to one past the deepest layer read."""
    assert forward_depth(recipe_for("gemma3-270m")) == 12
    assert forward_depth(RECIPE) is None  # every layer
    assert forward_depth({**RECIPE, "layers": 9}) == 9
    assert forward_depth({**RECIPE, "layers": 20, "only": (3,)}) == 4


def test_leave_one_source_out_never_fits_on_the_scored_source() -> None:
    seen: list[set[str]] = []

    def fit(train: ListTable) -> Scorer:
        seen.append({r.source for r in train.lists})
        return lambda r: -np.arange(len(r.gains), dtype=float)  # the gold is always first

    scores = leave_one_source_out(_table(), Learner(name="probe", fit=fit))
    assert set(scores) == {"a", "b", "c"}
    assert seen == [{"b", "c"}, {"a", "c"}, {"a", "b"}]
    assert all(v == 1.0 for v in scores.values())
