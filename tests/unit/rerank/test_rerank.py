"""Reranker behaviour on small real inputs with the packaged proxy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ragattn.errors import InvalidInputError
from ragattn.lab.registry import rerank_spec
from ragattn.rerank import Reranker
from ragattn.rerank.icr import entropy_weight, masked_sum, plan_windows, reattn_weights
from ragattn.types import Document

QUERY = "Which city is the capital of France?"
DOCS = [
    "Bananas are rich in potassium and grow in tropical climates.",
    "The stock market fell sharply on Monday after rate fears.",
    "Paris is the capital and largest city of France.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


@pytest.fixture(scope="module")
def reranker(proxy):
    return Reranker(proxy, method="icr")


def test_relevant_document_outranks_distractors(reranker):
    results = reranker.rerank(QUERY, DOCS)
    assert results[0].index == 2
    assert sorted(r.index for r in results) == [0, 1, 2, 3]
    assert all(0.0 <= r.relevance_score <= 1.0 for r in results)
    raws = [r.raw_score for r in results]
    assert raws == sorted(raws, reverse=True)


def test_relevant_document_wins_in_any_slot(reranker):
    for order in ([2, 0, 1, 3], [0, 1, 3, 2]):
        assert reranker.rerank(QUERY, DOCS, first_stage_order=order)[0].index == 2


def test_calibration_changes_scores(proxy, reranker):
    calibrated = reranker.score(QUERY, DOCS).raw
    raw = Reranker(proxy, method=rerank_spec("icr-uncalibrated")).score(QUERY, DOCS).raw
    assert not np.allclose(calibrated, raw)
    assert raw.min() > 0  # uncalibrated attention mass is positive; calibration subtracts a prior
    assert calibrated.min() < raw.min()


def test_top_n_single_document_and_ids(reranker):
    docs = [Document(text=t, id=f"d{i}") for i, t in enumerate(DOCS)]
    top = reranker.rerank(QUERY, docs, top_n=2)
    assert len(top) == 2 and top.by_id("d2").index == 2
    assert len(reranker.rerank(QUERY, docs, top_n=10)) == 4
    single = reranker.rerank(QUERY, ["Only one document."])
    assert [r.index for r in single] == [0]


@pytest.mark.parametrize("method", ["minilm", "icr-pointwise"])
def test_ties_keep_input_order(proxy, method):
    """Identical documents under an order-free method (each scored alone) tie exactly, and tied
    results come back in input order, whatever the first-stage order says."""
    query = "Which is the longest river in Africa?"
    nile = "The Nile is the longest river in Africa."
    docs = [nile, "Bananas grow in tropical climates.", nile, nile]
    reranker = Reranker(proxy, method=rerank_spec(method))
    for order in (None, [3, 2, 1, 0]):
        raw = reranker.score(query, docs, first_stage_order=order).raw
        assert raw[0] == raw[2] == raw[3] > raw[1]  # a real tie, above the distractor
        results = reranker.rerank(query, docs, first_stage_order=order)
        assert [r.index for r in results] == [0, 2, 3, 1]


@pytest.mark.parametrize(
    ("query", "docs", "top_n", "message"),
    [
        ("", DOCS, None, "query must be a non-empty string"),
        ("   ", DOCS, None, "query must be a non-empty string"),
        (QUERY, [], None, "documents must hold at least one document"),
        (QUERY, DOCS, 0, "top_n must be a positive integer"),
        (
            QUERY,
            [123],
            None,
            "documents[0] must be a string or an object with a 'text' field, got int",
        ),
        (
            QUERY,
            "a string",
            None,
            "documents must be a list of strings or objects, not a single string",
        ),
    ],
)
def test_bad_input_is_a_clear_error(reranker, query, docs, top_n, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        reranker.rerank(query, docs, top_n=top_n)


def test_unknown_method_lists_valid_ones(proxy):
    with pytest.raises(InvalidInputError, match="unknown rerank method 'nope'; valid: "):
        Reranker(proxy, method="nope")


def test_idf_weights_lower_for_tokens_shared_by_many_candidates():
    docs = [np.array([5, 7, 9]), np.array([5, 8]), np.array([5, 6])]
    weights = reattn_weights(docs, query_ids={5, 7})
    assert weights[0][0] < weights[0][1]  # 5 is in all three, 7 in one
    assert weights[0][2] == 1.0  # not a query token
    assert all(w[0] == weights[0][0] for w in weights)


def test_masked_sum_and_entropy():
    delta = np.array([0.1, 0.1, 0.1, 0.1, 0.1, -5.0])
    assert masked_sum(delta, 2.0) == pytest.approx(0.5)
    assert masked_sum(delta, None) == pytest.approx(-4.5)
    assert entropy_weight(np.array([1.0, 1.0, 1.0, 1.0]), 1.0) == pytest.approx(2.0)
    assert entropy_weight(np.array([1.0, 0.0, 0.0, 0.0]), 1.0) == pytest.approx(1.0)


def test_windows_split_long_lists_and_report_it(proxy):
    assert plan_windows([10] * 10, list(range(10)), 50) == [list(range(5)), list(range(5, 10))]
    long_docs = [f"Document {i} about topic {i}. " * 40 for i in range(6)]
    from ragattn.rerank.icr import IcrScorer

    scorer = IcrScorer(proxy, heads="middle", max_window_tokens=1024)
    scores = scorer.score("topic 3", [Document(text=t) for t in long_docs], list(range(6)))
    assert scores.windows > 1
    assert any("windows" in w for w in scores.warnings)


@pytest.mark.parametrize("method", ["fused", "fused-no-attention", "qrhead"])
def test_learned_profile_methods_rank_the_relevant_document_first(proxy, method):
    results = Reranker(proxy, method=method).rerank(QUERY, DOCS)
    assert results[0].index == 2
    assert sorted(r.index for r in results) == [0, 1, 2, 3]
    assert all(0.0 <= r.relevance_score <= 1.0 for r in results)


def test_missing_profile_names_the_command(proxy, tmp_path):
    from ragattn.errors import ModelLoadError
    from ragattn.rerank.profiles import RerankProfile

    with pytest.raises(ModelLoadError, match="ragattn heads select"):
        RerankProfile.load(tmp_path / "rerank-profile.json")


def test_two_orders_average_both_prompt_orders(proxy):
    from ragattn.rerank.icr import IcrScorer

    docs = [Document(text=t) for t in DOCS]
    order = [2, 0, 1, 3]
    one = IcrScorer(proxy, heads="middle")
    both = IcrScorer(proxy, heads="middle", orders=2).score(QUERY, docs, order)
    forward = one.score(QUERY, docs, order).raw
    backward = one.score(QUERY, docs, order[::-1]).raw
    assert not np.allclose(forward, backward)  # position bias exists, so averaging changes scores
    np.testing.assert_allclose(both.raw, (forward + backward) / 2, atol=1e-6)
    assert both.windows == 2 and any("two document orders" in w for w in both.warnings)
    with pytest.raises(InvalidInputError, match="orders must be 1 or 2"):
        IcrScorer(proxy, orders=3)


def test_query_first_prompt_states_the_query_before_the_documents(proxy):
    from ragattn.prompt import (
        CALIBRATION_QUERY,
        Kind,
        assemble,
        rerank_pieces,
        shared_prefix_length,
        with_query,
    )

    docs = [Document(text=t) for t in DOCS]
    pieces = rerank_pieces(QUERY, docs, [0, 1, 2, 3], family=proxy.chat_family, query_first=True)
    real = assemble(pieces, proxy.tokenizer)
    twin = assemble(with_query(pieces, CALIBRATION_QUERY), proxy.tokenizer)
    assert real.text.index(QUERY) < real.text.index(DOCS[0]) < real.text.rindex(QUERY)
    assert twin.text.count(QUERY) == 1  # the early copy stays, the scored query becomes N/A
    last_doc = max(real.document(i).tokens.end for i in range(4))
    assert shared_prefix_length(real, twin) >= last_doc
    assert sum(p.kind is Kind.QUERY for p in pieces) == 1
    result = Reranker(proxy, method=rerank_spec("icr-query-first")).rerank(QUERY, DOCS)
    assert result[0].index == 2


def test_pointwise_scores_each_document_in_its_own_window(proxy):
    result = Reranker(proxy, method=rerank_spec("icr-pointwise")).rerank(QUERY, DOCS)
    assert result.windows == len(DOCS)
    assert sorted(r.index for r in result) == [0, 1, 2, 3]
    assert all(np.isfinite(r.raw_score) for r in result)


def test_minilm_method_maps_cosine_into_unit_interval(proxy):
    result = Reranker(proxy, method="minilm").rerank(QUERY, DOCS)
    assert result[0].index == 2
    for r in result:
        assert -1.0 <= r.raw_score <= 1.0
        assert r.relevance_score == pytest.approx((r.raw_score + 1.0) / 2.0)


def test_int8_proxy_keeps_the_ranking_of_a_clear_case():
    from ragattn.errors import ConfigError
    from ragattn.proxy import load_proxy

    quantized = load_proxy("smollm2-135m", quantize="int8")
    linear = [m for m in quantized.model.modules() if type(m).__name__ == "Linear"]
    assert not any(type(m).__module__.startswith("torch.nn.modules") for m in linear)
    result = Reranker(quantized, method=rerank_spec("icr-middle")).rerank(QUERY, DOCS)
    assert result[0].index == 2
    with pytest.raises(ConfigError, match="quantize"):
        load_proxy("smollm2-135m", quantize="int4")


# ---- the registry: a method that needs no proxy loads none ---------------------------------


@pytest.fixture()
def counted_loads(proxy, monkeypatch):
    """``ragattn.proxy.load_proxy`` replaced by one that records its calls and hands back the
    session's proxy (so a lazy load is observable without loading a second copy)."""
    import ragattn.proxy

    calls: list[str] = []

    def load(name, **kwargs):
        calls.append(name)
        return proxy

    monkeypatch.setattr(ragattn.proxy, "load_proxy", load)
    return calls


