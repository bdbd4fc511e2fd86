"""The default reranker on obvious cases, whatever the input order.

Obvious cases are a floor that every rerank default must pass, not a target to tune to (issue 27
item 6). This test reads only the held-back half of the former 34 cases
(``tests/data/obvious_cases_test.json``, split by the rule in ``tests/data/README.md``) and the
cases written after the default was chosen (``obvious_cases_new.json``); the half for choosing
(``obvious_cases_choose.json``) is for studies and is never read here. Each case has one relevant
document among 3-5 same-topic distractors and runs with the relevant document at every position.
Real forward passes of the packaged default (``ragattn.rerank.DEFAULT_METHOD``), no mocks.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragattn import Reranker
from ragattn.rerank import DEFAULT_METHOD, METHODS

README = Path(__file__).resolve().parents[3] / "README.md"
DATA = Path(__file__).resolve().parents[2] / "data"


def _load(split: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    cases = json.loads((DATA / f"obvious_cases_{split}.json").read_text())["cases"]
    return tuple((c["query"], c["relevant"], tuple(c["distractors"])) for c in cases)


FLOOR_SPLITS = {"test": _load("test"), "new": _load("new")}
"""The splits the floor is asserted on: the held-back half and the new cases."""
CASES = FLOOR_SPLITS["test"] + FLOOR_SPLITS["new"]

TARGET_TRIALS_RIGHT = 0.98
"""The target (issue 27): the relevant document first in at least 98 % of the trials, on the
held-back half and on the new cases each. An order-free default is right or wrong on a case under
all its orders at once."""

MEASURED_TRIALS_RIGHT = {
    # minilm-hyde on the new cases: not measured yet (the run did not finish on a loaded machine);
    # its test on that split fails until it is.
    "minilm-hyde": {"test": 68},
    "minilm": {"test": 60, "new": 109},
}
"""Trials with the relevant document first, per method and split (test: 68 trials, new: 127),
measured with ``python studies/obvious_cases.py --split test|new --method minilm-hyde,minilm
--threads 2`` (BENCHMARKS.md §2, "Obvious cases as a floor"). A new default is measured and added
here before it ships."""


def floor_trials_right(method: str, split: str, trials: int) -> int:
    """The target when ``method`` was measured to meet it, else its measured count."""
    target = math.ceil(TARGET_TRIALS_RIGHT * trials)
    measured = MEASURED_TRIALS_RIGHT.get(method, {}).get(split)
    assert measured is not None, (
        f"the default {method!r} has no measured count on the {split!r} split: run "
        f"studies/obvious_cases.py --split {split} --method {method} and add it"
    )
    if measured >= target:
        return target
    # The target is missed by this default (BENCHMARKS.md §2, "Obvious cases as a floor"): the
    # floor is its measured count, so that any regression fails. Raise it when the default gains.
    return measured


@pytest.fixture(scope="module")
def default() -> Reranker:
    return Reranker()


def _orders(relevant: str, distractors: tuple[str, ...]) -> list[list[str]]:
    """The relevant document at each position, the distractors rotating around it."""
    out = []
    for pos in range(len(distractors) + 1):
        rest = list(distractors[pos:] + distractors[:pos])
        out.append(rest[:pos] + [relevant] + rest[pos:])
    return out


def test_the_default_needs_no_first_stage_and_is_order_free() -> None:
    assert METHODS[DEFAULT_METHOD].order_free


@pytest.mark.parametrize("split", sorted(FLOOR_SPLITS))
def test_obvious_cases_under_every_input_order(default: Reranker, split: str) -> None:
    cases = FLOOR_SPLITS[split]
    right_cases, trials, hits, hits_of_right_cases = 0, 0, 0, 0
    misses: list[str] = []
    for query, relevant, distractors in cases:
        tops = []
        for docs in _orders(relevant, distractors):
            top = docs[default.rerank(query, docs, top_n=1)[0].index]
            tops.append(top)
            trials += 1
            hits += top == relevant
        # Order-free: the same top document under every order, right or wrong.
        assert len(set(tops)) == 1, (query, tops)
        if tops[0] == relevant:
            right_cases += 1
            hits_of_right_cases += len(tops)
        else:
            misses.append(f"{query!r} -> {tops[0]!r}")
    assert len(cases) >= 17 and trials == sum(len(d) + 1 for _, _, d in cases)
    assert hits == hits_of_right_cases
    floor = floor_trials_right(DEFAULT_METHOD, split, trials)
    assert hits >= floor, (f"{hits}/{trials} < {floor} for {DEFAULT_METHOD}", misses)


def test_the_floor_is_the_target_where_the_target_is_met() -> None:
    """The floor never sits below the target for a method measured at or above it."""
    for method, splits in MEASURED_TRIALS_RIGHT.items():
        for split, measured in splits.items():
            trials = sum(len(d) + 1 for _, _, d in FLOOR_SPLITS[split])
            assert 0 <= measured <= trials, (method, split)
            floor = floor_trials_right(method, split, trials)
            assert floor == min(measured, math.ceil(TARGET_TRIALS_RIGHT * trials))


def _readme_example() -> tuple[str, dict[str, Any]]:
    """The first Python snippet of the README's "Library" section, run as printed."""
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text.split("\n## Library\n", 1)[1], re.S)
    assert code is not None
    scope: dict[str, Any] = {}
    exec(compile(code.group(1), str(README), "exec"), scope)  # noqa: S102 - our own README
    return code.group(1), scope


