"""Captured attention rows against an independent eager computation with output_attentions."""

from __future__ import annotations

import pytest
import torch

from ragattn.attention import HeadSet, engine_for
from ragattn.errors import InvalidInputError

TEXT = (
    "The Eiffel Tower is in Paris. Bananas grow in tropical climates. "
    "The stock market fell on Monday. "
    "Question: where is the Eiffel Tower? Answer:"
)


# Tolerances, in attention probability (every row sums to 1). The capture (SDPA with the softmax
# recomputed for the kept rows) and transformers' eager attention are two fp32 pipelines that sum in
# different orders, and the order changes again with the CPU kernels (AVX2 or AVX-512: the pytest
# header prints which) and the thread split. The difference grows with depth and prompt length as
# the hidden states drift apart. A wrong row, head or mask is far larger: in these prompts any
# neighbouring row or head differs by at least 0.7 somewhere in the capture (measured for both
# proxies), so the bounds below still catch one.
SHORT_PROMPT_ATOL = 1e-4
"""SmolLM2-135M, 33 tokens: max |capture - eager| measured 2.1e-6 on both AVX2 and AVX-512, and
1.6e-6 between two captures that split the prompt differently (about 50x headroom)."""
LONG_PROMPT_ATOL = 5e-4
"""Gemma-3-270M, 847 tokens: measured 6.6e-5 (AVX2), 1.0e-4 and 1.75e-4 (two AVX-512 machines);
the bound is about 3x the worst seen."""
ROW_SUM_ATOL = 1e-4
"""A row's fp32 sum of at most a thousand probabilities is 1 within rounding (measured 1.1e-6)."""


def test_rows_equal_eager_all_heads(proxy, eager_rows):
    ids = proxy.tokenizer(TEXT).input_ids
    rows = list(range(len(ids) - 6, len(ids)))
    engine = engine_for(proxy)
    cap = engine.capture(ids, rows, HeadSet.all(proxy.num_layers, proxy.num_heads), reduce="none")
    ref = eager_rows(proxy, ids, rows)
    assert (
        cap.weights.shape == ref.shape == (proxy.num_layers * proxy.num_heads, len(rows), len(ids))
    )
    assert (cap.weights - ref).abs().max().item() <= SHORT_PROMPT_ATOL
    sums = cap.weights.sum(-1)
    assert torch.allclose(sums, torch.ones(cap.weights.shape[:2]), atol=ROW_SUM_ATOL)


def test_subset_mean_and_early_exit_match(proxy, eager_rows):
    ids = proxy.tokenizer(TEXT).input_ids
    rows = list(range(len(ids) - 10, len(ids)))
    heads = HeadSet(((3, 1), (12, 0), (12, 8), (17, 4)))
    engine = engine_for(proxy)
    early = engine.capture(ids, rows, heads, reduce="mean", early_exit=True)
    full = engine.capture(ids, rows, heads, reduce="mean", early_exit=False)
    assert torch.equal(early.weights, full.weights)
    ref = eager_rows(proxy, ids, rows)
    picks = [layer * proxy.num_heads + h for layer, h in heads.pairs]
    assert (early.weights[:, 0, :] - ref[picks].mean(dim=1)).abs().max().item() <= SHORT_PROMPT_ATOL


def test_early_exit_stops_the_forward(proxy):
    """Layers past the deepest selected one never run: a hook on the last layer must not fire."""
    ids = proxy.tokenizer(TEXT).input_ids
    fired = []
    handle = proxy.layers[-1].register_forward_pre_hook(lambda *_: fired.append(True))
    try:
        engine_for(proxy).capture(ids, [len(ids) - 1], HeadSet(((5, 0),)), early_exit=True)
        assert fired == []
        engine_for(proxy).capture(ids, [len(ids) - 1], HeadSet(((5, 0),)), early_exit=False)
        assert fired == [True]
    finally:
        handle.remove()


def test_kv_reuse_equals_full_second_pass(proxy):
    real = proxy.tokenizer(TEXT).input_ids
    twin = proxy.tokenizer(TEXT.replace("where is the Eiffel Tower?", "N/A")).input_ids
    n_prefix = 0
    while real[n_prefix] == twin[n_prefix]:
        n_prefix += 1
    heads = HeadSet.from_layers(range(0, 20), proxy.num_heads)
    engine = engine_for(proxy)
    rows_r = list(range(n_prefix, len(real)))
    rows_t = list(range(n_prefix, len(twin)))
    reused = engine.capture_shared_prefix(
        real[:n_prefix],
        [(real[n_prefix:], rows_r), (twin[n_prefix:], rows_t)],
        heads,
        reduce="none",
    )
    full_r = engine.capture(real, rows_r, heads, reduce="none")
    full_t = engine.capture(twin, rows_t, heads, reduce="none")
    assert (reused[0].weights - full_r.weights).abs().max().item() <= SHORT_PROMPT_ATOL
    assert (reused[1].weights - full_t.weights).abs().max().item() <= SHORT_PROMPT_ATOL


def test_bad_requests_are_clear_errors(proxy):
    engine = engine_for(proxy)
    ids = proxy.tokenizer(TEXT).input_ids
    with pytest.raises(InvalidInputError, match="outside the proxy"):
        engine.capture(ids, [0], HeadSet(((proxy.num_layers, 0),)))
    with pytest.raises(InvalidInputError, match="rows must lie"):
        engine.capture(ids, [len(ids)], HeadSet(((0, 0),)))
    with pytest.raises(InvalidInputError, match="at least one"):
        HeadSet(())


@pytest.mark.slow
@pytest.mark.gemma
def test_gemma_sliding_window_rows_equal_eager(gemma_proxy, eager_rows):
    """A prompt longer than Gemma-3's 512-token window: sliding and global layers both match."""
    sentence = "Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu. "
    ids = gemma_proxy.tokenizer(sentence * 60 + "Which letter comes after beta?").input_ids
    assert len(ids) > 700
    rows = list(range(len(ids) - 4, len(ids)))
    geometry = gemma_proxy.layer_geometry()
    sliding = [i for i, g in enumerate(geometry) if g.sliding_window]
    assert sliding and gemma_proxy.full_attention_layers()
    cap = engine_for(gemma_proxy).capture(
        ids, rows, HeadSet.all(gemma_proxy.num_layers, gemma_proxy.num_heads), reduce="none"
    )
    ref = eager_rows(gemma_proxy, ids, rows)
    assert (cap.weights - ref).abs().max().item() <= LONG_PROMPT_ATOL
    # A sliding layer sees nothing further back than its window.
    window = geometry[sliding[0]].sliding_window
    first = sliding[0] * gemma_proxy.num_heads
    assert cap.weights[first, -1, : len(ids) - window].abs().max().item() == 0.0
