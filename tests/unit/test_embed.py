"""The packaged MiniLM embedder and its LRU of recently encoded texts (real model, no doubles)."""

from __future__ import annotations

import numpy as np
import pytest

from ragattn.embed import Embedder

TEXTS = ["Paris is the capital of France.", "The Nile flows north.", "Rome is in Italy."]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(cache_size=4)


def test_cached_vectors_equal_fresh_ones(embedder: Embedder) -> None:
    fresh = embedder.encode(TEXTS, cache=False)
    first = embedder.encode(TEXTS)
    again = embedder.encode(list(reversed(TEXTS)))
    np.testing.assert_allclose(first, fresh, atol=1e-5)
    np.testing.assert_array_equal(again, first[::-1])
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)


def test_hits_skip_the_model_and_the_lru_is_bounded(embedder: Embedder) -> None:
    embedder._cache.clear()
    calls: list[int] = []
    encode = embedder._encode

    def counting(texts: list[str], show_progress: bool) -> np.ndarray:
        calls.append(len(texts))
        return encode(texts, show_progress)

    embedder._encode = counting  # type: ignore[method-assign]
    try:
        embedder.encode(TEXTS + [TEXTS[0]])  # a duplicate inside one call is encoded once
        embedder.encode(TEXTS[:2])
        assert calls == [3]
        embedder.encode(["a", "b", "c"])
        assert calls == [3, 3]
        assert len(embedder._cache) == 4  # cache_size
        embedder.encode([TEXTS[0]])  # evicted (least recently used) -> encoded again
        assert calls == [3, 3, 1]
        embedder.encode(["d"], cache=False)
        assert calls == [3, 3, 1, 1] and len(embedder._cache) == 4
    finally:
        del embedder._encode


def test_empty_input_gives_an_empty_matrix(embedder: Embedder) -> None:
    assert embedder.encode([]).shape == (0, embedder.dim)


def test_shared_embedder_is_one_instance_per_name() -> None:
    from ragattn.embed import DEFAULT_EMBEDDER, shared_embedder

    assert shared_embedder() is shared_embedder(DEFAULT_EMBEDDER)


def test_a_vector_does_not_depend_on_its_batch_or_its_bucket_mates() -> None:
    # Short texts share a forward (several to a bucket), long ones run alone; either way a text's
    # vector is the same bytes alone, in a mixed batch, and in any order.
    embedder = Embedder(cache_size=0)
    texts = [
        "Rome is in Italy.",
        "Rome lies in Italy.",
        "The Nile flows north through Egypt and Sudan.",
        "Paris is the capital of France, and the Seine runs through it.",
        " ".join(["The Eiffel Tower was completed in 1889 for the World's Fair."] * 9),
        "Oslo.",
    ] + [f"Sentence number {i} is about rivers." for i in range(20)]
    prepare = getattr(embedder._model, "preprocess", None) or embedder._model.tokenize
    lengths = prepare(texts)["attention_mask"].sum(dim=1).tolist()
    buckets = {-(-n // embedder.length_step) * embedder.length_step for n in lengths}
    assert (
        len(buckets) >= 3 and max(lengths) > embedder.batch_tokens // 2
    )  # shared and lone forwards
    alone = np.stack([embedder.encode([t])[0] for t in texts])
    together = embedder.encode(texts)
    order = np.random.default_rng(0).permutation(len(texts))
    shuffled = embedder.encode([texts[i] for i in order])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(shuffled, alone[order])
    # Same vectors (to float32 rounding) as one text per forward at its exact length.
    exact = Embedder(cache_size=0, batch_size=1, length_step=1)
    np.testing.assert_allclose(exact.encode(texts), alone, atol=1e-6)


def test_short_texts_take_their_own_width_and_keep_their_vectors() -> None:
    """``short_batch_tokens`` widens the forwards of buckets up to ``SHORT_BUCKET`` tokens only;
    a vector is still the same bytes alone and in a batch, and the same as at the narrow width to
    float32 rounding (what the read's evidence depends on)."""
    from ragattn.embed import SHORT_BUCKET

    narrow = Embedder(cache_size=0)
    wide = Embedder(cache_size=0, short_batch_tokens=512)
    assert [wide.width(b) for b in (8, 32, 64, 72, 128, 256)] == [16, 16, 8, 1, 1, 1]
    assert [narrow.width(b) for b in (8, 32, 64, 72, 128, 256)] == [16, 4, 2, 1, 1, 1]
    assert SHORT_BUCKET == 64
    texts = [f"Sentence number {i} is about the rivers of Europe." for i in range(23)] + [
        " ".join(["The Eiffel Tower was completed in 1889 for the World's Fair."] * 6),
        "Oslo.",
    ]
    together = wide.encode(texts)
    alone = np.stack([wide.encode([t])[0] for t in texts])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_allclose(together, narrow.encode(texts), atol=1e-6)
    with pytest.raises(ValueError):
        Embedder(short_batch_tokens=0)
    # without short_batch_tokens, batch_tokens sets every bucket's width, as it always did
    assert [Embedder(batch_tokens=512).width(b) for b in (32, 128)] == [16, 4]


def test_bf16_weights_give_unit_float32_vectors_close_to_fp32_ones() -> None:
    # bf16 weights move a cosine in the third decimal, never the vectors' dtype or norm, and a
    # text's vector still does not depend on its batch.
    import torch

    fp32 = Embedder(cache_size=0, dtype="float32")
    bf16 = Embedder(cache_size=0, dtype="bfloat16")
    assert fp32.dtype == torch.float32 and bf16.dtype == torch.bfloat16
    texts = [*TEXTS, " ".join(TEXTS * 6)]
    exact, rounded = fp32.encode(texts), bf16.encode(texts)
    assert rounded.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rounded, axis=1), 1.0, atol=1e-6)
    assert float((exact * rounded).sum(axis=1).min()) > 0.99
    assert not np.array_equal(exact, rounded)  # the option does reach the weights
    alone = np.stack([bf16.encode([t])[0] for t in texts])
    np.testing.assert_array_equal(rounded, alone)


