"""A first stage's order in the one read (``first_stage_order``, ``first_stage_prior``): the order's
check and rank prior, its blend into the document score, and the read with the packaged proxy.

Without an order, or at weight 0, the read is the read of the documents alone; with a weight, the
order lifts the sentences of the documents it ranks first (at most as far as the document
probe's own score could: the blend is z-scored again by the combination)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragattn.compress import Compressor
from ragattn.compress.selection import check_first_stage_prior, with_rank_prior
from ragattn.contract import VerbArgs
from ragattn.errors import ConfigError, InvalidInputError
from ragattn.first_stage import check_first_stage_order, rank_prior
from ragattn.types import Budget

QUERY = "In which year was the tower built?"
DOCS = [
    "The Eiffel Tower was built in 1889. It stands in Paris.",
    "The Tokyo Tower was built in 1958. It stands in Minato.",
    "Bananas are yellow. They grow in warm places.",
]


def test_the_rank_prior_is_the_dcg_discount_by_document() -> None:
    np.testing.assert_allclose(rank_prior([2, 0, 1]), [1 / np.log2(3), 1 / np.log2(4), 1.0])


@pytest.mark.parametrize(
    "order",
    [[0, 1], [0, 1, 1], [1, 2, 3], [0, 1, 2, 3], ["0", "1", "2"], [True, False, 2], "012"],
)
def test_an_order_that_is_no_permutation_of_the_documents_is_refused(order: Any) -> None:
    with pytest.raises(InvalidInputError, match="first_stage_order"):
        check_first_stage_order(order, 3)


def test_an_order_is_checked_to_a_list_and_none_stays_none() -> None:
    assert check_first_stage_order(np.array([2, 0, 1]), 3) == [2, 0, 1]
    assert check_first_stage_order(None, 3) is None


def test_the_prior_moves_the_document_scores_by_its_weight_in_z_units() -> None:
    scores = np.array([1.0, 0.0, -1.0])
    prior = rank_prior([2, 1, 0])  # the worst-scored document ranked first
    z = (scores - scores.mean()) / scores.std()
    np.testing.assert_allclose(with_rank_prior(scores, prior, 0.0), z)
    blended = with_rank_prior(scores, prior, 5.0)
    assert blended.argmax() == 2 and blended.argmin() == 0


@pytest.mark.parametrize("weight", [-0.5, float("inf"), float("nan"), True, "1"])
def test_a_weight_that_is_not_a_finite_number_at_least_zero_is_refused(weight: Any) -> None:
    with pytest.raises(ConfigError, match="first_stage_prior"):
        check_first_stage_prior(weight)


def test_verb_args_carry_the_order_into_the_cache_key_and_refuse_it_on_rerank() -> None:
    budget = Budget(kind="ratio", value=0.5)
    given = VerbArgs(verb="compress", budget=budget, first_stage_order=[1, 0])
    assert given.first_stage_order == (1, 0)
    assert given.params()["first_stage_order"] == [1, 0]
    assert "first_stage_order" not in VerbArgs(verb="compress", budget=budget).params()
    with pytest.raises(InvalidInputError, match="Reranker.rerank"):
        VerbArgs(verb="rerank", first_stage_order=[0])


def _best(result: Any, doc: int) -> float:
    """The best keep score of document ``doc``'s sentences (in [0, 1])."""
    return max(next(d for d in result.documents if d.index == doc).sentence_scores)


def test_without_weight_the_order_changes_nothing_and_with_one_it_lifts_the_first_ranked(
    proxy: Any,
) -> None:
    """The packaged proxy's read of three documents: at weight 0 an order gives the read of no
    order; with a weight, the tower the order ranks first gains on the other (its best sentence's
    keep score against the other's best), whichever it is."""
    plain = Compressor(proxy)
    base = plain.compress(QUERY, DOCS, target_tokens=12)
    ordered = plain.compress(QUERY, DOCS, target_tokens=12, first_stage_order=[1, 0, 2])
    assert base.compressed_text == ordered.compressed_text
    np.testing.assert_array_equal(
        [d.sentence_scores for d in base.documents],
        [d.sentence_scores for d in ordered.documents],
    )
    weighted = Compressor(proxy, first_stage_prior=2.0)
    for first in (0, 1):
        other = 1 - first
        order = [first, other, 2]
        gap = _best(base, first) - _best(base, other)
        result = weighted.compress(QUERY, DOCS, target_tokens=12, first_stage_order=order)
        assert _best(result, first) - _best(result, other) > gap + 0.01, (order, gap)
        ranked, both = weighted.rerank_and_compress(
            QUERY, DOCS, target_tokens=12, first_stage_order=order
        )
        assert _best(both, first) - _best(both, other) > gap + 0.01
        assert sorted(r.index for r in ranked) == [0, 1, 2]


def test_a_read_refuses_an_order_of_another_length(compressor: Compressor) -> None:
    with pytest.raises(InvalidInputError, match="permutation"):
        compressor.compress(QUERY, DOCS, ratio=0.5, first_stage_order=[0, 1])
    with pytest.raises(InvalidInputError, match="permutation"):
        compressor.rerank_and_compress(QUERY, DOCS, ratio=0.5, first_stage_order=[0, 1, 2, 3])
