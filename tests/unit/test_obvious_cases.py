"""The default reranker on obvious cases, whatever the input order.

Each case of ``tests/data/obvious_cases.json`` holds one relevant document among three same-type
distractors; each runs with the relevant document at every position (4 orders). Real forward
passes of the packaged default (``minilm-hyde``: the proxy's greedy answer, then MiniLM), no
mocks.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragattn import Reranker
from ragattn.rerank import DEFAULT_METHOD, METHODS

README = Path(__file__).resolve().parents[2] / "README.md"
CASES = tuple(
    (c["query"], c["relevant"], tuple(c["distractors"]))
    for c in json.loads((Path(__file__).parents[1] / "data" / "obvious_cases.json").read_text())[
        "cases"
    ]
)

MIN_TRIALS_RIGHT = 0.98
"""The issue's bar: the relevant document first in at least 98 % of the trials. An order-free
default is right or wrong on a case under all 4 orders at once, so on 34 cases the bar means all 34.
Measured (BENCHMARKS.md §2): ``minilm-hyde`` 136/136; MiniLM alone 128/136, its two misses being
bi-encoder near-ties on same-type distractors (Canberra vs "Melbourne is the capital of the
Australian state of Victoria", cosine 0.763 vs 0.764; the Pacific vs "the Atlantic Ocean is the
second largest ocean")."""


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


def test_obvious_cases_under_every_input_order(default: Reranker) -> None:
    right_cases, trials, hits = 0, 0, 0
    misses: list[str] = []
    for query, relevant, distractors in CASES:
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
        else:
            misses.append(f"{query!r} -> {tops[0]!r}")
    assert len(CASES) >= 30 and trials == 4 * len(CASES)
    assert hits >= MIN_TRIALS_RIGHT * trials, misses
    assert hits == 4 * right_cases


def _readme_example() -> tuple[str, dict[str, Any]]:
    """The README's first Python snippet, run as printed."""
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
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
    """Order-free methods: the same documents in any order get bit-identical scores."""
    query, relevant, distractors = case
    docs = [relevant, *distractors]
    perm = data.draw(st.permutations(range(len(docs))))
    base = {d: (r.raw_score, r.relevance_score) for d, r in _by_text(default, query, docs)}
    moved = {
        d: (r.raw_score, r.relevance_score)
        for d, r in _by_text(default, query, [docs[i] for i in perm])
    }
    assert moved == base


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