def test_readme_example_ranks_paris_first_under_every_order(default: Reranker) -> None:
    code, scope = _readme_example()
    results, docs = scope["results"], scope["docs"]
    assert "Paris" in docs[results[0].index]
    query = "which city is the capital of France?"
    assert query in code
    for perm in itertools.permutations(docs):
        ranked = default.rerank(query, list(perm))
        assert perm[ranked[0].index].startswith("Paris"), perm


@settings(max_examples=12, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_default_scores_do_not_depend_on_input_order(
    default: Reranker, case: tuple[str, str, tuple[str, ...]], data: Any
) -> None:
    """Order-free methods: the same documents in any order get the same ranking and the same
    scores. MiniLM's vectors are batch-invariant by construction (``Embedder``), but on AVX2 a
    vector encoded in another fixed-size batch can differ in its last float32 bit (3e-8 seen), so
    the scores are compared at 1e-6, far below any gap between the cases' documents."""
    query, relevant, distractors = case
    docs = [relevant, *distractors]
    perm = data.draw(st.permutations(range(len(docs))))
    base_ranked = _by_text(default, query, docs)
    moved_ranked = _by_text(default, query, [docs[i] for i in perm])
    assert [d for d, _ in moved_ranked] == [d for d, _ in base_ranked]
    base = {d: (r.raw_score, r.relevance_score) for d, r in base_ranked}
    for d, r in moved_ranked:
        assert (r.raw_score, r.relevance_score) == pytest.approx(base[d], abs=1e-6)


@pytest.mark.parametrize("method", ["minilm", "fused-no-attention"])
def test_order_free_methods_are_invariant(method: str) -> None:
    reranker = Reranker(method=method)
    query, relevant, distractors = CASES[0]
    docs = [relevant, *distractors]
    base = dict(_by_text(reranker, query, docs))
    for perm in itertools.permutations(range(len(docs))):
        got = dict(_by_text(reranker, query, [docs[i] for i in perm]))
        assert {d: r.raw_score for d, r in got.items()} == {d: r.raw_score for d, r in base.items()}


def test_a_first_stage_order_is_used_only_when_given() -> None:
    """fused-no-attention: without first_stage_order no rank prior; with it, the rank counts."""
    reranker = Reranker(method="fused-no-attention")
    query, relevant, distractors = CASES[0]
    docs = [*distractors, relevant]
    free = reranker.rerank(query, docs)
    assert docs[free[0].index] == relevant
    ranked = reranker.rerank(query, docs, first_stage_order=[0, 1, 2, 3])
    by_index = {r.index: r.raw_score for r in ranked}
    free_by_index = {r.index: r.raw_score for r in free}
    # The prior lifts the first-stage best (index 0) relative to the order-free fusion.
    assert by_index[0] - by_index[3] > free_by_index[0] - free_by_index[3]


def _by_text(reranker: Reranker, query: str, docs: list[str]) -> list[tuple[str, Any]]:
    return [(docs[r.index], r) for r in reranker.rerank(query, docs)]