def test_an_unknown_dtype_is_refused_and_shared_embedders_are_keyed_by_resolved_dtype() -> None:
    from ragattn.embed import shared_embedder
    from ragattn.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown dtype"):
        Embedder(dtype="float16")
    assert shared_embedder(dtype="bfloat16") is shared_embedder(dtype="bf16")
    assert shared_embedder(dtype="bfloat16") is not shared_embedder(dtype="float32")


def test_use_embed_dtype_chooses_the_shared_embedders_dtype_for_the_process() -> None:
    # The edges (build_engines) apply Settings.embed_dtype once; a named dtype still wins, and
    # bf16 results carry their own fingerprint part so a shared cache keeps them apart.
    import torch

    from ragattn.embed import DEFAULT_EMBED_DTYPE, embedder_part, shared_embedder, use_embed_dtype
    from ragattn.errors import ConfigError

    assert DEFAULT_EMBED_DTYPE == "float32"
    try:
        use_embed_dtype("bfloat16")
        assert shared_embedder().dtype == torch.bfloat16
        assert embedder_part() == "embed=bfloat16"
        assert shared_embedder(dtype="float32").dtype == torch.float32
        with pytest.raises(ConfigError, match="unknown dtype"):
            use_embed_dtype("half-ish")
        assert shared_embedder().dtype == torch.bfloat16  # a refused name changes nothing
    finally:
        use_embed_dtype(DEFAULT_EMBED_DTYPE)
    assert shared_embedder().dtype == torch.float32 and embedder_part() == ""


DOC = (
    "The Eiffel Tower is in Paris. It was completed in 1889 by Gustave Eiffel's company. "
    "Many tourists visit it every year."
)
DOC_SPANS = [(0, 30), (30, 84), (84, len(DOC))]


def test_span_vectors_come_from_the_texts_own_forward() -> None:
    """``encode_spans`` gives each text's vector (the bytes ``encode`` gives) and a unit vector
    per span, pooled from the same forward: in context, close to the span encoded alone and
    closer to a query about it than the other spans are."""
    embedder = Embedder(cache_size=64)
    vectors, pooled = embedder.encode_spans([DOC, TEXTS[0]], [DOC_SPANS, [(0, 5)]])
    np.testing.assert_array_equal(vectors, embedder.encode([DOC, TEXTS[0]], cache=False))
    assert pooled[0].shape == (3, embedder.dim) and pooled[1].shape == (1, embedder.dim)
    assert np.allclose(np.linalg.norm(pooled[0], axis=1), 1.0, atol=1e-5)
    alone = embedder.encode([DOC[a:b] for a, b in DOC_SPANS], cache=False)
    assert np.all((pooled[0] * alone).sum(axis=1) > 0.3)
    query = embedder.encode(["When was the Eiffel Tower completed?"], cache=False)[0]
    assert int(np.argmax(pooled[0] @ query)) == 1
    # the LRU serves both on a second call, bit for bit, with no forward
    forward = embedder._forward
    embedder._forward = None  # type: ignore[assignment,method-assign]
    try:
        again = embedder.encode_spans([DOC], [DOC_SPANS])
    finally:
        embedder._forward = forward  # type: ignore[method-assign]
    np.testing.assert_array_equal(again[0][0], vectors[0])
    np.testing.assert_array_equal(again[1][0], pooled[0])


def test_a_span_past_the_window_is_left_to_the_caller() -> None:
    """MiniLM reads 256 wordpieces of a text: a span beyond them gets a NaN row, not the
    pooled vector of what the window kept."""
    embedder = Embedder(cache_size=0)
    text = " ".join(f"Sentence {i} is about topic number {i}." for i in range(80))
    spans, at = [], 0
    for part in text.split(". "):
        spans.append((at, min(at + len(part) + 1, len(text))))
        at += len(part) + 2
    vectors, pooled = embedder.encode_spans([text], [spans])
    missing = np.isnan(pooled[0][:, 0])
    assert not missing[:20].any() and missing[-20:].all()
    assert missing.tolist() == sorted(missing.tolist())  # a prefix is pooled, the rest is not
    assert vectors.shape == (1, embedder.dim) and not np.isnan(vectors).any()
    with pytest.raises(ValueError):
        embedder.encode_spans([text], [])
    for bad in ((-1, 4), (5, 4), (0, len(text) + 1)):
        with pytest.raises(ValueError, match="is not inside"):
            embedder.encode_spans([text], [[bad]])