@pytest.mark.parametrize("method", ["minilm", "fused-no-attention"])
def test_proxy_free_methods_load_no_proxy_until_it_is_read(proxy, counted_loads, method):
    from ragattn.rerank import METHODS

    assert not METHODS[method].runs_proxy and METHODS[method].needs_embedder
    reranker = Reranker("smollm2-135m", method=method)
    results = reranker.rerank(QUERY, DOCS)
    assert counted_loads == [] and reranker.proxy_name == "smollm2-135m"
    assert results[0].index == 2 and results.method == method
    same = Reranker(proxy, method=method).rerank(QUERY, DOCS)
    assert [(r.index, r.raw_score) for r in results] == [(r.index, r.raw_score) for r in same]
    assert reranker.proxy is proxy and counted_loads == ["smollm2-135m"]
    assert reranker.proxy is proxy and counted_loads == ["smollm2-135m"]  # loaded once


def test_attention_methods_load_the_proxy_once(counted_loads):
    from ragattn.rerank import METHODS

    assert METHODS["icr"].reads_attention and not METHODS["icr"].generates
    Reranker("smollm2-135m", method="icr")
    assert counted_loads == ["smollm2-135m"]


def test_registry_lists_every_method_once_with_its_needs():
    from ragattn.rerank import DEFAULT_METHOD, METHODS

    assert list(METHODS) == sorted(METHODS) and DEFAULT_METHOD in METHODS
    assert all(spec.name == name and spec.description for name, spec in METHODS.items())
    assert {n for n, s in METHODS.items() if not s.runs_proxy} == {
        "bm25",
        "minilm",
        "fused-no-attention",
    }
    assert {n for n, s in METHODS.items() if s.generates} == {"minilm-hyde"}
    assert METHODS["qrhead"].needs() == ("attention", "profile")
    assert METHODS["minilm-hyde"].needs() == ("generation", "embedder")
    assert "minilm: MiniLM cosine of query and document (needs embedder)" in METHODS.describe()
    with pytest.raises(InvalidInputError, match=re.escape(f"valid: {', '.join(sorted(METHODS))}")):
        METHODS.spec("nope")


def test_every_attention_method_shares_the_memo(proxy):
    from ragattn.lab.registry import RERANK_METHODS
    from ragattn.rerank.icr import AttentionMemo

    memo = AttentionMemo()
    for name, spec in RERANK_METHODS.items():  # the runtime's and the lab's
        # attention-probe reads the Sentinel layout (its own forward), not the ICR windows.
        if spec.reads_attention and name != "attention-probe":
            windows = Reranker(proxy, method=spec, memo=memo).scorer.windows
            assert windows is not None and windows.memo is memo, name
