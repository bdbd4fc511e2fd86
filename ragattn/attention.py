"""Attention capture: softmax rows for chosen query positions, heads and layers, next to a fast
SDPA pass.

The forward pass itself runs PyTorch SDPA. For each selected layer, a registered attention function
also takes the post-RoPE (and, for Gemma 3, post-QK-norm) queries of the requested positions and all
keys of the layer (including any cached prefix), repeats the keys for grouped-query attention,
applies the module's own scaling, soft-cap, causal and sliding-window masks, and computes the
softmax over all keys in fp32 for those rows only. Nothing of size layers × heads × n × n is ever
materialized.

The forward stops after the deepest selected layer (no later layers, no LM head). A calibration
twin that shares a token prefix with the real prompt reuses the prefix's KV cache, so documents are
encoded once and each twin costs only its tail.

Everything runs on the proxy's device: the input ids and the index tensors (heads, rows, key
positions, causal mask) are built there once per forward, before the layer loop, so no layer copies
anything between host and device; the captured rows stay on the device (callers reduce them there
and move only per-document or per-sentence results to the CPU).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch

from ragattn.cancel import check_cancelled
from ragattn.errors import InvalidInputError, ModelOutputError, TokenizerError

if TYPE_CHECKING:  # proxy.py imports this module to register the attention function
    from ragattn.proxy import Proxy

Reduce = Literal["mean", "none"]

ATTN_IMPLEMENTATION = "ragattn_sdpa"
"""Name under which :func:`register_attention` registers the capturing SDPA with transformers; the
proxy loader asks for it as ``attn_implementation``."""


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


@dataclass(frozen=True, slots=True)
class Capture:
    """Captured attention rows.

    ``weights`` has shape ``[len(heads), R, n_keys]`` in fp32, on the proxy's device (reduce there,
    then ``.cpu()`` the small result), where R is the number of requested
    rows (``reduce="none"``) or 1 (``reduce="mean"``: the mean over the rows). Each row is a
    probability distribution over all ``n_keys`` earlier positions (it sums to 1 over the keys it
    may see).
    Head order follows ``heads.pairs``.
    """

    weights: torch.Tensor
    heads: HeadSet
    rows: tuple[int, ...]
    reduce: Reduce

    @property
    def n_keys(self) -> int:
        return int(self.weights.shape[-1])


@dataclass(slots=True)
class _CaptureState:
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


_ACTIVE: contextvars.ContextVar[_CaptureState | None] = contextvars.ContextVar(
    "ragattn_capture", default=None
)


class _StopForward(Exception):
    """Raised by a layer pre-hook to end the forward pass after the deepest needed layer."""


def _observe(
    module: Any, query: torch.Tensor, key: torch.Tensor, scaling: float | None, kwargs: dict
) -> None:
    state = _ACTIVE.get()
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


class AttentionEngine:
    """Runs forward passes of a :class:`~ragattn.proxy.Proxy` and captures attention rows.

    One engine per proxy; it installs layer pre-hooks (no-ops unless a capture is active) that end
    the forward after the deepest layer a request needs, and stop cancelled work before each layer
    (:func:`ragattn.cancel.check_cancelled`).
    """

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self._cache_kw = (
            "cache"
            if "cache" in inspect.signature(proxy.decoder.forward).parameters
            else "past_key_values"
        )
        for index, layer in enumerate(proxy.layers):
            layer.register_forward_pre_hook(self._make_stop_hook(index))

    @staticmethod
    def _make_stop_hook(index: int) -> Any:
        def hook(_module: Any, _args: Any) -> None:
            check_cancelled()  # a layer boundary: abandoned work stops here (ragattn.cancel)
            state = _ACTIVE.get()
            if state is not None and state.stop_after is not None and index > state.stop_after:
                raise _StopForward

        return hook

    def _check_ids(self, ids: Sequence[int]) -> None:
        if len(ids) == 0:
            raise TokenizerError("cannot run the proxy on an empty token sequence")
        if len(ids) > self.proxy.max_positions:
            raise InvalidInputError(
                f"prompt has {len(ids)} tokens; the proxy {self.proxy.name!r} reads at most "
                f"{self.proxy.max_positions}"
            )

    def _run(
        self, ids: Sequence[int], state: _CaptureState, cache: Any | None, offset: int = 0
    ) -> None:
        """One forward over ``ids`` after ``offset`` tokens already in ``cache``."""
        device = self.proxy.device
        state.prepare(device, offset, len(ids))
        token = _ACTIVE.set(state)
        try:
            with torch.inference_mode():
                input_ids = torch.tensor([list(ids)], dtype=torch.long, device=device)
                kwargs: dict[str, Any] = {"input_ids": input_ids}
                if cache is not None:
                    kwargs[self._cache_kw] = cache
                    kwargs["use_cache"] = True
                else:
                    kwargs["use_cache"] = False
                with contextlib.suppress(_StopForward):
                    self.proxy.decoder(**kwargs)
        finally:
            _ACTIVE.reset(token)

    def _collect(self, state: _CaptureState) -> Capture:
        assert state.heads is not None  # only capturing states are collected
        parts = []
        for layer in state.heads.layers:
            if layer not in state.per_layer:
                raise InvalidInputError(
                    f"layer {layer} captured nothing; rows {state.rows[:3]}... out of range"
                )
            parts.append(state.per_layer[layer])
        weights = torch.cat(parts, dim=0)
        if not bool(torch.isfinite(weights).all()):
            # A NaN here would score every document alike and look like a real answer downstream.
            raise ModelOutputError("the proxy produced non-finite attention weights (NaN/Inf)")
        return Capture(weights=weights, heads=state.heads, rows=state.rows, reduce=state.reduce)

    def capture(
        self,
        ids: Sequence[int],
        rows: Sequence[int],
        heads: HeadSet,
        *,
        reduce: Reduce = "mean",
        early_exit: bool = True,
    ) -> Capture:
        """One forward over ``ids``; attention rows of positions ``rows`` for ``heads``.

        Args:
            ids: the prompt's token ids (batch of one).
            rows: absolute positions whose attention rows to capture (e.g. the query span).
            heads: the (layer, head) pairs to capture.
            reduce: ``"mean"`` averages the rows (ICR), ``"none"`` keeps each row.
            early_exit: stop after ``heads.deepest``; results are identical either way.
        """
        self._check_ids(ids)
        self._check_rows(rows, len(ids), heads)
        state = _CaptureState(
            rows=tuple(rows),
            heads=heads,
            reduce=reduce,
            stop_after=heads.deepest if early_exit else None,
        )
        self._run(ids, state, None)
        return self._collect(state)

    def capture_shared_prefix(
        self,
        prefix: Sequence[int],
        tails: Sequence[tuple[Sequence[int], Sequence[int]]],
        heads: HeadSet,
        *,
        reduce: Reduce = "mean",
        early_exit: bool = True,
    ) -> list[Capture]:
        """Encode ``prefix`` once, then run each ``(tail_ids, rows)`` on top of its KV cache.

        ``rows`` are absolute positions in ``prefix + tail``. Each result equals a full forward over
        ``prefix + tail`` (the calibration twin of ICR is the common case: documents in the prefix,
        the real query and ``N/A`` as two tails).
        """
        from transformers import DynamicCache

        if not tails:
            return []
        longest = max((list(t) for t, _ in tails), key=len)
        self._check_ids(list(prefix) + longest)
        heads.validate(self.proxy.num_layers, self.proxy.num_heads)
        stop = heads.deepest if early_exit else None
        cache = DynamicCache()
        if len(prefix) > 0:
            self._run(
                prefix, _CaptureState(rows=(), heads=None, reduce="mean", stop_after=stop), cache
            )
        results = []
        for tail, rows in tails:
            if len(tail) == 0:
                raise TokenizerError("a tail after the shared prefix must hold at least one token")
            total = len(prefix) + len(tail)
            self._check_rows(rows, total, heads)
            if any(r < len(prefix) for r in rows):
                raise InvalidInputError(
                    "captured rows must lie in the tail, after the shared prefix"
                )
            state = _CaptureState(rows=tuple(rows), heads=heads, reduce=reduce, stop_after=stop)
            self._run(tail, state, cache, offset=len(prefix))
            # A negative crop removes that many tokens in every transformers version we support.
            cache.crop(-len(tail))
            results.append(self._collect(state))
        return results

    def _check_rows(self, rows: Sequence[int], length: int, heads: HeadSet) -> None:
        heads.validate(self.proxy.num_layers, self.proxy.num_heads)
        if not rows:
            raise InvalidInputError("at least one query row must be captured")
        if any(not 0 <= r < length for r in rows):
            raise InvalidInputError(f"captured rows must lie in [0, {length})")


def engine_for(proxy: Proxy) -> AttentionEngine:
    """The engine of ``proxy``, created once (its hooks are installed once per model)."""
    engine = getattr(proxy.model, "_ragattn_engine", None)
    if engine is None:
        engine = AttentionEngine(proxy)
        proxy.model._ragattn_engine = engine
    return engine
