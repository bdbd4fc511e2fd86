"""The store of cached document blocks: each passage's keys and values, bounded in bytes.

:mod:`ragattn.blocks` encodes a passage once as a :class:`Block` and reads it back from a
:class:`BlockStore`, an LRU shared by every request of a process. Units: ``Block.nbytes`` and every
store size are bytes; token counts are proxy tokens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

from ragattn.errors import ConfigError
from ragattn.proxy import Proxy


@dataclass(frozen=True, slots=True, eq=False)
class Block:
    """One encoded passage piece: its token ids, each token's first non-space character in the
    block text (``BLOCK_SEPARATOR`` + passage text), and per layer its keys (RoPE at positions
    after the prefix) and values, each ``[kv_heads, n_tokens, head_dim]``."""

    ids: tuple[int, ...]
    firsts: tuple[int, ...]
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Bytes held by the keys and values."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class BlockStore:
    """A thread-safe LRU of :class:`Block` s, bounded by ``max_bytes`` of key/value tensors.

    Counters (``hits``, ``misses``, ``evictions``) are cumulative; ``nbytes`` is what it holds now.
    A block larger than the whole bound is not kept.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ConfigError(f"the block store's byte limit must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._items: OrderedDict[str, Block] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Block | None:
        with self._lock:
            block = self._items.get(key)
            if block is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return block

    def put(self, key: str, block: Block) -> None:
        size = block.nbytes
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            if size > self.max_bytes:
                return
            self._items[key] = block
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self.nbytes -= evicted.nbytes
                self.evictions += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "blocks": len(self._items),
                "bytes": self.nbytes,
                "max_bytes": self.max_bytes,
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
            }


def bytes_per_token(proxy: Proxy, depth: int | None = None) -> int:
    """Key/value bytes one cached token costs: layers x 2 x kv heads x head dim x element size."""
    layers = proxy.num_layers if depth is None else depth
    head_dim = int(
        getattr(proxy.config, "head_dim", None) or proxy.config.hidden_size // proxy.num_heads
    )
    element = torch.tensor([], dtype=proxy.dtype).element_size()
    return layers * 2 * proxy.num_kv_heads * head_dim * element


__all__ = ["Block", "BlockStore", "bytes_per_token"]
