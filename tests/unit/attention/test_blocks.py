"""Cached document blocks (ragattn.blocks): exact against a block-masked forward, keyed safely, and
bounded in bytes. Real forward passes of the packaged 135M proxy."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Any

import numpy as np
import pytest
import torch

from ragattn.block_store import BlockStore, bytes_per_token
from ragattn.blocks import BLOCK_SEPARATOR, BlockReader
from ragattn.compress import Compressor
from ragattn.sdpa import ACTIVE, CaptureState, HeadSet, StopForward
from ragattn.sentence_attention import Unit
from ragattn.types import Document

DOCS = [
    Document(text="The Eiffel Tower is in Paris. It was completed in 1889."),
    Document(text="The Statue of Liberty is in New York. It was dedicated on 28 October 1886."),
    Document(text="Bananas are rich in potassium. They grow in tropical climates."),
]
QUERY = "When was the Eiffel Tower completed?"
ATOL = 2e-4
"""Captured attention probabilities: the cached path rotates keys in fp32 where a fresh forward
applies RoPE once, so they agree to float rounding, not bit for bit (AVX2 and AVX-512 alike)."""


def _units(docs: list[Document]) -> list[Unit]:
    """One unit per sentence ("... ." pieces, leading spaces left out)."""
    return [
        Unit(d, m.start(), m.end())
        for d, doc in enumerate(docs)
        for m in re.finditer(r"[^ .][^.]*\.", doc.text)
    ]


def _block_masked_capture(reader: BlockReader, blocks: list[Any], tail: list[int], rows, heads):
    """The reference: ONE fresh forward over prefix + blocks + tail whose mask lets each block see
    only the prefix and itself (block attention), and the tail see everything."""
    proxy = reader.proxy
    prefix = list(reader.prefix_ids)
    ids = prefix + [t for b in blocks for t in b.ids] + tail
    n = len(ids)
    group = torch.full((n,), -1)
    at = len(prefix)
    for i, b in enumerate(blocks):
        group[at : at + b.n_tokens] = i
        at += b.n_tokens
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    same = (group[:, None] == group[None, :]) | (group[None, :] == -1) | (group[:, None] == -1)
    in_tail = torch.arange(n) >= at
    mask = causal & (same | in_tail[:, None])
    state = CaptureState(rows=tuple(rows), heads=heads, reduce="none", stop_after=heads.deepest)
    state.prepare(proxy.device, 0, n)
    token = ACTIVE.set(state)
    try:
        with torch.inference_mode(), contextlib.suppress(StopForward):
            proxy.decoder(
                input_ids=torch.tensor([ids]),
                attention_mask=mask[None, None],
                use_cache=False,
            )
    finally:
        ACTIVE.reset(token)
    return torch.cat([state.per_layer[layer] for layer in heads.layers], dim=0)


def test_rotated_blocks_equal_blocks_encoded_in_place(proxy: Any) -> None:
    """Layer 0 is where a block's keys depend on its tokens alone, so there the cached path (keys
    encoded after the prefix, then rotated on to their place) must equal ONE fresh forward of the
    whole block-masked prompt. Deeper layers differ by design: a cached block saw the prefix from
    its canonical place (the approximation the "read once" gate measures)."""
    reader = BlockReader(proxy, BlockStore(1 << 28))
    blocks = reader.blocks([BLOCK_SEPARATOR + d.text for d in DOCS], 1)
    tail = proxy.tokenizer("\nQuestion: " + QUERY + "\nAnswer:", add_special_tokens=False)[
        "input_ids"
    ]
    heads = HeadSet.from_layers([0], proxy.num_heads)
    start = len(reader.prefix_ids) + sum(b.n_tokens for b in blocks)
    rows = list(range(start, start + len(tail)))
    cached = reader.capture(blocks, tail, rows, heads)
    fresh = _block_masked_capture(reader, blocks, tail, rows, heads)
    assert cached.weights.shape == fresh.shape
    gap = float((cached.weights - fresh).abs().max())
    assert gap < ATOL, gap
    # The blocks were really placed: moving the second block first changes what the tail reads.
    swapped = reader.capture([blocks[1], blocks[0], blocks[2]], tail, rows, heads)
    assert float((swapped.weights - cached.weights).abs().max()) > 100 * ATOL


def test_features_from_the_store_equal_freshly_encoded_ones(proxy: Any) -> None:
    units = _units(DOCS)
    reader = BlockReader(proxy, BlockStore(1 << 28))
    cold, names, _ = reader.attention_block(QUERY, DOCS, units, rows="both", layers=4)
    assert reader.store.stats()["misses"] == 3 and reader.store.stats()["hits"] == 0
    warm, names_again, _ = reader.attention_block(QUERY, DOCS, units, rows="both", layers=4)
    assert reader.store.stats()["hits"] == 3  # every passage read once
    np.testing.assert_array_equal(cold, warm)
    fresh, _, _ = BlockReader(proxy).attention_block(QUERY, DOCS, units, rows="both", layers=4)
    np.testing.assert_allclose(cold, fresh, atol=1e-6)
    assert names == names_again and len(names) == 2 * 4 * proxy.num_heads
    assert np.isfinite(cold).all()


def test_an_entry_from_another_proxy_or_depth_is_never_used(proxy: Any) -> None:
    store = BlockStore(1 << 28)
    reader = BlockReader(proxy, store)
    texts = [BLOCK_SEPARATOR + DOCS[0].text]
    reader.blocks(texts, 3)
    assert store.stats()["misses"] == 1
    reader.blocks(texts, 4)  # another depth: a new entry, never the 3-layer one
    assert store.stats()["misses"] == 2 and store.stats()["hits"] == 0
    other = BlockReader(dataclasses.replace(proxy, source=proxy.source + "#other-weights"), store)
    other.blocks(texts, 3)  # another proxy identity: a miss, never the first reader's entry
    assert store.stats()["misses"] == 3 and store.stats()["hits"] == 0
    reader.blocks(texts, 3)
    assert store.stats()["hits"] == 1
    assert len({reader.block_key([1, 2], 3), reader.block_key([1, 2], 4)}) == 2
    assert reader.block_key([1, 2], 3) != other.block_key([1, 2], 3)


def test_the_store_stays_within_its_byte_limit(proxy: Any) -> None:
    reader = BlockReader(proxy, BlockStore(1 << 28))
    texts = [BLOCK_SEPARATOR + d.text for d in DOCS]
    sizes = [b.nbytes for b in reader.blocks(texts, 2)]
    assert sizes[0] == len(reader.blocks(texts[:1], 2)[0].ids) * bytes_per_token(proxy, 2)
    limit = sizes[0] + sizes[1] + sizes[2] // 2
    small = BlockReader(proxy, BlockStore(limit))
    for _ in range(2):
        for text in texts:
            small.blocks([text], 2)
            assert small.store.nbytes <= limit
    stats = small.store.stats()
    assert stats["evictions"] >= 2 and stats["blocks"] <= 2 and stats["bytes"] <= limit
    tiny = BlockStore(1)
    BlockReader(proxy, tiny).blocks(texts[:1], 2)
    assert len(tiny) == 0  # a block larger than the whole bound is not kept
    with pytest.raises(Exception, match="byte limit"):
        BlockStore(-1)


def test_the_compressor_reads_passages_once(proxy: Any) -> None:
    store = BlockStore(1 << 29)
    comp = Compressor(proxy, method="sentinel", read_once=store)
    first = comp.compress(QUERY, [d.text for d in DOCS], ratio=0.4)
    assert store.stats()["misses"] == 3
    second = comp.compress("Who grows bananas?", [d.text for d in DOCS], ratio=0.4)
    assert store.stats()["hits"] == 3 and store.stats()["misses"] == 3
    assert first.compressed_tokens > 0 and second.compressed_tokens > 0
    assert first.compressed_text != second.compressed_text  # each read by its own question
