"""The capturing SDPA attention function that the proxy is loaded with, and the capture state it
reads.

:func:`ragattn.proxy.load_proxy` registers :func:`_capturing_sdpa` under :data:`ATTN_IMPLEMENTATION`
and loads the model with it; outside a capture the function is plain PyTorch SDPA. The capture
itself (what to read, the forward, collecting the rows) is :mod:`ragattn.attention`'s
``AttentionEngine``, which sets a :class:`CaptureState` in :data:`ACTIVE` for one forward. Split out
of ``attention.py`` so that the loader and the engine do not import each other: the proxy loader
needs this function, and the engine needs a loaded proxy.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from ragattn.errors import InvalidInputError, ModelOutputError

Reduce = Literal["mean", "none"]

ATTN_IMPLEMENTATION = "ragattn_sdpa"
"""Name under which :func:`register_attention` registers the capturing SDPA with transformers; the
proxy loader (:func:`ragattn.proxy.load_proxy`) asks for it as ``attn_implementation``."""


@dataclass(frozen=True, slots=True)
class HeadSet:
    """A set of (layer, head) pairs, kept sorted layer-major (index ``layer * H + head`` order)."""

    pairs: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.pairs:
            raise InvalidInputError("a head set needs at least one (layer, head) pair")
        object.__setattr__(self, "pairs", tuple(sorted(set(self.pairs))))

    @classmethod
    def all(cls, num_layers: int, num_heads: int) -> HeadSet:
        return cls(tuple((layer, h) for layer in range(num_layers) for h in range(num_heads)))

    @classmethod
    def from_layers(cls, layers: Iterable[int], num_heads: int) -> HeadSet:
        return cls(tuple((layer, h) for layer in layers for h in range(num_heads)))

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(sorted({layer for layer, _ in self.pairs}))

    @property
    def deepest(self) -> int:
        return self.pairs[-1][0]

    def heads_of(self, layer: int) -> tuple[int, ...]:
        return tuple(h for pair_layer, h in self.pairs if pair_layer == layer)

    def __len__(self) -> int:
        return len(self.pairs)

    def validate(self, num_layers: int, num_heads: int) -> None:
        bad = [
            (layer, h)
            for layer, h in self.pairs
            if not (0 <= layer < num_layers and 0 <= h < num_heads)
        ]
        if bad:
            raise InvalidInputError(
                f"head pairs {bad[:5]} are outside the proxy's {num_layers} layers "
                f"x {num_heads} heads"
            )


@dataclass(slots=True)
class CaptureState:
    """Per-forward capture request, read by the attention function through a context variable.

    :meth:`prepare` builds every index tensor on the model's device before the forward starts: the
    layer loop then only launches device kernels (no host-to-device copy per layer).
    """

    rows: tuple[int, ...]
    heads: HeadSet | None  # None: run (e.g. a shared prefix) without capturing anything
    reduce: Reduce
    stop_after: int | None
    per_layer: dict[int, torch.Tensor] = field(default_factory=dict)
    head_index: dict[int, torch.Tensor] = field(default_factory=dict)
    offset: int = 0  # tokens already in the KV cache before this forward
    n_keys: int = 0  # keys each layer sees: offset + this forward's tokens
    local_rows: torch.Tensor | None = None  # rows - offset, [R]
    causal: torch.Tensor | None = None  # [R, n_keys]: key position <= row position
    windowed: dict[int, torch.Tensor] = field(default_factory=dict)  # window -> [R, n_keys]
    keys: torch.Tensor | None = None  # key positions 0..n_keys-1
    positions: torch.Tensor | None = None  # absolute row positions, [R]

    def prepare(self, device: torch.device, offset: int, n_tokens: int) -> None:
        """Index tensors for a forward of ``n_tokens`` on top of ``offset`` cached tokens."""
        self.offset, self.n_keys = offset, offset + n_tokens
        if self.heads is None:
            return
        if any(not offset <= r < self.n_keys for r in self.rows):
            raise InvalidInputError("all captured rows must lie in the same forward call")
        # One copy for all layers; each layer's index is a view into it.
        per_layer = [self.heads.heads_of(layer) for layer in self.heads.layers]
        flat = torch.tensor(
            [h for heads in per_layer for h in heads], dtype=torch.long, device=device
        )
        start = 0
        for layer, heads in zip(self.heads.layers, per_layer, strict=True):
            self.head_index[layer] = flat[start : start + len(heads)]
            start += len(heads)
        self.local_rows = torch.tensor(
            [r - offset for r in self.rows], dtype=torch.long, device=device
        )
        self.positions = self.local_rows + offset
        self.keys = torch.arange(self.n_keys, device=device)
        self.causal = self.keys[None, :] <= self.positions[:, None]

    def allowed(self, window: int | None) -> torch.Tensor:
        """``[R, n_keys]`` keys each row may see: causal, and within ``window`` if given."""
        assert self.causal is not None and self.keys is not None and self.positions is not None
        if not window:
            return self.causal
        mask = self.windowed.get(window)
        if mask is None:
            mask = self.causal & (self.keys[None, :] > self.positions[:, None] - window)
            self.windowed[window] = mask
        return mask


ACTIVE: contextvars.ContextVar[CaptureState | None] = contextvars.ContextVar(
    "ragattn_capture", default=None
)


class StopForward(Exception):
    """Raised by a layer pre-hook to end the forward pass after the deepest needed layer."""


def _observe(
    module: Any, query: torch.Tensor, key: torch.Tensor, scaling: float | None, kwargs: dict
) -> None:
    state = ACTIVE.get()
    if state is None or state.local_rows is None:
        return
    layer = int(module.layer_idx)
    heads = state.head_index.get(layer)
    if heads is None:
        return
    q_len, k_len = query.shape[2], key.shape[2]
    if k_len != state.n_keys or k_len - q_len != state.offset:
        raise ModelOutputError(
            f"layer {layer} sees {k_len} keys after {k_len - q_len} cached ones; expected "
            f"{state.n_keys} after {state.offset} (a cache that drops keys is not supported)"
        )
    groups = query.shape[1] // key.shape[1]
    q = query[0].index_select(0, heads).index_select(1, state.local_rows).float()  # [h, r, d]
    k = key[0].index_select(0, heads // groups).float()  # [h, n, d]
    scale = scaling if scaling is not None else q.shape[-1] ** -0.5
    logits = torch.matmul(q, k.transpose(-1, -2)) * scale  # [h, r, n]
    softcap = kwargs.get("softcap")
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    window = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
    allowed = state.allowed(int(window) if window else None)
    logits = logits.masked_fill(~allowed[None], float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    state.per_layer[layer] = probs.mean(dim=1, keepdim=True) if state.reduce == "mean" else probs


def _capturing_sdpa(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    _observe(module, query, key, scaling, kwargs)
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, **kwargs
    )


_REGISTERED = False


def register_attention() -> None:
    """Register the capturing SDPA with transformers' attention and mask interfaces (idempotent)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, _capturing_sdpa)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, sdpa_mask)
    _REGISTERED = True


__all__ = [
    "ACTIVE",
    "ATTN_IMPLEMENTATION",
    "CaptureState",
    "HeadSet",
    "Reduce",
    "StopForward",
    "register_attention",
]
