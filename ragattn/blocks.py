"""Passages that are read once: cached document blocks behind a shared instruction prefix.

In a RAG service the same passages come back for many queries, and a full Sentinel forward reads
every passage again each time. Here each passage is encoded once as a **block**: the proxy reads
the shared instruction prefix ("Given the following information:") and then the passage alone, so
the passage attends to the prefix and to itself, never to other passages (block attention, as in
Sun et al. 2024, "Block-Attention for Efficient RAG"). The block's keys and values of every layer
up to the probe's depth are kept in a :class:`~ragattn.block_store.BlockStore` (an LRU bounded in
bytes), keyed by the proxy's identity, the depth and the passage's token ids.

At request time only the tail runs: the question and the answer prefix attend over the prefix and
all blocks. A block was encoded right after the prefix; its keys carry rotary position embeddings
(RoPE) for those positions, so before use they are rotated on to the block's place in this request
(a RoPE rotation by ``k`` positions composes with the one already applied, so this equals encoding
the block at its real position, to float rounding). Values carry no position.

What differs from the full prompt, and is measured (BENCHMARKS.md §3, "read once"): passages do
not see each other, and the first passage follows a newline instead of a space. Only proxies with
one plain RoPE (Llama family: SmolLM2, Qwen, Llama) are supported; others raise ``ConfigError``.

Units: ``Block.nbytes`` and every store size are bytes; token counts are proxy tokens.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ragattn.attention import Capture, HeadSet, engine_for
from ragattn.block_store import Block, BlockStore
from ragattn.cancel import check_cancelled
from ragattn.errors import ConfigError, InvalidInputError
from ragattn.prompt import CHAT_WRAPPERS, SENTINEL_HEAD, SENTINEL_TAIL, first_non_space
from ragattn.proxy import Proxy
from ragattn.sdpa import ACTIVE, CaptureState, StopForward
from ragattn.sentence_attention import (
    EPS,
    Rows,
    Unit,
    feature_names,
    head_plan,
    unit_shares,
)
from ragattn.types import Document

BLOCK_SEPARATOR = "\n"
"""Text before every passage of a block (so a block's tokens do not depend on its place)."""

MAX_BLOCK_TOKENS = 1024
"""A passage longer than this many proxy tokens is split into sentence-aligned blocks."""

ENCODE_BATCH_TOKENS = 4096
"""Padded tokens per batched block forward (blocks of similar length are encoded together)."""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class BlockReader:
    """Sentinel attention features for sentence units, reading passages as cached blocks.

    :meth:`attention_block` has the contract of
    :func:`ragattn.sentence_attention.attention_block` (same columns, names and units), so a probe
    reads either; the numbers differ as the module docstring says.
    """

    def __init__(
        self, proxy: Proxy, store: BlockStore | None = None, *, max_bytes: int = 1 << 30
    ) -> None:
        rotary = getattr(proxy.decoder, "rotary_emb", None)
        inv_freq = getattr(rotary, "inv_freq", None)
        if (
            inv_freq is None
            or float(getattr(rotary, "attention_scaling", 1.0)) != 1.0
            or getattr(rotary, "rope_type", "default") != "default"
            or hasattr(proxy.decoder, "rotary_emb_local")
            or any(g.sliding_window for g in proxy.layer_geometry())
        ):
            raise ConfigError(
                f"cached document blocks need a proxy with one plain rotary embedding (Llama "
                f"family); {proxy.name!r} has another position scheme"
            )
        self.proxy = proxy
        self.store = store if store is not None else BlockStore(max_bytes)
        self._inv_freq = inv_freq.detach().to(proxy.device, torch.float32)
        prefix, suffix = CHAT_WRAPPERS[proxy.chat_family]
        self._prefix_text = prefix + SENTINEL_HEAD.rstrip()
        self._tail_suffix = suffix
        self._prefix_ids = tuple(self._encode_text(self._prefix_text)[0])
        self._prefix_kv: dict[int, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]] = {}
        self._identity = hashlib.sha256(
            "|".join(
                [
                    proxy.name,
                    proxy.source,
                    str(proxy.dtype),
                    proxy.device.type,
                    str(proxy.quantize),
                    ",".join(map(str, self._prefix_ids)),
                ]
            ).encode()
        ).hexdigest()[:20]
        self._lock = threading.Lock()

    # -- tokens ---------------------------------------------------------------------------------

    def _encode_text(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids of ``text`` and each token's first non-space character."""
        enc = self.proxy.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = [(int(a), int(b)) for a, b in enc["offset_mapping"]]
        return list(enc["input_ids"]), first_non_space(text, offsets)

    def block_key(self, ids: Sequence[int], depth: int) -> str:
        """The store key of a block: proxy identity, depth and the block's token ids."""
        raw = np.asarray(ids, dtype=np.int64).tobytes()
        return f"{self._identity}:{depth}:{hashlib.sha256(raw).hexdigest()[:32]}"

    # -- encoding -------------------------------------------------------------------------------

    def _forward(self, ids: torch.Tensor, cache: Any, offset: int, depth: int) -> None:
        """A forward of ``ids`` ``[B, M]`` after ``offset`` cached tokens, ending at ``depth``."""
        engine = engine_for(self.proxy)
        state = CaptureState(rows=(), heads=None, reduce="mean", stop_after=depth - 1)
        state.prepare(self.proxy.device, offset, ids.shape[1])
        token = ACTIVE.set(state)
        try:
            with torch.inference_mode():
                kwargs: dict[str, Any] = {
                    "input_ids": ids,
                    engine.cache_kw: cache,
                    "use_cache": True,
                }
                with contextlib.suppress(StopForward):
                    self.proxy.decoder(**kwargs)
        finally:
            ACTIVE.reset(token)

    @staticmethod
    def _layer_kv(cache: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        entry = cache.layers[layer]
        return entry.keys, entry.values

    def _prefix(self, depth: int) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """The shared prefix's keys and values per layer, ``[kv_heads, P, head_dim]``."""
        with self._lock:
            known = self._prefix_kv.get(depth)
        if known is not None:
            return known
        from transformers import DynamicCache

        cache = DynamicCache()
        ids = torch.tensor([self._prefix_ids], dtype=torch.long, device=self.proxy.device)
        self._forward(ids, cache, 0, depth)
        keys = tuple(self._layer_kv(cache, layer)[0][0].clone() for layer in range(depth))
        values = tuple(self._layer_kv(cache, layer)[1][0].clone() for layer in range(depth))
        with self._lock:
            self._prefix_kv[depth] = (keys, values)
        return keys, values

    def _encode_blocks(
        self, pieces: Sequence[tuple[list[int], list[int]]], depth: int
    ) -> list[Block]:
        """Encode blocks of similar length together (right-padded; padding only follows a
        block's real tokens, so under the causal mask it changes none of their keys or values)."""
        from transformers import DynamicCache

        prefix_keys, prefix_values = self._prefix(depth)
        n_prefix = len(self._prefix_ids)
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i][0]))
        out: dict[int, Block] = {}
        batch: list[int] = []

        def flush() -> None:
            if not batch:
                return
            check_cancelled()  # a batch boundary
            width = max(len(pieces[i][0]) for i in batch)
            pad = self.proxy.tokenizer.pad_token_id or 0
            rows = [pieces[i][0] + [pad] * (width - len(pieces[i][0])) for i in batch]
            ids = torch.tensor(rows, dtype=torch.long, device=self.proxy.device)
            cache = DynamicCache()
            for layer in range(depth):
                cache.update(
                    prefix_keys[layer].unsqueeze(0).expand(len(batch), -1, -1, -1).contiguous(),
                    prefix_values[layer].unsqueeze(0).expand(len(batch), -1, -1, -1).contiguous(),
                    layer,
                )
            self._forward(ids, cache, n_prefix, depth)
            for row, i in enumerate(batch):
                n = len(pieces[i][0])
                keys, values = [], []
                for layer in range(depth):
                    k, v = self._layer_kv(cache, layer)
                    keys.append(k[row, :, n_prefix : n_prefix + n].clone())
                    values.append(v[row, :, n_prefix : n_prefix + n].clone())
                out[i] = Block(
                    ids=tuple(pieces[i][0]),
                    firsts=tuple(pieces[i][1]),
                    keys=tuple(keys),
                    values=tuple(values),
                )
            batch.clear()

        for i in order:
            if batch and max(len(pieces[j][0]) for j in (*batch, i)) * (len(batch) + 1) > (
                ENCODE_BATCH_TOKENS
            ):
                flush()
            batch.append(i)
        flush()
        return [out[i] for i in range(len(pieces))]

    def blocks(self, texts: Sequence[str], depth: int) -> list[Block]:
        """The blocks of ``texts`` (each already prefixed by ``BLOCK_SEPARATOR``), from the store
        where present, encoded (and stored) where not."""
        pieces = [self._encode_text(t) for t in texts]
        for ids, _ in pieces:
            if not ids:
                raise InvalidInputError("a cached document block needs at least one token")
        keys = [self.block_key(ids, depth) for ids, _ in pieces]
        found: list[Block | None] = [self.store.get(k) for k in keys]
        missing = [i for i, b in enumerate(found) if b is None]
        if missing:
            encoded = self._encode_blocks([pieces[i] for i in missing], depth)
            for i, block in zip(missing, encoded, strict=True):
                self.store.put(keys[i], block)
                found[i] = block
        return [b for b in found if b is not None]

    # -- reading ---------------------------------------------------------------------------------

    def _rotated(
        self, blocks: Sequence[Block], depth: int
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Prefix plus blocks per layer, each block's keys rotated on to its place."""
        prefix_keys, prefix_values = self._prefix(depth)
        shift = []
        start = 0
        for block in blocks:
            shift.append(torch.full((block.n_tokens,), float(start)))
            start += block.n_tokens
        delta = torch.cat(shift).to(self.proxy.device)  # positions moved by each block token
        angles = delta[:, None] * self._inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        keys, values = [], []
        for layer in range(depth):
            k = torch.cat([b.keys[layer] for b in blocks], dim=1)
            kf = k.float()
            k = (kf * cos + _rotate_half(kf) * sin).to(k.dtype)
            keys.append(torch.cat([prefix_keys[layer], k], dim=1).unsqueeze(0))
            values.append(
                torch.cat(
                    [prefix_values[layer], *[b.values[layer] for b in blocks]], dim=1
                ).unsqueeze(0)
            )
        return keys, values

    def attention_block(
        self,
        query: str,
        documents: Sequence[Document],
        units: Sequence[Unit],
        *,
        rows: Rows = "last",
        layers: int | None = None,
        max_chunk_tokens: int = 2048,
    ) -> tuple[np.ndarray, tuple[str, ...], int]:
        """Log-share attention features per unit, as
        :func:`ragattn.sentence_attention.attention_block`, with passages read as cached blocks.

        Documents are grouped, in order, into chunks of at most ``max_chunk_tokens`` block tokens;
        each chunk costs one tail forward. Returns the features, their names and the number of
        chunks.
        """
        heads, kinds = head_plan(self.proxy, rows=rows, layers=layers)
        depth = heads.deepest + 1
        out = np.zeros((len(units), len(heads) * len(kinds)), dtype=np.float64)
        pieces = self._pieces(documents, units)
        blocks = self.blocks([text for text, _, _ in pieces], depth)
        # The tail of sentinel_pieces: instruction, question, answer prefix.
        tail_text = SENTINEL_TAIL + query + (self._tail_suffix or "\n") + "Answer:"
        tail_ids, _ = self._encode_text(tail_text)
        query_offset = len(self._encode_text(SENTINEL_TAIL)[0])
        n_prefix = len(self._prefix_ids)
        chunks = self._plan(blocks, max_chunk_tokens)
        for chunk in chunks:
            check_cancelled()  # a chunk boundary
            chosen = [blocks[i] for i in chunk]
            context = sum(b.n_tokens for b in chosen)
            offset = n_prefix + context
            last = offset + len(tail_ids) - 1
            span_rows = [last] if rows == "last" else list(range(offset + query_offset, last + 1))
            cap = self.capture(chosen, tail_ids, span_rows, heads)
            scored, starts, ends = [], [], []
            base = 0
            for i, block in zip(chunk, chosen, strict=True):
                _, lo_char, members = pieces[i]
                shift = len(BLOCK_SEPARATOR) - lo_char  # document characters -> block text
                for u in members:
                    lo = bisect.bisect_left(block.firsts, units[u].start + shift)
                    hi = bisect.bisect_left(block.firsts, units[u].end + shift)
                    if hi <= lo:
                        continue
                    scored.append(u)
                    starts.append(base + lo)
                    ends.append(base + hi)
                base += block.n_tokens
            if not scored:
                continue
            ctx = (n_prefix, n_prefix + context)
            for b, kind in enumerate(kinds):
                out[scored, b * len(heads) : (b + 1) * len(heads)] = unit_shares(
                    cap.weights, kind, ctx, starts, ends
                )
        return np.log(out + EPS), feature_names(heads, kinds), len(chunks)

    def capture(
        self, blocks: Sequence[Block], tail_ids: Sequence[int], rows: Sequence[int], heads: HeadSet
    ) -> Capture:
        """Attention rows of the tail read over the prefix and ``blocks`` (in this order).

        ``rows`` are absolute positions in prefix + blocks + tail and must lie in the tail; the
        forward stops after ``heads.deepest``, and the blocks must be encoded at least that deep.
        """
        from transformers import DynamicCache

        depth = heads.deepest + 1
        if any(len(b.keys) < depth for b in blocks):
            raise ConfigError(f"blocks encoded to fewer than the {depth} layers these heads need")
        n_prefix = len(self._prefix_ids)
        offset = n_prefix + sum(b.n_tokens for b in blocks)
        if offset + len(tail_ids) > self.proxy.max_positions:
            raise InvalidInputError(
                f"prompt has {offset + len(tail_ids)} tokens; the proxy {self.proxy.name!r} "
                f"reads at most {self.proxy.max_positions}"
            )
        if any(not offset <= r < offset + len(tail_ids) for r in rows):
            raise InvalidInputError("captured rows must lie in the tail, after the blocks")
        keys, values = self._rotated(blocks, depth)
        cache = DynamicCache()
        for layer in range(depth):
            cache.update(keys[layer], values[layer], layer)
        engine = engine_for(self.proxy)
        state = CaptureState(rows=tuple(rows), heads=heads, reduce="none", stop_after=depth - 1)
        engine.run(tail_ids, state, cache, offset=offset)
        return engine.collect(state)

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        """The shared instruction prefix every block follows."""
        return self._prefix_ids

    @staticmethod
    def _plan(blocks: Sequence[Block], budget: int) -> list[list[int]]:
        chunks: list[list[int]] = [[]]
        used = 0
        for i, block in enumerate(blocks):
            if chunks[-1] and used + block.n_tokens > budget:
                chunks.append([])
                used = 0
            chunks[-1].append(i)
            used += block.n_tokens
        return [c for c in chunks if c]

    def _pieces(
        self, documents: Sequence[Document], units: Sequence[Unit]
    ) -> list[tuple[str, int, list[int]]]:
        """Block texts: ``(text, character offset of its first unit in the document, units)``.

        A passage is one block; a passage with its units over ``MAX_BLOCK_TOKENS`` is split into
        sentence-aligned blocks. Documents without units are not read.
        """
        by_doc: dict[int, list[int]] = {}
        for i, unit in enumerate(units):
            by_doc.setdefault(unit.doc, []).append(i)
        pieces: list[tuple[str, int, list[int]]] = []
        tok = self.proxy.tokenizer
        for d in sorted(by_doc):
            members = by_doc[d]
            text = documents[d].text
            costs = [
                len(ids) + 1
                for ids in tok(
                    [text[units[u].start : units[u].end] for u in members],
                    add_special_tokens=False,
                )["input_ids"]
            ]
            group: list[int] = []
            used = 0
            for u, cost in zip(members, costs, strict=True):
                if group and used + cost > MAX_BLOCK_TOKENS:
                    pieces.append(self._piece(text, units, group))
                    group, used = [], 0
                group.append(u)
                used += cost
            pieces.append(self._piece(text, units, group))
        return pieces

    @staticmethod
    def _piece(text: str, units: Sequence[Unit], group: list[int]) -> tuple[str, int, list[int]]:
        lo, hi = units[group[0]].start, units[group[-1]].end
        return BLOCK_SEPARATOR + text[lo:hi], lo, list(group)


__all__ = ["BLOCK_SEPARATOR", "BlockReader"]
